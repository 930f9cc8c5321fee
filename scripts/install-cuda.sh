#!/usr/bin/env bash
# Install the CUDA toolkit pieces the engine builds against (nvcc, cudart headers and the shared
# runtime), idempotently.
#   release toolchain install cuda [VERSION] [--runtime-only] [--from-pypi] [--target=MACHINE]
#   (default 13.0; here also bash scripts/install-cuda.sh)
# VERSION is the variant's `toolkit`; an install already there is used when it has that
# major.minor (version.json, version.txt or CUDART_VERSION, as the toolkit reads it).
# --runtime-only installs the shared runtime a wheel binds (its soname per CUDA major comes from
# runtimes.tsv beside this script, generated from packaging/backends/cuda.json), no nvcc.
# Debian/Ubuntu and manylinux_2_28 / AlmaLinux 8, from NVIDIA's package repositories; or, with
# --from-pypi, on any distribution from NVIDIA's wheels on PyPI (nvidia-cuda-runtime, -nvcc, -crt,
# -cccl: CUDA 13 and later), laid out as /usr/local/cuda-VERSION with pip (PYTHON, else python3,
# else the newest /opt/python/cp3*/bin/python). That toolkit has nvcc, the runtime headers and
# libcudart: enough for host code that calls the runtime, no device compiler back end (nvvm).
# Every toolkit install (not --runtime-only), one found already there included, ends with the
# driver's link stub lib64/stubs/libcuda.so (what CMake's CUDA::cuda_driver links): NVIDIA's
# packages ship it; where it is missing (NVIDIA's PyPI wheels have none) it is made from the
# toolkit's own cuda.h (see driver_stub below).
# --target=MACHINE (with --from-pypi; x86_64 or aarch64) adds another machine's CUDA beside this
# machine's toolkit, for cross builds (release/builder/cross.py): NVIDIA's runtime wheel of that
# machine (`pip download --platform manylinux_2_17_MACHINE`: headers and libcudart; aarch64 is
# sbsa) laid out as NVIDIA's cross packages do, /usr/local/cuda-VERSION/targets/sbsa-linux/{include,lib}
# (CMake's FindCUDAToolkit looks there when CMAKE_SYSTEM_PROCESSOR is aarch64), and the driver's
# link stub lib/stubs/libcuda.so compiled for that machine with $CC (else MACHINE-linux-gnu-gcc).
# The target's loader path is written to /usr/MACHINE-linux-gnu/etc/ld.so.conf.d/ (what runs the
# target's programs under emulation reads it: scripts/cross-build.sh run), never to this machine's;
# the stub's directory to /usr/MACHINE-linux-gnu/etc/link-only.d/ (what a cross build's compilers
# link with: scripts/cross-build.sh wheel).
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "$0")/_common.sh"

version="" runtime_only="" from_pypi="" target=""
usage="usage: install-cuda.sh [VERSION] [--runtime-only] [--from-pypi] [--target=MACHINE]"
for arg in "$@"; do
  case "$arg" in
    --runtime-only) runtime_only=1 ;;
    --from-pypi) from_pypi=1 ;;
    --target=*) target="${arg#--target=}" ;;
    -*) die "unknown option $arg ($usage)" ;;
    *) [ -z "$version" ] || die "one version at most ($usage)"
       version="$arg" ;;
  esac
done
version="${version:-${CUDA_VERSION:-13.0}}"
check_version_arg "$version"
major="${version%%.*}"
dashed="${version/./-}"
soname="" known=""
table="$(dirname "$0")/runtimes.tsv"
[ -r "$table" ] || die "$table is missing: it ships beside this script (\`release schema --write\` writes it)"
while IFS=$'\t' read -r b m so _deb _arch _rel; do
  [ "$b" = cuda ] || continue
  known="${known:+$known, }$m"
  [ "$m" != "$major" ] || soname="$so"
done < <(grep -v '^#' "$table")
[ -n "$soname" ] || die "CUDA $version: the toolkit knows the runtime of CUDA $known only \
(runtime_sonames in packaging/backends/cuda.json)"
# driver_stub PREFIX: the link-time libcuda.so under PREFIX/lib64/stubs, as NVIDIA's toolkit has it,
# for engines that call the driver API (cuPointerGetAttribute, cuMem*): CMake's FindCUDAToolkit
# finds it for CUDA::cuda_driver, and what links it NEEDs libcuda.so.1, which the NVIDIA driver
# provides at load time. NVIDIA's stub is a symbols-only library: every driver API function,
# each returning CUDA_ERROR_STUB_LIBRARY (34), SONAME libcuda.so.1. Where the toolkit has none
# (NVIDIA's PyPI wheels ship no stubs/), the same is made here with this machine's C compiler
# from the names the toolkit's own cuda.h declares (as written, per-thread-stream and the
# versioned ABI names alike). It lives only under stubs/: never on the loader's path, never in
# ld.so.conf.d, and no libcuda.so.1 file exists there, so nothing ever loads it at run time.
driver_stub() {
  local prefix="$1" libdir stub header cc tmp defs
  libdir="$prefix/lib64"
  [ -d "$libdir" ] || libdir="$prefix/lib"
  stub="$libdir/stubs/libcuda.so"
  if [ -e "$stub" ]; then
    log "the driver's link stub is there: $stub"
    return 0
  fi
  header="$prefix/include/cuda.h"
  [ -f "$header" ] || die "$prefix has no include/cuda.h: cannot make the driver's link stub $stub"
  cc="${CC:-}"
  [ -n "$cc" ] || cc="$(command -v cc || command -v gcc || true)"
  [ -n "$cc" ] || die "no C compiler (cc, gcc or \$CC) to make the driver's link stub $stub from $header"
  dry_run && { log "would make the driver's link stub $stub from $header"; return 0; }
  tmp="$(mktemp -d)"
  for defs in "" -DCUDA_API_PER_THREAD_DEFAULT_STREAM -D__CUDA_API_VERSION_INTERNAL; do
    # shellcheck disable=SC2086  # $defs is one flag or none
    "$cc" -E -P -x c $defs -I "$prefix/include" "$header" \
      || die "the C preprocessor ($cc) cannot read $header"
  done | grep -oE '\bcu[A-Z][A-Za-z0-9_]*[[:space:]]*\(' | tr -d ' \t(' | sort -u > "$tmp/names"
  grep -qx cuDriverGetVersion "$tmp/names" && grep -qx cuPointerGetAttribute "$tmp/names" \
    || die "$header declares no driver API functions (cuDriverGetVersion, cuPointerGetAttribute): not NVIDIA's cuda.h?"
  {
    printf '/* The CUDA driver link stub, made by install-cuda.sh from %s. */\n' "$header"
    sed 's/.*/int &(void) { return 34; }/' "$tmp/names"  # 34: CUDA_ERROR_STUB_LIBRARY
  } > "$tmp/stub.c"
  "$cc" -shared -fPIC -O1 -s -nostdlib -Wl,-soname,libcuda.so.1 -o "$tmp/libcuda.so" "$tmp/stub.c" \
    || die "$cc could not compile the driver's link stub from $header"
  as_root mkdir -p "$libdir/stubs"
  as_root install -m 0755 "$tmp/libcuda.so" "$stub"
  log "made the driver's link stub $stub ($(wc -l < "$tmp/names") driver API functions of $header, SONAME libcuda.so.1)"
  rm -rf "$tmp"
}

cuda_version() { toolkit_probe cuda "$1"; }

# pip_python: PYTHON, else python3, else the newest /opt/python/cp3*/bin/python (manylinux, local
# images), checked to have pip.
pip_python() {
  local py="${PYTHON:-}"
  if [ -z "$py" ]; then
    py="$(command -v python3 || true)"
    [ -n "$py" ] || py="$(ls -d /opt/python/cp3*-cp3*/bin/python 2>/dev/null | sort -V | tail -n 1 || true)"
  fi
  [ -n "$py" ] && "$py" -m pip --version >/dev/null 2>&1 \
    || die "--from-pypi needs a Python with pip (set PYTHON, or put python3 on PATH)"
  printf '%s\n' "$py"
}

# install_target: --target=MACHINE (see the header): another machine's runtime and driver stub
# under this machine's toolkit, as NVIDIA's cuda-cross-* packages lay it out.
nv_target() {  # MACHINE: NVIDIA's name of its targets/ directory
  case "$1" in
    x86_64) echo x86_64-linux ;;
    aarch64|arm64) echo sbsa-linux ;;  # aarch64 servers (Grace); aarch64-linux is Jetson's
    *) return 1 ;;
  esac
}

install_target() {
  local nv own root dest tmp py wheel tree found conf links
  nv="$(nv_target "$target")" || die "--target=$target: NVIDIA's CUDA wheels are for x86_64 and aarch64 only"
  own="$(nv_target "$(uname -m)")" || own=""
  [ "$nv" != "$own" ] || die "--target=$target is this machine: install CUDA $version without --target"
  [ -n "$from_pypi" ] && [ -z "$runtime_only" ] \
    || die "--target=$target needs --from-pypi and a whole toolkit (NVIDIA's wheels of each machine are on PyPI)"
  [ "$major" -ge 13 ] || die "--target: CUDA $version: NVIDIA's PyPI wheels carry the nvidia/cuMAJOR layout from CUDA 13 on"
  root="/usr/local/cuda-$version"
  [ -x "$root/bin/nvcc" ] || dry_run \
    || die "--target=$target: no CUDA $version for this machine at $root to add it to (install-cuda.sh $version --from-pypi first)"
  dest="$root/targets/$nv"
  conf="/usr/$target-linux-gnu/etc/ld.so.conf.d/cuda-$dashed-$nv.conf"
  # The driver stub's directory is for the linker alone: listed apart from the loader's path, for
  # cross builds to link `-lcuda` with (a cross GCC reads no LIBRARY_PATH: scripts/cross-build.sh).
  links="/usr/$target-linux-gnu/etc/link-only.d/cuda-$dashed-$nv.conf"
  export CC="${CC:-$target-linux-gnu-gcc}"
  found="$(cuda_version "$dest")"
  if same_release "$version" "$found" && [ -e "$dest/lib/libcudart.so" ] && [ -e "$dest/lib/stubs/libcuda.so" ] \
    && [ -e "$links" ] && [ -e "$dest/include/crt" ]; then
    log "CUDA $found for $target is already under $dest: nothing to do"
    return 0
  fi
  py="$(pip_python)"
  dry_run && { log "would download NVIDIA's nvidia-cuda-runtime==$version.* for $target into $dest, make its driver stub with $CC and write $conf"; return 0; }
  # nvcc reads its headers and libraries under targets/ once that exists (the INCLUDES CMake takes
  # from it): this machine's own directory there, as NVIDIA's packages make it, links to the
  # toolkit's include/ and lib/.
  if [ -n "$own" ] && [ ! -e "$root/targets/$own" ]; then
    as_root mkdir -p "$root/targets/$own"
    as_root ln -s ../../include "$root/targets/$own/include"
    as_root ln -s ../../lib "$root/targets/$own/lib"
  fi
  tmp="$(mktemp -d)"
  log "adding CUDA $version for $target ($nv) under $root from NVIDIA's PyPI wheel nvidia-cuda-runtime"
  "$py" -m pip download -q --no-deps --disable-pip-version-check --only-binary=:all: -d "$tmp" \
    --platform "manylinux_2_28_$target" --platform "manylinux_2_17_$target" "nvidia-cuda-runtime==$version.*" \
    || die "pip could not download nvidia-cuda-runtime==$version.* for $target (manylinux_2_17_$target) from the index"
  wheel="$(ls "$tmp"/nvidia_cuda_runtime-*.whl | sed -n 1p)"
  "$py" -m zipfile -e "$wheel" "$tmp/tree"
  tree="$tmp/tree/nvidia/cu$major"
  [ -f "$tree/include/cuda_runtime_api.h" ] && [ -f "$tree/lib/$soname" ] \
    || die "$(basename "$wheel") has no nvidia/cu$major/include/cuda_runtime_api.h or lib/$soname: its layout changed"
  as_root mkdir -p "$dest"
  as_root cp -r "$tree/include" "$tree/lib" "$dest/"
  as_root ln -sfn "$soname" "$dest/lib/libcudart.so"
  # cuda_runtime.h includes crt/host_config.h, which NVIDIA ships with nvcc, not the runtime: the
  # toolkit's own crt/ headers (machine-neutral, of the same release), as a cross package has them.
  if [ -d "$root/include/crt" ] && [ ! -e "$dest/include/crt" ]; then
    as_root cp -r "$root/include/crt" "$dest/include/crt"
  fi
  rm -rf "$tmp"
  found="$(cuda_version "$dest")"
  same_release "$version" "$found" || die "$dest reports CUDA ${found:-of unknown version}, not $version"
  driver_stub "$dest"
  as_root mkdir -p "$(dirname "$conf")"
  printf '%s\n' "$dest/lib" | write_root_file "$conf"
  as_root mkdir -p "$(dirname "$links")"
  printf '%s\n' "$dest/lib/stubs" | write_root_file "$links"
  log "done: CUDA $found for $target in $dest (headers, $soname, the driver stub for $target; its loader path in $conf, its link-only directory in $links)"
}

if [ -n "$target" ]; then
  install_target
  exit 0
fi

other=""
for prefix in "${CUDA_HOME:-}" "${CUDA_PATH:-}" "/usr/local/cuda-$version" /usr/local/cuda; do
  if [ -n "$runtime_only" ] && [ -n "$prefix" ] && compgen -G "$prefix/lib*/$soname*" >/dev/null; then
    log "the CUDA $major runtime ($soname) is already installed under $prefix: nothing to do"
    exit 0
  fi
  [ -n "$prefix" ] && [ -x "$prefix/bin/nvcc" ] && [ -f "$prefix/include/cuda_runtime_api.h" ] || continue
  found="$(cuda_version "$prefix")"
  if same_release "$version" "$found"; then
    if [ -n "$runtime_only" ] || compgen -G "$prefix/lib*/stubs/libcuda.so" >/dev/null; then
      log "CUDA $found already installed at $prefix: nothing to do"
      exit 0
    fi
    log "CUDA $found already installed at $prefix, without the driver's link stub"
    driver_stub "$prefix"
    exit 0
  fi
  other="${other:-CUDA ${found:-of unknown version} is installed at $prefix}"
done
[ -z "$other" ] || log "$other, but the matrix declares $version: installing $version beside it"

# --from-pypi: NVIDIA's wheels (one per component, named without a -cuXY suffix from CUDA 13 on,
# each under nvidia/cuMAJOR/) unpacked into /usr/local/cuda-VERSION, the layout the toolkit and
# CMake's FindCUDAToolkit read (bin/nvcc, include/, lib64/libcudart.so).
install_from_pypi() {
  local py tmp dest="/usr/local/cuda-$version" tree c
  [ "$major" -ge 13 ] || die "--from-pypi: CUDA $version: NVIDIA's PyPI wheels carry the nvidia/cuMAJOR layout from CUDA 13 on; install CUDA $version from NVIDIA's repository (without --from-pypi)"
  py="$(pip_python)"
  dry_run && { log "would install CUDA $version from PyPI into $dest"; return 0; }
  local wheels=("nvidia-cuda-runtime==$version.*")
  [ -n "$runtime_only" ] || wheels+=("nvidia-cuda-nvcc==$version.*" "nvidia-cuda-crt==$version.*" "nvidia-cuda-cccl==$version.*")
  tmp="$(mktemp -d)"
  log "installing CUDA $version from NVIDIA's PyPI wheels (${wheels[*]%%==*}) into $dest"
  "$py" -m pip install -q --no-deps --disable-pip-version-check --root-user-action=ignore --target "$tmp" "${wheels[@]}" \
    || die "pip could not install CUDA $version's wheels (${wheels[*]}) from the index"
  tree="$tmp/nvidia/cu$major"
  [ -f "$tree/include/cuda_runtime_api.h" ] && { [ -n "$runtime_only" ] || [ -x "$tree/bin/nvcc" ]; } \
    || die "NVIDIA's CUDA $version wheels have no nvidia/cu$major/include/cuda_runtime_api.h (or bin/nvcc): their layout changed"
  as_root mkdir -p "$dest"
  as_root cp -a "$tree/." "$dest/"
  rm -rf "$tmp"
  [ -e "$dest/lib64" ] || as_root ln -s lib "$dest/lib64"
  for c in "$dest"/lib/libcudart.so.[0-9]*; do
    if [ -e "$c" ]; then as_root ln -sfn "$(basename "$c")" "$dest/lib/libcudart.so"; fi
  done
  [ -e "$dest/lib/libcudart.so" ] || die "NVIDIA's CUDA $version runtime wheel has no lib/libcudart.so.N"
  [ -e /usr/local/cuda ] || as_root ln -s "cuda-$version" /usr/local/cuda
  # As NVIDIA's packages do: the loader finds the runtime (cibuildwheel's import test, smoke runs).
  if [ -d /etc/ld.so.conf.d ]; then
    printf '%s\n' "$dest/lib" | as_root tee "/etc/ld.so.conf.d/cuda-$dashed-pypi.conf" >/dev/null
    as_root ldconfig
  fi
  found="$(cuda_version "$dest")"
  same_release "$version" "$found" || die "$dest reports CUDA ${found:-of unknown version}, not $version"
  [ -n "$runtime_only" ] || driver_stub "$dest"
  log "done: CUDA $found from PyPI in $dest ($([ -n "$runtime_only" ] || printf 'nvcc, the driver stub, ')headers, $(basename "$(readlink -f "$dest/lib/libcudart.so")"))"
}

if [ -n "$from_pypi" ]; then
  install_from_pypi
  exit 0
fi

family="$(os_family)" || exit 1
# NVIDIA's repositories name the machine: x86_64, and sbsa for aarch64 servers (Grace).
case "$(uname -m)" in
  x86_64) nv_arch=x86_64 ;;
  aarch64|arm64) nv_arch=sbsa ;;
  *) die "NVIDIA's CUDA repositories have no packages for $(uname -m) (x86_64 and aarch64 only)" ;;
esac
case "$family" in
  debian)
    # shellcheck disable=SC1090
    . "$(os_release)"
    distro="${ID}${VERSION_ID//./}"
    log "installing CUDA $version from NVIDIA's repository for $distro"
    apt_install ca-certificates curl
    tmp="$(mktemp -d)"
    url="https://developer.download.nvidia.com/compute/cuda/repos/$distro/$nv_arch/cuda-keyring_1.1-1_all.deb"
    dry_run || fetch "$url" > "$tmp/keyring.deb" \
      || die "downloading NVIDIA's repository keyring failed ($url): no network to developer.download.nvidia.com, or no repository for $distro"
    as_root dpkg -i "$tmp/keyring.deb" || die "installing NVIDIA's repository keyring failed"
    rm -rf "$tmp"
    _APT_UPDATED=
    packages=("cuda-nvcc-$dashed" "cuda-cudart-dev-$dashed")
    [ -z "$runtime_only" ] || packages=("cuda-cudart-$dashed")
    apt_install "${packages[@]}" \
      || die "apt could not install CUDA $version (cuda-nvcc-$dashed, cuda-cudart-dev-$dashed) from NVIDIA's repository"
    ;;
  rhel)
    log "installing CUDA $version from NVIDIA's rhel8 repository"
    as_root dnf install -y dnf-plugins-core
    as_root dnf config-manager --add-repo "https://developer.download.nvidia.com/compute/cuda/repos/rhel8/$nv_arch/cuda-rhel8.repo" \
      || die "adding NVIDIA's rhel8 repository failed (no network to developer.download.nvidia.com?)"
    packages=("cuda-nvcc-$dashed" "cuda-cudart-devel-$dashed")
    [ -z "$runtime_only" ] || packages=("cuda-cudart-$dashed")
    as_root dnf install -y "${packages[@]}" \
      || die "dnf could not install CUDA $version (cuda-nvcc-$dashed, cuda-cudart-devel-$dashed)"
    ;;
  *) die "unsupported distribution family '$family'" ;;
esac
dry_run && exit 0
if [ -n "$runtime_only" ]; then
  compgen -G "/usr/local/cuda-$version/lib*/$soname*" >/dev/null \
    || die "the packages installed but /usr/local/cuda-$version has no $soname"
  log "done: the CUDA $version runtime in /usr/local/cuda-$version"
  exit 0
fi
[ -x "/usr/local/cuda-$version/bin/nvcc" ] || die "the packages installed but /usr/local/cuda-$version/bin/nvcc is missing"
driver_stub "/usr/local/cuda-$version"
log "done: /usr/local/cuda-$version"
