#!/usr/bin/env bash
# Install the Moore Threads MUSA toolkit at the version matrix.yaml declares, idempotently.
#   release toolchain install musa [VERSION]       (cibuildwheel before-all: bash scripts/install-musa.sh 4.0)
#   (or, in this repository: bash scripts/install-musa.sh [VERSION])
#
# VERSION is the variant's `toolkit` (e.g. 4.0). An existing install (MUSA_HOME, MUSA_PATH,
# /usr/local/musa) is used when its version has that major.minor, read from version.txt /
# version.json or MUSART_VERSION in include/musa_runtime_api.h, as the toolkit reads it.
#
# Moore Threads does not publish the MUSA SDK in a public apt/dnf repository: the toolkit is an
# installer (.run, .deb or .rpm) downloaded from the MUSA Toolkit page of the Moore Threads
# developer site (https://developer.mthreads.com, "MUSA SDK" downloads; it needs an account).
# Give it in MUSA_INSTALLER: a path, or an http(s) URL this script downloads (a mirror or a
# private release asset; in cibuildwheel, pass the variable into the container with
# environment-pass, which `release cibuildwheel-config` does). Without an installer, and without
# a matching install, the script stops and says so.
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "$0")/_common.sh"

version=""
for arg in "$@"; do
  case "$arg" in
    --runtime-only) log "--runtime-only: the MUSA installer has no runtime-only form; installing the toolkit" ;;
    -*) die "unknown option $arg (usage: install-musa.sh [VERSION] [--runtime-only]; the installer comes from MUSA_INSTALLER)" ;;
    *) [ -z "$version" ] || die "one version at most (usage: install-musa.sh [VERSION]; the installer comes from MUSA_INSTALLER)"
       version="$arg" ;;
  esac
done
version="${version:-${MUSA_VERSION:-}}"
[ -z "$version" ] || check_version_arg "$version"
target=/usr/local/musa

musa_version() { toolkit_probe musa "$1"; }

mismatch=""
for prefix in "${MUSA_HOME:-}" "${MUSA_PATH:-}" "$target"; do
  [ -n "$prefix" ] && [ -f "$prefix/include/musa_runtime_api.h" ] || continue
  found="$(musa_version "$prefix")"
  if [ -z "$version" ]; then
    log "MUSA ${found:-(unknown version)} already installed at $prefix: nothing to do"
    exit 0
  fi
  if same_release "$version" "$found"; then
    log "MUSA $found already installed at $prefix (matrix declares $version): nothing to do"
    exit 0
  fi
  mismatch="MUSA ${found:-of unknown version (no version.txt, version.json or MUSART_VERSION)} is installed at $prefix, but the matrix declares $version"
  break
done

installer="${MUSA_INSTALLER:-}"
if [ -z "$installer" ]; then
  want="the MUSA Toolkit ${version:-} installer"
  if [ -n "$mismatch" ]; then
    die "$mismatch: set MUSA_INSTALLER to $want (a path or an https URL; from https://developer.mthreads.com), or MUSA_HOME to a MUSA ${version} install"
  fi
  die "no MUSA toolkit found (MUSA_HOME, MUSA_PATH, $target) and no installer given: set MUSA_INSTALLER to $want \
(.run, .deb or .rpm: a path or an https URL; download it from https://developer.mthreads.com), or MUSA_HOME to an existing install"
fi
[ -z "$mismatch" ] || log "$mismatch: installing $installer over it"

case "$installer" in
  http://*|https://*)
    local_copy="$(mktemp -d)/$(basename "${installer%%\?*}")"
    log "downloading $installer"
    if dry_run; then printf 'dry-run: download %s to %s\n' "$installer" "$local_copy"
    else fetch "$installer" > "$local_copy" || die "downloading MUSA_INSTALLER=$installer failed"; fi
    installer="$local_copy"
    ;;
  *) dry_run || [ -f "$installer" ] || die "MUSA_INSTALLER=$installer does not exist (give the path of the MUSA Toolkit installer, or an https URL)" ;;
esac

family="$(os_family)" || exit 1
case "$installer" in
  *.run) as_root bash "$installer" --silent --toolkit --prefix="$target" ;;
  *.deb) [ "$family" = debian ] || die "$installer is a .deb but this is not Debian/Ubuntu"
         as_root apt-get install -y "$(realpath -m "$installer")" ;;
  *.rpm) [ "$family" = rhel ] || die "$installer is an .rpm but this is not AlmaLinux/RHEL"
         as_root dnf install -y "$(realpath -m "$installer")" ;;
  *) die "unknown installer type: $installer (expected .run, .deb or .rpm)" ;;
esac
dry_run && exit 0
[ -f "$target/include/musa_runtime_api.h" ] || die "the installer finished but $target/include/musa_runtime_api.h is missing"
found="$(musa_version "$target")"
if [ -n "$version" ] && ! same_release "$version" "$found"; then
  die "the installer put MUSA ${found:-of unknown version} in $target, but the matrix declares $version: MUSA_INSTALLER is the wrong installer"
fi
log "done: MUSA ${found:-} at $target"
