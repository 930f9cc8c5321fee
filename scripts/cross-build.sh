#!/usr/bin/env bash
# Cross-compile one wheel of the engine for another Linux machine inside a Debian build image
# (release/builder/cross.py is the caller: docs/machines.md, "Building aarch64 wheels").
#
#   cross-build.sh setup TRIPLET DEBARCH SUITE_PYTHON 'PKG ...' ['TOOLKIT INSTALL']
#       in a container of the build image, committed by the caller as the cross image:
#       Debian's crossbuild-essential-DEBARCH, the :DEBARCH -dev packages (system_packages) and
#       libpython3.X-dev of both machines (the source of the target's pyconfig.h differences);
#       then the build image's toolkit install command (install-cuda.sh 13.0 --from-pypi) again
#       with --target=MACHINE and CC the cross compiler: the target machine's runtime beside it
#   cross-build.sh run TRIPLET DIST_PYTHON WHEEL CMD...
#       CMD under emulation with the wheel installed for Debian's own Python of the target machine;
#       the target's loader path also holds what a toolkit install put in /usr/TRIPLET/etc/ld.so.conf.d
#   cross-build.sh exec TRIPLET DIST_PYTHON CMD...
#       CMD under emulation in the environment it is given (release hardware's leg of another
#       machine: its --target install on PYTHONPATH), `{python} -m pip` working
#   cross-build.sh compilers TRIPLET DIR
#       DIR holds what `wheel` puts first on PATH (below): the target's compilers and binutils
#   cross-build.sh wheel TRIPLET PYTHON_VERSION SRC OUT [-C KEY=VALUE]... [--exclude PATTERN]...
#       build SRC's wheel with /opt/python/cpXY-cpXY as the build interpreter, the target's
#       headers (that interpreter's, with the target machine's pyconfig.h differences from
#       Debian's pair of pyconfig.h), a CMake toolchain file and the variant's config settings (-C);
#       repair it with auditwheel (--plat auto: the tag follows the wheel's machine) against the
#       multiarch directories, the variant's runtime excluded (--exclude: bound, not vendored).
#       The build sees the target's compilers under their plain names too (gcc, g++, cc, c++ and
#       binutils first on PATH: an engine's own script that calls `g++` builds for the target), and
#       they link with the target's link-only directories (/usr/TRIPLET/etc/link-only.d/*.conf: the
#       CUDA driver stub), as LIBRARY_PATH gives a native build them; a cross GCC reads no LIBRARY_PATH.
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "$0")/_common.sh"

# compilers TRIPLET DIR: DIR holds the target's compilers under the target's names and the plain
# ones (gcc, g++, cc, c++), each adding -L for the directories of /usr/TRIPLET/etc/link-only.d/*.conf
# when it links, and the target's binutils under their plain names.
compilers() {
  local triplet="$1" dir="$2" links="" conf line name tool
  for conf in "/usr/$triplet/etc/link-only.d"/*.conf; do
    [ -e "$conf" ] || continue
    while read -r line; do [ -z "$line" ] || links="$links -L$line"; done < "$conf"
  done
  mkdir -p "$dir"
  for name in gcc:gcc g++:g++ cc:gcc c++:g++ "$triplet-gcc:gcc" "$triplet-g++:g++"; do
    tool="$(command -v "$triplet-${name#*:}")" || die "the build image has no $triplet-${name#*:}"
    # A compile, preprocess or dependency run takes no -L; a link gets them after its own arguments.
    cat > "$dir/${name%%:*}" <<SH
#!/bin/sh
for a in "\$@"; do case "\$a" in -c|-S|-E|-M|-MM) exec $tool "\$@" ;; esac; done
exec $tool "\$@"$links
SH
    chmod +x "$dir/${name%%:*}"
  done
  for name in ar as ld nm objcopy objdump ranlib readelf strip; do
    tool="$(command -v "$triplet-$name")" && ln -s "$tool" "$dir/$name"
  done
  return 0
}

# target_exec TRIPLET DIST_PYTHON CMD...: CMD with {python} the target's interpreter, its standard
# library Debian's (PYTHONHOME), its loader path the target's libraries and what a toolkit install
# put in /usr/TRIPLET/etc/ld.so.conf.d.
target_exec() {
  local triplet="$1" dist_python="$2" target_py libs conf dir a
  shift 2
  target_py="/opt/target-$triplet/usr/bin/python$dist_python"
  libs="/opt/target-$triplet/usr/lib/$triplet"
  for conf in "/usr/$triplet/etc/ld.so.conf.d"/*.conf; do
    [ -e "$conf" ] || continue
    while read -r dir; do [ -z "$dir" ] || libs="$libs:$dir"; done < "$conf"
  done
  export PYTHONHOME=/usr LD_LIBRARY_PATH="$libs"
  local args=()
  for a in "$@"; do args+=("${a//\{python\}/$target_py}"); done
  exec "${args[@]}"
}

case "${1:-}" in
  setup)
    triplet="$2" debarch="$3" dist_python="$4" packages="${5:-}" toolkit="${6:-}"
    # No manual pages or docs: a Multi-Arch: same package must ship byte-identical shared files on
    # both machines, and Debian's two builds of some differ in a gzip'd man page (trixie's
    # libpsl-dev, pulled in by libcurl4-openssl-dev:arm64: "trying to overwrite shared
    # '/usr/share/man/man3/libpsl.3.gz'"), which stops the install; a build image needs neither.
    printf '%s\n' 'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/doc/*' \
      'path-include=/usr/share/doc/*/copyright' > /etc/dpkg/dpkg.cfg.d/01-cross-no-docs
    dpkg --add-architecture "$debarch"
    apt-get update -qq
    # shellcheck disable=SC2086  # a list of package names
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "crossbuild-essential-$debarch" "libpython$dist_python-dev:$debarch" "libpython$dist_python-dev" \
      $packages > /tmp/cross-apt.log 2>&1 \
      || { tail -n 25 /tmp/cross-apt.log >&2; die "apt could not install the $debarch packages (its last lines are above)"; }
    arch_h="/usr/include/$triplet/python$dist_python/pyconfig.h"
    native_h="/usr/include/$(gcc -dumpmachine)/python$dist_python/pyconfig.h"
    # The target's pyconfig.h lines that differ from this machine's, as sed substitutions.
    { diff "$native_h" "$arch_h" || true; } | awk '
      /^< #define / { key=$3; from[key]=substr($0, 3) }
      /^< \/\* #undef / { key=$4; from[key]=substr($0, 3) }
      /^> #define / { key=$3; to[key]=substr($0, 3) }
      /^> \/\* #undef / { key=$4; to[key]=substr($0, 3) }
      END { for (k in from) if (k in to && k != "PY_SUPPORT_TIER") print from[k] "\t" to[k] }
    ' > "/usr/local/share/pyconfig-$triplet.tsv"
    log "pyconfig.h differences for $triplet: $(cut -f2 "/usr/local/share/pyconfig-$triplet.tsv" | tr '\n' ';')"
    # The target's own interpreter, to run what was built under emulation (binfmt_misc's qemu-user):
    # Debian's python$dist_python binary of that machine beside this one's (its standard library,
    # the target's extension modules included, came with libpython$dist_python-dev:$debarch).
    (cd /tmp && apt-get download -qq "python$dist_python-minimal:$debarch" "libstdc++6:$debarch" \
      && for deb in ./*"_$debarch.deb"; do dpkg-deb -x "$deb" "/opt/target-$triplet"; done && rm -f ./*.deb)
    # That standard library's bytecode, compiled here at native speed by the build image's CPython
    # of the same version (bytecode is the same on every machine): no python$dist_python package's
    # trigger compiled it, and under emulation each run would spend about 25 s doing so.
    "/opt/python/cp${dist_python/./}-cp${dist_python/./}/bin/python3" -m compileall -q -j 0 \
      "/usr/lib/python$dist_python" > /dev/null 2>&1 || true
    if [ -n "$toolkit" ]; then
      # As the build image was made (image-layers.sh layer_toolkit): the scripts under a scratch root.
      mkdir -p /tmp/xfer-toolkit && cp -a "$(dirname "$0")" /tmp/xfer-toolkit/scripts
      (cd /tmp/xfer-toolkit && export CC="$triplet-gcc" && eval "$toolkit --target=${triplet%%-*}")
      rm -rf /tmp/xfer-toolkit
    fi
    ;;
  run)
    # cross-build.sh run TRIPLET DIST_PYTHON WHEEL CMD...: CMD with the wheel installed for the
    # target's Python under emulation; {python} in CMD is that interpreter.
    triplet="$2" dist_python="$3" wheel="$4"; shift 4
    site="$(mktemp -d)"
    "/opt/python/cp${dist_python/./}-cp${dist_python/./}/bin/python3" -m zipfile -e "$wheel" "$site"
    bin="$site/bin"; mkdir -p "$bin"
    for script in "$site"/*.data/scripts/*; do [ -e "$script" ] && chmod +x "$script" && ln -s "$script" "$bin/"; done
    PYTHONPATH="$site" PATH="$bin:$PATH" target_exec "$triplet" "$dist_python" "$@"
    ;;
  exec)
    # cross-build.sh exec TRIPLET DIST_PYTHON CMD...: CMD under emulation as it is given
    # (PYTHONPATH, PATH: release hardware's --target install), with pip importable by the target's
    # Python (`{python} -m pip`: the build Python's own pip, pure Python, of the same version).
    triplet="$2" dist_python="$3"; shift 3
    build_py="/opt/python/cp${dist_python/./}-cp${dist_python/./}/bin/python3"
    pips="/tmp/target-pip"
    if [ ! -e "$pips/pip" ]; then
      mkdir -p "$pips"
      ln -sfn "$("$build_py" -c 'import os, pip; print(os.path.dirname(pip.__file__))')" "$pips/pip"
    fi
    PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$pips" target_exec "$triplet" "$dist_python" "$@"
    ;;
  wheel)
    triplet="$2" version="$3" src="$4" out="$5"
    shift 5
    settings=() excludes=()
    while [ $# -gt 0 ]; do
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        -C) settings+=(-C "$2") ;;
        --exclude) excludes+=(--exclude "$2") ;;
        *) die "unknown wheel option $1 (-C KEY=VALUE, --exclude PATTERN)" ;;
      esac
      shift 2
    done
    tag="cp${version/./}"
    py="/opt/python/$tag-$tag/bin/python3"
    [ -x "$py" ] || die "the build image has no CPython $version at $py"
    work="$(mktemp -d)"
    inc="$work/include/python$version"
    mkdir -p "$work/include"
    cp -r "$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" "$inc"
    while IFS=$'\t' read -r from to; do
      grep -qxF "$from" "$inc/pyconfig.h" || die "pyconfig.h of CPython $version lacks '$from'"
      "$py" - "$inc/pyconfig.h" "$from" "$to" <<'PY'
import sys
path, old, new = sys.argv[1:]
text = open(path).read().splitlines()
open(path, "w").write("\n".join(new if line == old else line for line in text) + "\n")
PY
    done < "/usr/local/share/pyconfig-$triplet.tsv"
    machine="${triplet%%-*}"
    tools="$work/bin"
    compilers "$triplet" "$tools"
    cat > "$work/toolchain.cmake" <<TC
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR $machine)
set(CMAKE_C_COMPILER $tools/$triplet-gcc)
set(CMAKE_CXX_COMPILER $tools/$triplet-g++)
set(CMAKE_FIND_ROOT_PATH /usr/$triplet /usr/lib/$triplet)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
# Headers in the target's root, then /usr/include: a Debian multiarch system keeps a package's
# machine-neutral headers there for every machine (libasio-dev's asio.hpp), and the target's own
# under /usr/include/$triplet (CMake's CMAKE_LIBRARY_ARCHITECTURE, from the cross compiler).
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/$triplet/pkgconfig:/usr/share/pkgconfig)
TC
    "$py" -m venv "$work/venv"
    "$work/venv/bin/python" -m pip install -q --disable-pip-version-check build
    # The project's own build requirements: its [build-system].requires and what its backend asks
    # for, as `python -m build` would install them, here into the build interpreter's venv before
    # the cross settings below are exported (pip then takes this machine's wheels of the tools that
    # run here); the build itself runs --no-isolation with them.
    "$work/venv/bin/python" - "$src" "${settings[@]}" <<'PY'
import subprocess
import sys

from build import ProjectBuilder

src, rest = sys.argv[1], sys.argv[2:]
config = dict(rest[i + 1].split("=", 1) for i in range(0, len(rest), 2))  # -C KEY=VALUE pairs
builder = ProjectBuilder(src, python_executable=sys.executable)
pip = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
subprocess.run([*pip, *sorted(builder.build_system_requires)], check=True)
extra = builder.get_requires_for_build("wheel", config)
if extra:
    subprocess.run([*pip, *sorted(extra)], check=True)
PY
    soabi="cpython-${version/./}-$triplet"
    export _PYTHON_HOST_PLATFORM="linux-$machine" SETUPTOOLS_EXT_SUFFIX=".$soabi.so"
    export CMAKE_TOOLCHAIN_FILE="$work/toolchain.cmake"
    # Python_SOABI for FindPython (nanobind); PYTHON_MODULE_EXTENSION for pybind11's own suffix.
    export SKBUILD_CMAKE_ARGS="-DPython_INCLUDE_DIR=$inc;-DPython_SOABI=$soabi;-DPYTHON_MODULE_EXTENSION=.$soabi.so"
    PATH="$tools:$PATH" "$work/venv/bin/python" -m build --wheel --no-isolation "${settings[@]}" -o "$work/dist" "$src"
    LD_LIBRARY_PATH="/usr/$triplet/lib:/usr/lib/$triplet" \
      auditwheel repair --plat auto "${excludes[@]}" -w "$out" "$work"/dist/*.whl
    rm -rf "$work"
    ;;
  compilers)
    # cross-build.sh compilers TRIPLET DIR: the wrappers the wheel build puts first on PATH, alone.
    compilers "$2" "$3"
    ;;
  *) die "the first word is setup, wheel, run, exec or compilers (see the header)" ;;
esac
