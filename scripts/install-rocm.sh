#!/usr/bin/env bash
# Install the ROCm/HIP host toolchain (headers, libamdhip64, hipcc), idempotently.
#   release toolchain install rocm [ROCM_VERSION]     (here also bash scripts/install-rocm.sh)
# Debian 12 / Ubuntu >= 23.04: the distribution's HIP packages (HIP 5.2 on Debian 12) unless a
#   ROCM_VERSION is given, which uses AMD's apt repository (Ubuntu only).
# manylinux_2_28 / AlmaLinux 8: AMD's el8 repository, ROCm ROCM_VERSION (default 6.4).
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "$0")/_common.sh"

version="${1:-${ROCM_VERSION:-}}"
for prefix in "${ROCM_PATH:-}" /opt/rocm /usr; do
  if [ -n "$prefix" ] && [ -f "$prefix/include/hip/hip_runtime_api.h" ] && \
     { compgen -G "$prefix/lib/libamdhip64.so*" || compgen -G "$prefix/lib/*/libamdhip64.so*"; } >/dev/null; then
    log "HIP already installed under $prefix: nothing to do"
    exit 0
  fi
done

family="$(os_family)" || exit 1
case "$family" in
  debian)
    if [ -z "$version" ]; then
      log "installing the distribution's HIP packages"
      apt_install libamdhip64-dev libhsa-runtime-dev hipcc \
        || die "apt could not install Debian's HIP packages (libamdhip64-dev libhsa-runtime-dev hipcc): they need Debian 12 or Ubuntu 23.04+; elsewhere give a ROCm version for AMD's repository"
    else
      . /etc/os-release
      log "installing ROCm $version from AMD's repository for ${VERSION_CODENAME:-unknown}"
      apt_install ca-certificates gnupg wget
      as_root mkdir -p /etc/apt/keyrings
      wget -qO- https://repo.radeon.com/rocm/rocm.gpg.key | gpg --dearmor | as_root tee /etc/apt/keyrings/rocm.gpg >/dev/null \
        || die "downloading AMD's repository key failed (https://repo.radeon.com/rocm/rocm.gpg.key): no network to repo.radeon.com?"
      echo "deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] https://repo.radeon.com/rocm/apt/$version ${VERSION_CODENAME} main" \
        | as_root tee /etc/apt/sources.list.d/rocm.list >/dev/null
      _APT_UPDATED=
      apt_install rocm-hip-runtime-dev || die "apt could not install rocm-hip-runtime-dev $version from AMD's repository"
    fi
    ;;
  rhel)
    version="${version:-6.4}"
    log "installing ROCm $version (HIP runtime and headers) from AMD's el8 repository"
    as_root tee /etc/yum.repos.d/rocm.repo >/dev/null <<REPO
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
    as_root dnf install -y rocm-hip-runtime-devel || die "dnf could not install rocm-hip-runtime-devel $version from AMD's repository"
    ;;
  *) die "unsupported distribution family '$family'" ;;
esac
log "done: $(ls /opt/rocm*/lib/libamdhip64.so.* /usr/lib/*/libamdhip64.so.* 2>/dev/null | head -n 1)"
