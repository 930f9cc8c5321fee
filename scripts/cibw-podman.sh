#!/usr/bin/env bash
# Build wheels with cibuildwheel under podman in a locally made image (scripts/make-image.sh), then
# check that each wheel binds (NEEDs) the runtime and does not vendor it.
#
#   bash scripts/cibw-podman.sh --image localhost/xfer-build-rocm:6.4 --project engine \
#        --pythons 3.10,3.11,3.12,3.13 --define XFER_BACKEND=hip \
#        --exclude 'libamdhip64.so*' --exclude 'libhsa-runtime64.so*' \
#        --expect-needed libamdhip64.so.6 --out wheelhouse/rocm
#
# Options:
#   --image TAG           the build image (a localhost/ tag that podman already has)
#   --project DIR         the PEP 517 project; cibuildwheel copies this directory into the container
#   --pythons 3.10,...    CPython versions -> CIBW_BUILD cpXY-manylinux_x86_64
#   --define K=V          CMake define for scikit-build-core (cmake.define.K=V), repeatable
#   --config-setting K=V  any other PEP 517 config setting, repeatable
#   --exclude GLOB        auditwheel repair --exclude, repeatable (the runtime is bound, not vendored)
#   --plat TAG            auditwheel --plat (default: auditwheel's own choice, the most compatible
#                         tag the wheel's symbols allow)
#   --expect-needed SO    after the build, every wheel's ELF files together must NEED this soname
#   --out DIR             output directory (default wheelhouse)
#   --cibuildwheel EXE    the cibuildwheel command (default: cibuildwheel on PATH)
# The exact environment passed to cibuildwheel is printed first.
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "$0")/_common.sh"
t_start=$(date +%s)

image="" project="" pythons="" plat="" out=wheelhouse cibw=cibuildwheel
settings=() excludes=() expect=()
while [ $# -gt 0 ]; do
  case "$1" in
    --image) image="$2"; shift 2 ;;
    --project) project="$2"; shift 2 ;;
    --pythons) pythons="$2"; shift 2 ;;
    --define) settings+=("cmake.define.$2"); shift 2 ;;
    --config-setting) settings+=("$2"); shift 2 ;;
    --exclude) excludes+=("$2"); shift 2 ;;
    --plat) plat="$2"; shift 2 ;;
    --expect-needed) expect+=("$2"); shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --cibuildwheel) cibw="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[ -n "$image" ] && [ -n "$project" ] && [ -n "$pythons" ] || die "--image, --project and --pythons are required"
[ -f "$project/pyproject.toml" ] || die "$project has no pyproject.toml"
command -v "$cibw" >/dev/null || die "cibuildwheel not found ($cibw): pip install 'cibuildwheel>=3.0'"
podman image exists "$image" || die "podman has no image $image: make it with scripts/make-image.sh"
arch="$(podman image inspect "$image" --format '{{.Os}}/{{.Architecture}}')"
# cibuildwheel runs 'podman create --pull=never' only when the local image's platform matches;
# otherwise it asks for --pull=always, which fails without a registry.
[ "$arch" = linux/amd64 ] || die "$image is $arch, not linux/amd64: cibuildwheel would try to pull it"
out="$(mkdir -p "$out" && cd "$out" && pwd)"

build=""
IFS=, read -r -a pys <<<"$pythons"
for v in "${pys[@]}"; do build+="cp${v/./}-manylinux_x86_64 "; done
repair="auditwheel repair"
for g in "${excludes[@]}"; do repair+=" --exclude '$g'"; done
[ -z "$plat" ] || repair+=" --plat $plat"
repair+=" -w {dest_dir} {wheel}"

export CIBW_PLATFORM=linux
export CIBW_ARCHS=x86_64
export CIBW_BUILD="${build% }"
export CIBW_MANYLINUX_X86_64_IMAGE="$image"
export CIBW_CONTAINER_ENGINE="podman; create_args: --network=host"
export CIBW_CONFIG_SETTINGS="${settings[*]:-}"
export CIBW_REPAIR_WHEEL_COMMAND="$repair"
export CIBW_BUILD_VERBOSITY="${CIBW_BUILD_VERBOSITY:-1}"
log "cibuildwheel $("$(dirname "$(command -v "$cibw")")/python" -c 'import importlib.metadata as m; print(m.version("cibuildwheel"))' 2>/dev/null || echo '?'), podman $(podman --version | awk '{print $3}')"
env | grep '^CIBW_' | sort | sed 's/^/  /'
before="$(ls "$out")"
(cd "$project" && "$cibw" --output-dir "$out" .) || die "cibuildwheel failed (see above)"
log "cibuildwheel took $(( $(date +%s) - t_start ))s"

# ---- bound, not vendored ------------------------------------------------------------------------
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
n=0
for whl in "$out"/*.whl; do
  case "$before" in *"$(basename "$whl")"*) continue ;; esac
  n=$((n + 1)); rm -rf "$tmp/w"; mkdir "$tmp/w"
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$whl" "$tmp/w"
  needed="$(find "$tmp/w" -type f \( -name '*.so*' -o -perm -u+x \) -exec sh -c 'readelf -d "$1" 2>/dev/null' _ {} \; \
            | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u | tr '\n' ' ')"
  for g in "${excludes[@]}"; do
    hit="$(find "$tmp/w" -name "$g" | sed -n 1p)"
    [ -z "$hit" ] || die "$(basename "$whl") vendors ${hit#"$tmp/w/"} although it is excluded"
  done
  for so in "${expect[@]}"; do
    case " $needed " in *" $so "*) ;; *) die "$(basename "$whl") does not NEED $so (NEEDED: $needed)" ;; esac
  done
  log "$(basename "$whl"): $(du -h "$whl" | cut -f1), NEEDED: $needed"
done
[ "$n" -gt 0 ] || die "no new wheel in $out"
log "done: $n wheels in $out, $(( $(date +%s) - t_start ))s"
