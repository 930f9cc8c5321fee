#!/usr/bin/env bash
# Install the ROCm/HIP host toolchain (headers, libamdhip64, hipcc), or only the HIP runtime,
# idempotently, at the ROCm version matrix.yaml declares.
#   release toolchain install rocm [VERSION] [--runtime-only]   (here also bash scripts/install-rocm.sh)
#
# VERSION is the variant's `toolkit` (e.g. 6.4). An install already there is used when its
# version has that major.minor (read from .info/version, share/doc/rocm-core/version or
# include/hip/hip_version.h, as the toolkit reads it); otherwise the declared one is installed
# beside it. --runtime-only installs the runtime a wheel binds, no headers and no compiler: what a
# smoke-test runner needs.
#
# Which runtime a ROCm release gives comes from runtimes.tsv beside this script, generated from
# packaging/backends/rocm.json (`release schema --write`): the HIP soname follows
# HIP_VERSION_MAJOR, not the ROCm release, so ROCm 7.x and 10.x both give libamdhip64.so.7
# (Debian package libamdhip64-7), ROCm 6.x libamdhip64.so.6, ROCm 5.x libamdhip64.so.5.
#   Ubuntu: AMD's apt repository for VERSION (repo.radeon.com/rocm/apt/VERSION and its graphics
#     repository), pinned above the distribution's packages (/etc/apt/preferences.d/rocm-pin-600,
#     as AMD's install instructions set it) so the two sources never mix.
#   Debian: the distribution's HIP packages, checked against VERSION after the install; AMD
#     publishes no Debian repository. Where the table names a newer archive for the runtime
#     (libamdhip64-6: sid, libamdhip64-7: experimental) and the base is another suite, that archive
#     is added (experimental with sid beside it), pinned low, the HIP packages are named
#     pkg/ARCHIVE, and the base's C library and compiler runtime are pinned to the base
#     (Pin-Priority 1001): the glibc a build needs stays the base suite's (trixie: 2.41).
#     DEBIAN_MIRROR overrides the mirror (default: the one the base's sources use).
#   manylinux_2_28 / AlmaLinux 8: AMD's el8 repository, ROCm VERSION (default 6.4).
# INSTALL_DRY_RUN=1 prints what would run and the files it would write (see _common.sh).
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "$0")/_common.sh"

version="" runtime_only=""
for arg in "$@"; do
  case "$arg" in
    --runtime-only) runtime_only=1 ;;
    -*) die "unknown option $arg (usage: install-rocm.sh [VERSION] [--runtime-only])" ;;
    *) [ -z "$version" ] || die "one version at most (usage: install-rocm.sh [VERSION] [--runtime-only])"
       version="$arg" ;;
  esac
done
version="${version:-${ROCM_VERSION:-}}"
[ -z "$version" ] || check_version_arg "$version"

# lookup_runtime VERSION: soname, debian (packages), archive and releases of its ROCm major.
soname="" debian="" archive="" releases=""
lookup_runtime() {
  local major="${1%%.*}" table known="" b m so deb arch rel
  table="$(dirname "$0")/runtimes.tsv"
  [ -r "$table" ] || die "$table is missing: it ships beside this script (\`release schema --write\` writes it)"
  while IFS=$'\t' read -r b m so deb arch rel; do
    [ "$b" = rocm ] || continue
    known="${known:+$known, }$m"
    [ "$m" = "$major" ] || continue
    soname="$so" debian="${deb//,/ }" archive="$arch" releases="$rel"
  done < <(grep -v '^#' "$table")
  [ -n "$soname" ] || die "ROCm $1: the toolkit knows the HIP runtime of ROCm $known only \
(runtime_sonames in packaging/backends/rocm.json)"
  [ "$debian" != - ] || debian=""
  [ "$archive" != - ] || archive=""
}
[ -z "$version" ] || lookup_runtime "$version"

rocm_version() { toolkit_probe rocm "$1"; }
# runtime_at PREFIX: the declared release's runtime (libamdhip64.so.7 for ROCm 7.x and 10.x; any
# libamdhip64 when none is declared) under PREFIX.
runtime_at() {
  local glob="${soname:-libamdhip64.so.}*"
  compgen -G "$1/lib/$glob" || compgen -G "$1/lib/*/$glob" || true
}
# any_runtime_at PREFIX: a libamdhip64 of any major under PREFIX (a HIP installed there at all).
any_runtime_at() {
  compgen -G "$1/lib/libamdhip64.so.*" || compgen -G "$1/lib/*/libamdhip64.so.*" || true
}

# ensure_hipcc PREFIX: a `hipcc` for the HIP under PREFIX. AMD's packages bring the real one; where
# none can be installed (Debian's hipcc 7.2 needs GCC 16's C++ runtime, newer than the base's,
# which stays), the toolkit's host-only hipcc (hipcc-host.sh beside this script: the C++ compiler
# with HIP's host defines; it refuses device code in one line) goes to PREFIX/bin/hipcc.
# hipcc_at PREFIX: the hipcc a build finds (PREFIX/bin first, then PATH); empty when none.
hipcc_at() {
  if [ -x "$1/bin/hipcc" ]; then echo "$1/bin/hipcc"; else command -v hipcc 2>/dev/null || true; fi
}
ensure_hipcc() {
  local have
  have="$(hipcc_at "$1")"
  if [ -n "$have" ]; then log "hipcc: $have"; return 0; fi
  log "hipcc: none can be installed with this HIP: the toolkit's host-only hipcc (host code, no kernels) at $1/bin/hipcc"
  as_root install -m 0755 "$(dirname "$0")/hipcc-host.sh" "$1/bin/hipcc"
}

other=""
prefixes=("${ROCM_PATH:-}")
while IFS= read -r p; do prefixes+=("$p"); done < <(compgen -G "/opt/rocm-*" | sort -rV || true)
prefixes+=(/opt/rocm /usr)
for prefix in "${prefixes[@]}"; do
  [ -n "$prefix" ] && [ -d "$prefix" ] || continue
  if [ -n "$runtime_only" ]; then
    lib="$(runtime_at "$prefix" | sed -n 1p)"
    if [ -n "$lib" ]; then
      log "the HIP runtime ${soname:+$soname ($releases) }is already installed: $lib: nothing to do"
      exit 0
    fi
    continue
  fi
  [ -f "$prefix/include/hip/hip_runtime_api.h" ] && [ -n "$(any_runtime_at "$prefix")" ] || continue
  found="$(rocm_version "$prefix")"
  if [ -z "$version" ] || same_release "$version" "$found"; then
    if [ -n "$(hipcc_at "$prefix")" ]; then
      log "HIP ${found:-(unknown version)} already installed under $prefix, hipcc $(hipcc_at "$prefix"): nothing to do"
      exit 0
    fi
    log "HIP ${found:-(unknown version)} already installed under $prefix"
    ensure_hipcc "$prefix"
    exit 0
  fi
  other="${other:-HIP ${found:-of unknown version} is installed under $prefix}"
done
[ -z "${other:-}" ] || log "$other, but the matrix declares $version: installing $version beside it"

# AMD's post-install step: the loader finds the runtime under /opt/rocm (the installed release).
loader_config() {
  write_root_file /etc/ld.so.conf.d/rocm.conf <<'CONF'
/opt/rocm/lib
/opt/rocm/lib64
CONF
  as_root ldconfig
}

# debian_suite: the base suite of this Debian (sid reports its testing codename with a "/sid").
debian_suite() {
  case "${PRETTY_NAME:-}" in */sid*) echo sid ;; *) echo "${VERSION_CODENAME:-sid}" ;; esac
}

# from_archive PACKAGE ARCHIVE: PACKAGE/ARCHIVE where ARCHIVE carries PACKAGE (after
# add_debian_archive's update), else PACKAGE as it is (from the base or sid by the pins). A dry run
# cannot ask: PACKAGE/ARCHIVE.
from_archive() {
  if dry_run; then printf '%s/%s' "$1" "$2"; return; fi
  local versions
  versions="$(apt-cache madison "$1" 2>/dev/null || true)"  # whole, then grep: no SIGPIPE under pipefail
  if grep -q " $2/" <<<"$versions"; then printf '%s/%s' "$1" "$2"; else printf '%s' "$1"; fi
}

family="$(os_family)" || exit 1
# shellcheck disable=SC1090
. "$(os_release)"
what="${runtime_only:+the HIP runtime of }ROCm${version:+ $version}"
case "$family" in
  debian)
    if [ "${ID:-}" = ubuntu ] && [ -n "$version" ]; then
      codename="${VERSION_CODENAME:-${UBUNTU_CODENAME:-}}"
      [ -n "$codename" ] || die "$(os_release) names no VERSION_CODENAME: cannot pick AMD's repository"
      log "installing $what from AMD's repository for $codename"
      apt_install ca-certificates gnupg curl
      as_root mkdir -p --mode=0755 /etc/apt/keyrings
      if dry_run; then
        printf 'dry-run: fetch https://repo.radeon.com/rocm/rocm.gpg.key | gpg --dearmor > /etc/apt/keyrings/rocm.gpg\n'
      else
        fetch https://repo.radeon.com/rocm/rocm.gpg.key | gpg --dearmor | as_root tee /etc/apt/keyrings/rocm.gpg >/dev/null \
          || die "downloading AMD's repository key failed (https://repo.radeon.com/rocm/rocm.gpg.key): no network to repo.radeon.com?"
      fi
      write_root_file /etc/apt/sources.list.d/rocm.list <<LIST
deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] https://repo.radeon.com/rocm/apt/$version $codename main
deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] https://repo.radeon.com/graphics/$version/ubuntu $codename main
LIST
      # AMD's packages win over the distribution's (Ubuntu carries its own, older HIP), so one
      # install never mixes the two.
      write_root_file /etc/apt/preferences.d/rocm-pin-600 <<'PIN'
Package: *
Pin: release o=repo.radeon.com
Pin-Priority: 600
PIN
      _APT_UPDATED=
      packages=(rocm-hip-runtime-dev)
      [ -z "$runtime_only" ] || packages=(hip-runtime-amd)
      apt_install "${packages[@]}" || die "apt could not install ${packages[*]} (ROCm $version) from AMD's repository"
      loader_config
    else
      packages=(libamdhip64-dev libhsa-runtime-dev hipcc)
      if [ -n "$runtime_only" ]; then
        [ -n "$version" ] || die "--runtime-only needs the ROCm version (it picks the runtime: libamdhip64.so.7 for ROCm 7.x and 10.x)"
        [ -n "$debian" ] || die "no Debian package is known for $soname ($releases): debian_runtime in packaging/backends/rocm.json"
        read -r -a packages <<<"$debian"
      elif [ -n "$debian" ]; then
        read -r -a runtime_packages <<<"$debian"
        packages=("${runtime_packages[@]}" "${packages[@]}")  # holds the headers to the runtime's major
      fi
      base="$(debian_suite)" target=()
      if [ -n "$archive" ] && [ "$archive" != "$base" ]; then
        add_debian_archive "$archive" "$base" "the $soname packages" rocm-debian
        picked=()
        for p in "${packages[@]}"; do picked+=("$(from_archive "$p" "$archive")"); done
        packages=("${picked[@]}")
        # The HIP packages' own dependencies (libhsa-runtime64-1 7.2 for libamdhip64-7) come from
        # the archive too: apt's solver does not take them from there for pkg/ARCHIVE alone. The
        # C library and the compiler runtime stay the base's (1001 beats -t's 990).
        target=(-t "$archive")
        if [ -z "$runtime_only" ] && ! dry_run \
           && ! apt-get install -s -q --no-install-recommends "${target[@]}" "${packages[@]}" >/dev/null 2>&1; then
          # experimental's hipcc 7.2 needs GCC 16's libstdc++, newer than trixie's, which stays:
          # the host-only hipcc stands in for it (ensure_hipcc, after the install).
          kept=()
          for p in "${packages[@]}"; do [ "${p%%/*}" = hipcc ] || kept+=("$p"); done
          log "hipcc left out: Debian ${archive}'s needs a newer C++ runtime than ${base}'s, which stays (the toolkit's host-only hipcc stands in)"
          packages=("${kept[@]}")
        fi
      fi
      log "installing the distribution's HIP packages (${packages[*]})${version:+ for ROCm $version ($soname)}"
      apt_install "${target[@]}" "${packages[@]}" \
        || die "apt could not install ${packages[*]} from this distribution's archive (${PRETTY_NAME:-${ID:-}}): Debian 12 carries HIP 5.2, sid 6.4, experimental 7.2, Ubuntu 24.04 5.7; on Ubuntu give a ROCm version for AMD's repository"
    fi
    ;;
  rhel)
    # Release CI's manylinux_2_28 before-all. No RHEL machine is at hand where this toolkit is
    # developed: this path (7.2 included) is only ever run here as a dry run (INSTALL_DRY_RUN=1).
    version="${version:-6.4}"
    lookup_runtime "$version"
    log "installing $what from AMD's el8 repository"
    write_root_file /etc/yum.repos.d/rocm.repo <<REPO
[rocm]
name=ROCm $version
baseurl=https://repo.radeon.com/rocm/el8/$version/main
enabled=1
priority=50
gpgcheck=1
gpgkey=https://repo.radeon.com/rocm/rocm.gpg.key

# User-space graphics libraries the HIP runtime depends on (libdrm-amdgpu and friends).
[amdgraphics]
name=AMD Graphics $version
baseurl=https://repo.radeon.com/graphics/$version/el/8.10/main/x86_64/
enabled=1
priority=50
gpgcheck=1
gpgkey=https://repo.radeon.com/rocm/rocm.gpg.key
REPO
    package=rocm-hip-runtime-devel
    [ -z "$runtime_only" ] || package=hip-runtime-amd
    as_root dnf install -y "$package" || die "dnf could not install $package $version from AMD's repository"
    loader_config
    ;;
  *) die "unsupported distribution family '$family'" ;;
esac
dry_run && exit 0

lib="$(for p in /opt/rocm-* /opt/rocm /usr; do runtime_at "$p"; done | sed -n 1p)"
[ -n "$lib" ] || die "the declared ROCm ${version:-} is not what this package source carries: \
${other:-no HIP runtime is installed}, and no ${soname:-libamdhip64.so.*} came with the install \
(build in an image that has ROCm ${version:-}, or on Ubuntu, which takes it from AMD's repository)"
if [ -z "$runtime_only" ] && [ -n "$version" ]; then
  for prefix in /opt/rocm-* /opt/rocm /usr; do
    [ -f "$prefix/include/hip/hip_runtime_api.h" ] || continue
    found="$(rocm_version "$prefix")"
    same_release "$version" "$found" && { ensure_hipcc "$prefix"; log "done: HIP $found under $prefix"; exit 0; }
  done
  die "the packages installed, but no HIP $version is on this machine (this distribution's HIP is another release): on Ubuntu AMD's repository has it; or build in the release image"
fi
log "done: $lib"
