# Shared helpers for the install-*.sh scripts (sourced, not run).
# Supports Debian/Ubuntu (apt) and manylinux_2_28 / AlmaLinux 8 (dnf).

log() { printf '[%s] %s\n' "$(basename "$0")" "$*"; }
die() { printf '[%s] error: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    die "needs root for: $* (run as root or install sudo)"; fi
}

os_family() {
  local os_release="${OS_RELEASE:-/etc/os-release}"  # overridable for tests
  [ -r "$os_release" ] || die "cannot read $os_release: unknown distribution"
  # shellcheck disable=SC1091
  . "$os_release"
  case " ${ID:-} ${ID_LIKE:-} " in
    *" debian "*|*" ubuntu "*) echo debian ;;
    *" rhel "*|*" centos "*|*" fedora "*|*" almalinux "*|*" rocky "*) echo rhel ;;
    *) die "unsupported distribution '${ID:-unknown}': supported are Debian/Ubuntu and AlmaLinux 8 (manylinux_2_28)" ;;
  esac
}

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "${_APT_UPDATED:-}" ]; then as_root apt-get update -q; _APT_UPDATED=1; fi
  as_root apt-get install -y -q --no-install-recommends "$@"
}
