#!/usr/bin/env bash
# Install the Moore Threads MUSA toolkit, idempotently.
#   release toolchain install musa [PATH_TO_MUSA_TOOLKIT_INSTALLER]
#   (or, in this repository: bash scripts/install-musa.sh [PATH_TO_MUSA_TOOLKIT_INSTALLER])
# Moore Threads does not publish the MUSA SDK in a public apt/dnf repository: the toolkit is a
# downloaded installer (.run or .deb/.rpm from the Moore Threads developer site). Give its path
# (or MUSA_INSTALLER) and this script installs it to /usr/local/musa; without one it says so.
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "$0")/_common.sh"

for prefix in "${MUSA_HOME:-}" /usr/local/musa; do
  if [ -n "$prefix" ] && [ -f "$prefix/include/musa_runtime_api.h" ]; then
    log "MUSA already installed at $prefix: nothing to do"
    exit 0
  fi
done

installer="${1:-${MUSA_INSTALLER:-}}"
[ -n "$installer" ] || die "no MUSA toolkit found and no installer given: download the MUSA Toolkit \
installer from Moore Threads, then run: release toolchain install musa /path/to/musa_toolkits_*.{run,deb,rpm} \
(or set MUSA_HOME to an existing install)"
[ -f "$installer" ] || die "installer $installer does not exist"

family="$(os_family)" || exit 1
case "$installer" in
  *.run) as_root bash "$installer" --silent --toolkit --prefix=/usr/local/musa ;;
  *.deb) [ "$family" = debian ] || die "$installer is a .deb but this is not Debian/Ubuntu"
         as_root apt-get install -y "$(realpath "$installer")" ;;
  *.rpm) [ "$family" = rhel ] || die "$installer is an .rpm but this is not AlmaLinux/RHEL"
         as_root dnf install -y "$(realpath "$installer")" ;;
  *) die "unknown installer type: $installer (expected .run, .deb or .rpm)" ;;
esac
[ -f /usr/local/musa/include/musa_runtime_api.h ] || die "installer finished but /usr/local/musa/include/musa_runtime_api.h is missing"
log "done: /usr/local/musa"
