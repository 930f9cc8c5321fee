# Shared helpers for the install-*.sh scripts (sourced, not run).
# Supports Debian/Ubuntu (apt) and manylinux_2_28 / AlmaLinux 8 (dnf).
#
# INSTALL_DRY_RUN=1: print every command that needs root and every file that would be written
# (with its content) instead of doing it, and download nothing; the version checks still run.

log() { printf '[%s] %s\n' "$(basename "$0")" "$*"; }
die() { printf '[%s] error: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }

dry_run() { [ -n "${INSTALL_DRY_RUN:-}" ] && [ "${INSTALL_DRY_RUN}" != 0 ]; }

as_root() {
  if dry_run; then printf 'dry-run: %s\n' "$*"; return 0; fi
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    die "needs root for: $* (run as root or install sudo)"; fi
}

# write_root_file PATH: write stdin to PATH as root (a dry run prints it instead).
write_root_file() {
  if dry_run; then printf 'dry-run: write %s\n' "$1"; sed 's/^/  | /'; return 0; fi
  as_root tee "$1" >/dev/null
}

# fetch URL: the content of URL on stdout (curl or wget).
fetch() {
  if command -v curl >/dev/null; then curl -fsSL "$1"
  elif command -v wget >/dev/null; then wget -qO- "$1"
  else die "downloading $1 needs curl or wget"; fi
}

os_release() { printf '%s' "${OS_RELEASE:-/etc/os-release}"; }  # overridable for tests

os_family() {
  local file
  file="$(os_release)"
  [ -r "$file" ] || die "cannot read $file: unknown distribution"
  # shellcheck disable=SC1090
  . "$file"
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

# check_version_arg VERSION: a toolkit version as matrix.yaml declares it (6.4, 13.0, 4.0.1).
check_version_arg() {
  [[ "$1" =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?$ ]] \
    || die "'$1' is not a toolkit version (expected MAJOR.MINOR, e.g. 6.4: the variant's toolkit in matrix.yaml)"
}

# toolkit_version PREFIX HEADER DEFINES PLACES FILE...: the version of the toolkit under PREFIX,
# read as the toolkit does (release/machine/toolchain.py read_version, from packaging/backends/*.json):
# the first X.Y[.Z] in the first version file present, else the header's macros: one number read by
# its place values (PLACES, the backend's toolkit.version_places: "1000,10" reads CUDART_VERSION
# 13000 as 13.0), or MAJOR,MINOR,PATCH macros joined by dots (PLACES "-"). Empty when unknown.
toolkit_version() {
  local prefix="$1" header="$2" defines="$3" places="$4" name found number parts=() define place above="" out=""
  shift 4
  for name in "$@"; do
    [ -f "$prefix/$name" ] || continue
    found="$(grep -oE '[0-9]+\.[0-9]+(\.[0-9]+)?' "$prefix/$name" | sed -n 1p || true)"
    if [ -n "$found" ]; then printf '%s\n' "$found"; return 0; fi
  done
  [ -f "$prefix/$header" ] || return 0
  IFS=, read -r -a defines <<<"$defines"
  for define in "${defines[@]}"; do
    number="$(sed -nE "s/^[[:space:]]*#define[[:space:]]+$define[[:space:]]+([0-9]+).*/\1/p" "$prefix/$header" | sed -n 1p)"
    [ -n "$number" ] || return 0
    parts+=("$number")
  done
  if [ "${#parts[@]}" -eq 1 ] && [ "$places" != - ]; then
    IFS=, read -r -a places <<<"$places"
    for place in "${places[@]}"; do
      out="${out:+$out.}$(( (above ? parts[0] % above : parts[0]) / place ))"
      above="$place"
    done
    printf '%s\n' "$out"
  else
    (IFS=.; printf '%s\n' "${parts[*]}")
  fi
}

# toolkit_probe BACKEND PREFIX: toolkit_version with BACKEND's probe from toolkits.tsv beside the
# script (generated from packaging/backends/*.json by `release schema --write`), so the scripts
# read a toolkit's version exactly as the backend data says the toolkit does.
toolkit_probe() {
  local table row _name header defines places files list=()
  table="$(dirname "$0")/toolkits.tsv"
  [ -f "$table" ] || die "$table is missing: it comes with the toolkit's scripts (release schema --write makes it)"
  row="$(awk -F'\t' -v b="$1" '$1 == b' "$table")"
  [ -n "$row" ] || die "$table has no row for backend $1 (release schema --write makes it from packaging/backends/$1.json)"
  IFS=$'\t' read -r _name header defines places files <<<"$row"
  [ "$files" = - ] || read -r -a list <<<"$files"
  toolkit_version "$2" "$header" "$defines" "$places" "${list[@]}"
}

# same_release DECLARED FOUND: true when FOUND has DECLARED's major.minor (6.4 matches 6.4.3),
# the rule the toolkit applies before a build (release/machine/toolchain.py toolkit_mismatch).
same_release() {
  local declared="$1" found="$2"
  [ -n "$found" ] || return 1
  [ "$(cut -d. -f1-2 <<<"$declared")" = "$(cut -d. -f1-2 <<<"$found")" ]
}

# debian_mirror: the one Debian mirror setting (release/machine/debian.py debian_mirror reads it the
# same way): DEBIAN_MIRROR, else the first Debian archive (a URI ending in /debian) this system's apt
# sources name (sources.list, then sources.list.d's *.list and *.sources by name; one-line and
# deb822 alike), else http://deb.debian.org/debian.
debian_mirror() {
  local file uri=""
  if [ -n "${DEBIAN_MIRROR:-}" ]; then printf '%s' "${DEBIAN_MIRROR%/}"; return; fi
  for file in "${APT_DIR:-/etc/apt}"/sources.list "${APT_DIR:-/etc/apt}"/sources.list.d/*; do  # APT_DIR: tests
    case "$file" in */sources.list|*.list|*.sources) ;; *) continue ;; esac
    [ -f "$file" ] || continue
    uri="$(sed -nE \
      -e 's,^[[:space:]]*deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+/debian)/?[[:space:]].*,\2,p' \
      -e 's,^[[:space:]]*URIs:[[:space:]]*([^[:space:]]+/debian)/?([[:space:]].*)?$,\1,p' "$file" 2>/dev/null \
      | sed -n 1p || true)"
    [ -z "$uri" ] || break
  done
  printf '%s' "${uri:-http://deb.debian.org/debian}"
}

# add_debian_archive ARCHIVE BASE WHAT NAME: ARCHIVE (and sid, which experimental's packages build
# on) as apt sources pinned low, with BASE's C library and compiler runtime pinned above everything,
# so only the packages named ARCHIVE (`pkg/ARCHIVE`, or `apt-get -t ARCHIVE`) come from it and the
# glibc stays BASE's; WHAT names those packages in the log line, NAME the files under /etc/apt.
# Snapshot-like mirrors carry expired Valid-Until dates for sid and experimental: those two
# sources do not check it. Used by install-rocm.sh and, inside the image, by make-image.sh.
add_debian_archive() {
  local archive="$1" base="$2" what="$3" name="$4" mirror suites=()
  mirror="$(debian_mirror)"
  [ "$base" = sid ] || suites+=(sid)
  [ "$archive" = sid ] || suites+=("$archive")
  log "$what come from Debian $archive (pinned; ${base}'s C library stays)"
  write_root_file "/etc/apt/sources.list.d/$name.list" < <(
    for suite in "${suites[@]}"; do printf 'deb [check-valid-until=no] %s %s main\n' "$mirror" "$suite"; done)
  write_root_file "/etc/apt/preferences.d/$name-pin" < <(
    printf '# %s from Debian %s on %s: the C library and the compiler runtime stay %s'"'"'s.\n' "$what" "$archive" "$base" "$base"
    printf 'Package: libc6 libc-bin libc6-dev libc-dev-bin libstdc++6 libgcc-s1 libedit2\nPin: release n=%s\nPin-Priority: 1001\n' "$base"
    [ "$base" = sid ] || printf '\nPackage: *\nPin: release n=sid\nPin-Priority: 100\n'
    printf '\nPackage: *\nPin: release a=experimental\nPin-Priority: 1\n')
  _APT_UPDATED=
  dry_run || { as_root apt-get update -q; _APT_UPDATED=1; }
}
