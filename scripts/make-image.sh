#!/usr/bin/env bash
# The leaves of making a local container image that must be shell, and the toolkit's one
# debootstrap (debootstrap_into: the images' base and the smoke tier's plain tree, rootfs). Which
# image to make, over which base, and whether one of the same inputs exists is
# release/machine/imaging.py's (the images' only caller): it passes every input and the label (its
# hash of the recipe), holds the per-tag locks and writes the call log; release/machine/debian.py
# calls rootfs.
#
#   make-image.sh base  --tag T --label K=V [options]       debootstrap + interpreters + podman import
#   make-image.sh rootfs --suite S --out DIR [--include a,b] [--mirror URL] [--workdir DIR]
#     the plain debootstrap --variant=minbase tree of `base` (the same step, cache and lock),
#     unpacked into DIR (absent or empty): the smoke tier's simulated minimal image
#   make-image.sh layer --tag T --label K=V --from IMAGE [options] KIND ARGS...
#     one layer over IMAGE: scripts/image-layers.sh's layer_KIND ARGS run in a container of it,
#     committed; KIND is toolkit (CMD BINDIR: a toolkit install), packages (MIRROR SUITE ARCHIVE
#     'PKG ...'...: from another archive), layout (PREFIX VIA GLOBS: the runtime libraries moved),
#     therock_os and therock_pip (TheRock's layouts, of the files the caller staged: --mount)
# Options:
#   --tag NAME, --label K=V      the image's tag (localhost/...) and its inputs label (K=hash)
#   --pythons 3.10,3.11          the image's CPython versions (label io.xfer.image.pythons)
#   --suite S, --mirror URL      base, rootfs: the Debian suite (sid) and mirror (DEBIAN_MIRROR, else
#                                the Debian archive of this host's apt sources, else deb.debian.org)
#   --include a,b                base, rootfs: extra Debian packages of the suite
#   --out DIR                    rootfs: where the tree is unpacked (absent or empty; made 0755)
#   --python-dir V=DIR           base: CPython V's installation directory (each of --pythons and
#                                --env-python), copied to the same path, /opt/python/cpXY-cpXY -> it
#   --env-python V|none          base: the interpreter at /opt/python/cp39-cp39 (build images)
#   --minbase-only               base: no compilers, build or auditwheel: a runtime image for smoke
#   --gcc N                      base: gcc-N/g++-N are /usr/local/bin/{cc,c++,gcc,g++,cpp}
#   --auditwheel SPEC            base, build images: the auditwheel requirement (the toolkit's own)
#   --workdir DIR                base, rootfs: scratch and the day-long caches (default /var/tmp/xfer-images)
#   --refresh-base               base, rootfs: redo debootstrap (and base: the interpreters' trees)
#   --from IMAGE                 layer: the image under it
#   --drop V=DIR                 layer: CPython V (at DIR) removed in it (repeatable)
#   --env K=V                    layer: an environment variable it adds (repeatable)
#   --mount DIR                  layer: DIR at /stage, read-only (a TheRock layout's staged files)
#
# Interpreters keep their host path (their RUNPATH is DIR/lib, libpython is shared), without
# site-packages, test suites, tkinter, the static libpython, the -O/-OO bytecode and the shared
# libraries' debug sections; the standard library's bytecode stays (a Python in a container
# compiles nothing it imports). pip (and build) come from the pip wheel ensurepip bundles. The
# debootstrap result (base and rootfs alike: debootstrap_into) and each interpreter's tree with its
# pip are kept a day in the workdir.
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "$0")/_common.sh"
script_path="$(readlink -f "$0")"
t_start=$(date +%s)
step() { log "[$(( $(date +%s) - t_start ))s] $*"; }

case "${1:-}" in
  base|layer|rootfs) leaf="$1"; shift ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) die "the first word is the leaf: base, layer or rootfs (see --help)" ;;
esac
tag="" label="" suite=sid mirror="" include="" pythons="" env_python=none rootfs_out=""
minbase_only=0 gcc_major="" auditwheel_req="" workdir=/var/tmp/xfer-images refresh_base=0 from=""
extra_env=() dropped=() mounts=()
declare -A py_dir=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag="$2"; shift 2 ;;
    --label) label="$2"; shift 2 ;;
    --suite) suite="$2"; shift 2 ;;
    --mirror) mirror="$2"; shift 2 ;;
    --include) include="$2"; shift 2 ;;
    --out) rootfs_out="$2"; shift 2 ;;
    --pythons) pythons="$2"; shift 2 ;;
    --python-dir) [[ "$2" == *=/* ]] || die "--python-dir takes V=DIR"; py_dir[${2%%=*}]="${2#*=}"; shift 2 ;;
    --env-python) env_python="$2"; shift 2 ;;
    --minbase-only) minbase_only=1; shift ;;
    --gcc) gcc_major="$2"; shift 2 ;;
    --auditwheel) auditwheel_req="$2"; shift 2 ;;
    --workdir) workdir="$2"; shift 2 ;;
    --refresh-base) refresh_base=1; shift ;;
    --from) from="$2"; shift 2 ;;
    --drop) [[ "$2" == *=/* ]] || die "--drop takes V=DIR"; dropped+=("$2"); shift 2 ;;
    --env) extra_env+=("$2"); shift 2 ;;
    --mount) mounts+=(-v "$2:/stage:ro"); shift 2 ;;
    --*) die "unknown option '$1' (see --help)" ;;
    *) break ;;
  esac
done
[ -n "$mirror" ] || mirror="$(debian_mirror)"
if [ "$leaf" != rootfs ]; then
  [ -n "$tag" ] && [[ "$label" == ?*=?* ]] || die "--tag and --label KEY=INPUTS are required"
fi
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, chroot and rootful podman)"
[ "$leaf" != rootfs ] || tag="rootfs-$suite"
logs="$workdir/logs/${tag//[^A-Za-z0-9._-]/_}"  # this image's logs, a layer's or a whole image's
mkdir -p "$logs"

# debootstrap_into ROOT PKG...: `debootstrap --variant=minbase` of $suite from $mirror with PKG...
# into ROOT (an empty directory), the one debootstrap of the toolkit (base and rootfs). The result
# is kept as a tarball for a day (keyed on suite, mirror and packages), so images and trees that
# share a package set (and reruns after a failure) skip the 1-2 minute debootstrap; one flock per
# package set: a second maker waits for the first, then unpacks its tarball.
debootstrap_into() {
  local root="$1" key tarball tmp lock include=()
  shift
  [ $# -eq 0 ] || include=(--include="$(IFS=,; echo "$*")")
  key="$(printf '%s %s %s\n' "$suite" "$mirror" "$*" | sha256sum | cut -c1-16)"
  tarball="$workdir/base-$suite-$key.tar"
  exec {lock}>"$tarball.lock"
  flock "$lock"
  if [ "$refresh_base" -eq 0 ] && [ -f "$tarball" ] && [ -n "$(find "$tarball" -mmin -1440)" ]; then
    step "debootstrap result from $tarball (less than a day old; --refresh-base to redo)"
    tar --numeric-owner -C "$root" -xf "$tarball" || die "unpacking $tarball failed"
  else
    command -v debootstrap >/dev/null || die "debootstrap not found: apt-get install debootstrap (or run scripts/setup-podman.sh)"
    step "debootstrap --variant=minbase $suite from $mirror${*:+ (+ $*)}"
    debootstrap --variant=minbase "${include[@]}" "$suite" "$root" "$mirror" \
      >"$logs/debootstrap.log" 2>&1 \
      || die "debootstrap failed: $(grep -E '^E:|^W: Failure' "$logs/debootstrap.log" | tail -n 1) (full log: $logs/debootstrap.log)"
    tmp="$(mktemp "$tarball.tmp.XXXXXX")"
    tar --numeric-owner -C "$root" -cf "$tmp" . && mv "$tmp" "$tarball" || rm -f "$tmp"
  fi
  exec {lock}>&-
}

# ---- rootfs: the plain tree, unpacked into --out --------------------------------------------------
if [ "$leaf" = rootfs ]; then
  [[ "$rootfs_out" == /* ]] || die "rootfs needs --out DIR (an absolute path)"
  [ ! -e "$rootfs_out" ] || [ -z "$(ls -A "$rootfs_out")" ] || die "--out $rootfs_out is not empty"
  mkdir -p "$rootfs_out"
  extra=(); [ -z "$include" ] || IFS=, read -r -a extra <<<"$include"
  debootstrap_into "$rootfs_out" "${extra[@]}"
  chmod 0755 "$rootfs_out"  # readable by a smoke run's user (the tarball's root may be 0700)
  log "done: $rootfs_out  debootstrap --variant=minbase $suite  $(( $(date +%s) - t_start ))s"
  exit 0
fi

# ---- layer: one function of image-layers.sh in a container of --from, committed ----------------
if [ "$leaf" = layer ]; then
  [ -n "$from" ] && [ $# -ge 1 ] || die "layer needs --from IMAGE and a KIND (toolkit, packages, layout)"
  kind="$1"; shift
  case "$kind" in toolkit|packages) network=host ;; layout|therock_*) network=none ;; *) die "no layer kind '$kind'" ;; esac
  out="$logs/$kind.log" ctr="xfer-layer-$$-$RANDOM" what="$kind ($*)"
  step "$what${dropped[*]:+, without CPython ${dropped[*]%%=*}} (a layer over ${from:0:12})"
  # shellcheck disable=SC2016
  podman run --name "$ctr" --network="$network" -v "$(dirname "$script_path"):/mnt/xfer-scripts:ro" "${mounts[@]}" \
    "$from" bash -c 'set -e; export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1
. /mnt/xfer-scripts/image-layers.sh; read -r -a drop <<<"$1"; kind="$2"; shift 2
"layer_$kind" "$@"; layer_drop "${drop[@]}"
cd / && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb /root/.cache' \
    make-image.sh "${dropped[*]}" "$kind" "$@" >"$out" 2>&1 \
    || { podman rm -f "$ctr" >/dev/null 2>&1
         die "$what failed in the image: $(grep -v '^ *$' "$out" | tail -n 1) (log: $out)"; }
  sed 's/^/    /' "$out" | tail -n 3
  # The base's environment stays (the settings above were the script's own), with --env added.
  changes=(--change "LABEL $label" --change "LABEL io.xfer.image.pythons=${pythons:-none}"
           --change 'CMD ["/bin/bash"]')
  for e in "${extra_env[@]}"; do changes+=(--change "ENV $e"); done
  podman commit --quiet "${changes[@]}" "$ctr" "$tag" >/dev/null \
    || { podman rm -f "$ctr" >/dev/null 2>&1; die "podman commit of the layer ($what) failed"; }
  podman rm -f "$ctr" >/dev/null 2>&1 || true
  log "done: $tag  a layer over ${from:0:12}  build $(( $(date +%s) - t_start ))s"
  exit 0
fi

# ---- base: the packages, the interpreters ---------------------------------------------------------
[ "$minbase_only" -eq 1 ] || [ -n "$auditwheel_req" ] || die "a build image needs --auditwheel SPEC"
command -v podman >/dev/null && command -v debootstrap >/dev/null || die "podman or debootstrap not found: run scripts/setup-podman.sh first"
IFS=, read -r -a py_list <<<"$pythons"
all_py=("${py_list[@]}")
if [ "$env_python" != none ]; then
  case ",$pythons," in *",$env_python,"*) ;; *) all_py+=("$env_python") ;; esac
fi
for v in "${all_py[@]}"; do
  [ -x "${py_dir[$v]:-/absent}/bin/python$v" ] || die "CPython $v: no --python-dir $v=DIR with bin/python$v"
done
pkgs=(ca-certificates)
if [ "$minbase_only" -eq 0 ]; then
  # The suite's default g++, or exactly GCC N (no other g++ in the image to be picked by accident).
  if [ -n "$gcc_major" ]; then pkgs+=("gcc-$gcc_major" "g++-$gcc_major"); else pkgs+=(g++); fi
  pkgs+=(make cmake ninja-build patchelf git file binutils)
fi
extra=(); [ -z "$include" ] || IFS=, read -r -a extra <<<"$include"
[[ ",$include" != */* ]] || die "--include '$include': packages from another archive are a layer"
pkgs+=("${extra[@]}")
ca_files=(/usr/local/share/ca-certificates/*.crt)
[ -e "${ca_files[0]}" ] || ca_files=()

# ---- debootstrap (scratch of its own: images of different tags are made side by side) -------------
root="$(mktemp -d "$workdir/rootfs.XXXXXX")"
mounted=()
cleanup() {
  local m
  for m in "${mounted[@]}"; do umount -l "$m" 2>/dev/null || true; done
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT

debootstrap_into "$root" "${pkgs[@]}"

for m in proc sys dev; do
  mount --bind "/$m" "$root/$m"; mounted=("$root/$m" "${mounted[@]}")
done
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
in_root() {  # a clean environment: no host PIP_* or proxy settings leak into the image
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}

# apt in the image: snapshot-like mirrors of sid carry expired Valid-Until dates.
printf 'Acquire::Check-Valid-Until "false";\nAPT::Install-Recommends "false";\n' \
  >"$root/etc/apt/apt.conf.d/90xfer-image"
if [ "${#ca_files[@]}" -gt 0 ]; then
  step "host CA certificates into the image (${#ca_files[@]} files)"
  cp "${ca_files[@]}" "$root/usr/local/share/ca-certificates/"
  in_root update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates failed in the image"
fi

step "the image's C library: $(in_root dpkg-query -W -f '${Version}' libc6 2>/dev/null || echo unknown)"

# ---- interpreters ---------------------------------------------------------------------------------
if [ "${#all_py[@]}" -gt 0 ]; then
  step "apt: shared libraries the interpreters' extension modules need"
  in_root apt-get update -q >"$logs/apt.log" 2>&1 || die "apt-get update in the image failed (log: $logs/apt.log)"
  libs=()
  for alts in libssl3t64/libssl3 libffi8 libsqlite3-0 libbz2-1.0 liblzma5 libreadline8t64/libreadline8 \
              libncursesw6 libtinfo6 libuuid1 zlib1g libcrypt1 libnsl2 libtirpc3t64/libtirpc3 libgdbm6t64/libgdbm6; do
    pick=""
    for p in ${alts//\// }; do
      if in_root apt-cache show "$p" >/dev/null 2>&1; then pick="$p"; break; fi
    done
    [ -n "$pick" ] || die "none of '$alts' exists in $suite"
    libs+=("$pick")
  done
  in_root apt-get install -y -q "${libs[@]}" >>"$logs/apt.log" 2>&1 \
    || die "apt-get install ${libs[*]} failed (log: $logs/apt.log)"

  # A current pip (>= 24.2 trusts the system store, with the host CAs above; ensurepip's does not).
  pip_pkgs=(pip)
  [ "$minbase_only" -eq 1 ] || pip_pkgs+=(build)
  for v in "${all_py[@]}"; do
    d="${py_dir[$v]}"; tagv="cp${v%t}"; tagv="${tagv/./}-cp${v/./}"  # 3.14t: cp314-cp314t
    mkdir -p "$root$d" "$root/opt/python"
    # The tree as pip leaves it is kept a day (keyed on the host interpreter and what pip installs);
    # ldd and the imports below still check it against each image's own libraries.
    py_key="$(printf '%s %s %s %s %s\n' "$v" "$d" "${pip_pkgs[*]}" stdlib-bytecode \
      "$(stat -c '%n %s %Y' "$d/bin/python$v" "$d"/lib/libpython*.so* 2>/dev/null | tr '\n' ' ')" | sha256sum | cut -c1-16)"
    py_tar="$workdir/python-$v-$py_key.tar"
    exec {py_lock}>"$py_tar.lock"
    flock "$py_lock"  # one maker of each interpreter's tree at a time; a second waits, then unpacks it
    if [ "$refresh_base" -eq 0 ] && [ -f "$py_tar" ] && [ -n "$(find "$py_tar" -mmin -1440)" ]; then
      step "CPython $(basename "$d") -> $d from $py_tar (pip in it; less than a day old), /opt/python/$tagv -> it"
      tar --numeric-owner -C "$root$d" -xf "$py_tar" || die "unpacking $py_tar failed"
      fresh=0
    else
      step "CPython $(basename "$d") -> $d (same path as on the host), /opt/python/$tagv -> it"
      members=()
      for m in ./include ./lib "./bin/python$v" "./bin/python$v-config"; do [ -e "$d/$m" ] && members+=("$m"); done
      tar -C "$d" -cf - \
        --exclude="./lib/python$v/site-packages/*" --exclude="./lib/python$v/test" \
        --exclude="./lib/python$v/idlelib" --exclude="./lib/python$v/tkinter" \
        --exclude="./lib/python$v/turtledemo" --exclude="./lib/python$v/lib-dynload/_tkinter*" \
        --exclude="./lib/python$v/config-*/libpython*.a" \
        --exclude='*.opt-1.pyc' --exclude='*.opt-2.pyc' "${members[@]}" | tar -C "$root$d" -xf - \
        || die "copying $d failed"
      find "$root$d/lib" -maxdepth 1 -name 'libpython*.so*' -type f -exec strip --strip-debug {} + \
        || die "strip --strip-debug of libpython in $d failed"
      find "$root$d/lib/python$v/lib-dynload" -name '*.so' -type f -exec strip --strip-debug {} + \
        || die "strip --strip-debug of $d/lib/python$v/lib-dynload failed"
      ln -sfn "python$v" "$root$d/bin/python3"; ln -sfn "python$v" "$root$d/bin/python"
      ln -sfn "python$v-config" "$root$d/bin/python3-config"
      fresh=1
    fi
    ln -sfn "$d" "$root/opt/python/$tagv"
    if [ "$v" = "$env_python" ] && [ "$tagv" != cp39-cp39 ]; then
      # cibuildwheel reads the container's environment with /opt/python/cp39-cp39/bin/python
      # (any Python 3 does that): the environment interpreter stands there when 3.9 is not at hand.
      ln -sfn "$d" "$root/opt/python/cp39-cp39"
    fi
    missing="$(in_root sh -c "for f in $d/bin/python$v $d/lib/libpython*.so.1.0 $d/lib/python$v/lib-dynload/*.so; do ldd \"\$f\"; done" | grep 'not found' | sort -u || true)"
    [ -z "$missing" ] || die "CPython $v in the image lacks shared libraries: $(echo $missing | tr '\n' ' ')"
    if [ "$fresh" -eq 1 ]; then
      # The bundled pip wheel, run as a zip, installs the current pip once (ensurepip would install two).
      bundled=("$root$d/lib/python$v/ensurepip/_bundled"/pip-*.whl)
      [ -f "${bundled[0]}" ] || die "CPython $v has no bundled pip wheel (lib/python$v/ensurepip/_bundled)"
      in_root "$d/bin/python$v" "${bundled[0]#"$root"}/pip" install -q --root-user-action=ignore "${pip_pkgs[@]}" \
        || die "pip install ${pip_pkgs[*]} (with the bundled pip) failed for CPython $v"
      [ -x "$root$d/bin/pip" ] || ln -sfn "pip$v" "$root$d/bin/pip"
      py_tmp="$(mktemp "$py_tar.tmp.XXXXXX")"
      tar --numeric-owner -C "$root$d" -cf "$py_tmp" . && mv "$py_tmp" "$py_tar" || rm -f "$py_tmp"
    fi
    exec {py_lock}>&-
    in_root "$d/bin/python$v" -c 'import ssl, ctypes, sqlite3, bz2, lzma, zlib, venv, ensurepip, pip' \
      || die "CPython $v does not import its standard modules (and pip) in the image"
  done
fi

if [ "$minbase_only" -eq 0 ] && [ "${#py_list[@]}" -gt 0 ]; then
  tool_py="${py_dir[${py_list[-1]}]}/bin/python${py_list[-1]}"
  step "auditwheel and uv in /opt/_internal/tools (venv of $(basename "$(dirname "$(dirname "$tool_py")")")), on PATH as /usr/local/bin/{auditwheel,uv}"
  in_root "$tool_py" -m venv /opt/_internal/tools
  # uv as manylinux images carry it: a build's before-build installs the toolkit with it.
  in_root /opt/_internal/tools/bin/pip install -q --disable-pip-version-check "$auditwheel_req" uv \
    || die "pip install '$auditwheel_req' uv failed"
  ln -sfn /opt/_internal/tools/bin/auditwheel "$root/usr/local/bin/auditwheel"
  ln -sfn /opt/_internal/tools/bin/uv "$root/usr/local/bin/uv"
fi

# The compiler first: the toolkit install may compile (install-cuda.sh makes the driver's link stub).
if [ -n "$gcc_major" ]; then
  step "GCC $gcc_major: /usr/local/bin/{cc,c++,gcc,g++,cpp} -> gcc-$gcc_major, g++-$gcc_major, cpp-$gcc_major"
  for pair in cc:gcc gcc:gcc c++:g++ g++:g++ cpp:cpp; do
    [ -x "$root/usr/bin/${pair#*:}-$gcc_major" ] || die "/usr/bin/${pair#*:}-$gcc_major is not in the image: does $suite carry gcc-$gcc_major?"
    ln -sfn "/usr/bin/${pair#*:}-$gcc_major" "$root/usr/local/bin/${pair%%:*}"
  done
fi

image_env=("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "LANG=C.UTF-8")
# One CA bundle (with the host's certificates) for OpenSSL tools, requests, pip and uv (UV_NATIVE_TLS).
ca_bundle=/etc/ssl/certs/ca-certificates.crt
[ -s "$root$ca_bundle" ] || die "$ca_bundle is missing in the image (ca-certificates did not install)"
image_env+=("SSL_CERT_FILE=$ca_bundle" "SSL_CERT_DIR=/etc/ssl/certs" "REQUESTS_CA_BUNDLE=$ca_bundle"
            "CURL_CA_BUNDLE=$ca_bundle" "PIP_CERT=$ca_bundle" "UV_NATIVE_TLS=1")

# ---- slim and import ----------------------------------------------------------------------------------
step "cleaning apt lists and caches"
for m in "${mounted[@]}"; do umount -l "$m"; done; mounted=()
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
       "$root"/root/.cache "$root"/tmp/* "$root"/var/log/*.log
: >"$root/etc/resolv.conf"

step "podman import -> $tag"
changes=(--change "LABEL $label" --change "LABEL io.xfer.image.suite=$suite"
         --change "LABEL io.xfer.image.pythons=${pythons:-none}" --change "CMD [\"/bin/bash\"]")
for e in "${image_env[@]}"; do changes+=(--change "ENV $e"); done
# Streamed: no tarball of the whole tree is written to disk first.
tar --numeric-owner --xattrs -C "$root" -cf - . | podman import "${changes[@]}" - "$tag" >/dev/null \
  || die "podman import failed"
log "done: $tag  build $(( $(date +%s) - t_start ))s"
