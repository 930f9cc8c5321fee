#!/usr/bin/env bash
# Free disk space on a CI runner before large pulls and installs (the vLLM and SGLang ROCm images
# are tens of GB; a ROCm or CUDA toolkit install several more): removes the big SDKs GitHub's
# ubuntu runner images preinstall that no release job uses, and prints the free space before and
# after.
#   release toolchain free-disk [--dry-run] [--docker-images] [--force]   (here also bash scripts/free-disk.sh)
#
# It deletes system directories, so it runs only on a CI runner (GITHUB_ACTIONS=true or CI=true)
# unless --force is given. --docker-images also removes the container images the runner image
# preloads (docker image prune --all). --dry-run (or INSTALL_DRY_RUN=1) lists what would go.
# FREE_DISK_PATHS (space-separated) replaces the list below. Python interpreters in
# /opt/hostedtoolcache (actions/setup-python) are kept: the smoke jobs use them.
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "$0")/_common.sh"

default_paths=(
  /usr/share/dotnet                 # .NET SDKs
  /usr/local/lib/android            # Android SDK and NDKs
  /opt/ghc /usr/local/.ghcup        # Haskell
  /opt/hostedtoolcache/CodeQL       # CodeQL bundles (setup-python's interpreters stay)
  /usr/local/share/boost
  /usr/share/swift
  /usr/local/share/powershell
  /usr/local/share/chromium /opt/google /opt/microsoft
  /opt/az /usr/share/az_*           # Azure CLI
  /usr/local/julia*
  /usr/local/aws-cli /usr/local/aws-sam-cli
)
force="" docker_images=""
for arg in "$@"; do
  case "$arg" in
    --dry-run) export INSTALL_DRY_RUN=1 ;;
    --force) force=1 ;;
    --docker-images) docker_images=1 ;;
    *) die "unknown option $arg (usage: free-disk.sh [--dry-run] [--docker-images] [--force])" ;;
  esac
done
if [ -z "$force" ] && [ "${GITHUB_ACTIONS:-}" != true ] && [ "${CI:-}" != true ]; then
  die "this is not a CI runner (GITHUB_ACTIONS and CI are unset): free-disk.sh deletes preinstalled SDKs \
(/usr/share/dotnet, /usr/local/lib/android, ...); give --force to run it here anyway"
fi

if [ -n "${FREE_DISK_PATHS:-}" ]; then read -r -a paths <<<"$FREE_DISK_PATHS"; else paths=("${default_paths[@]}"); fi
where=/
[ "${#paths[@]}" -eq 0 ] || where="$(dirname "${paths[0]}")"
while [ ! -d "$where" ]; do where="$(dirname "$where")"; done

free_space() { df -Pk "$where" | awk 'NR == 2 { printf "%.1f GiB free of %.1f GiB on %s", $4 / 1048576, $2 / 1048576, $6 }'; }
log "before: $(free_space)"
found=0
for path in "${paths[@]}"; do
  # shellcheck disable=SC2086  # globs in the list expand here
  for match in $path; do
    [ -e "$match" ] || continue
    found=$((found + 1))
    size="$(du -sh "$match" 2>/dev/null | cut -f1 || true)"
    log "removing $match (${size:-?})"
    as_root rm -rf "$match"
  done
done
[ "$found" -gt 0 ] || log "none of the preinstalled SDKs is here"
if [ -n "$docker_images" ]; then
  if command -v docker >/dev/null; then
    log "removing preloaded docker images"
    as_root docker image prune --all --force >/dev/null || log "docker image prune failed (no daemon?): skipped"
  else
    log "docker is not installed: no images to remove"
  fi
fi
log "after:  $(free_space)"
