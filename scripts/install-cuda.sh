#!/usr/bin/env bash
# Install the CUDA toolkit pieces the engine builds against (nvcc, cudart headers and the shared
# runtime), idempotently.
#   release toolchain install cuda [CUDA_VERSION]     (default 13.0; here also bash scripts/install-cuda.sh)
# Debian/Ubuntu and manylinux_2_28 / AlmaLinux 8, from NVIDIA's package repositories.
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "$0")/_common.sh"

version="${1:-${CUDA_VERSION:-13.0}}"
dashed="${version/./-}"
for prefix in "${CUDA_HOME:-}" "/usr/local/cuda-$version" /usr/local/cuda; do
  if [ -n "$prefix" ] && [ -x "$prefix/bin/nvcc" ] && [ -f "$prefix/include/cuda_runtime_api.h" ]; then
    log "CUDA already installed at $prefix: nothing to do"
    exit 0
  fi
done

family="$(os_family)" || exit 1
case "$family" in
  debian)
    . /etc/os-release
    distro="${ID}${VERSION_ID//./}"
    log "installing CUDA $version from NVIDIA's repository for $distro"
    apt_install ca-certificates wget
    tmp="$(mktemp -d)"
    url="https://developer.download.nvidia.com/compute/cuda/repos/$distro/x86_64/cuda-keyring_1.1-1_all.deb"
    wget -qO "$tmp/keyring.deb" "$url" \
      || die "downloading NVIDIA's repository keyring failed ($url): no network to developer.download.nvidia.com, or no repository for $distro"
    as_root dpkg -i "$tmp/keyring.deb" || die "installing NVIDIA's repository keyring failed"
    rm -rf "$tmp"
    _APT_UPDATED=
    apt_install "cuda-nvcc-$dashed" "cuda-cudart-dev-$dashed" \
      || die "apt could not install CUDA $version (cuda-nvcc-$dashed, cuda-cudart-dev-$dashed) from NVIDIA's repository"
    ;;
  rhel)
    log "installing CUDA $version from NVIDIA's rhel8 repository"
    as_root dnf install -y dnf-plugins-core
    as_root dnf config-manager --add-repo https://developer.download.nvidia.com/compute/cuda/repos/rhel8/x86_64/cuda-rhel8.repo \
      || die "adding NVIDIA's rhel8 repository failed (no network to developer.download.nvidia.com?)"
    as_root dnf install -y "cuda-nvcc-$dashed" "cuda-cudart-devel-$dashed" \
      || die "dnf could not install CUDA $version (cuda-nvcc-$dashed, cuda-cudart-devel-$dashed)"
    ;;
  *) die "unsupported distribution family '$family'" ;;
esac
[ -x "/usr/local/cuda-$version/bin/nvcc" ] || die "the packages installed but /usr/local/cuda-$version/bin/nvcc is missing"
log "done: /usr/local/cuda-$version"
