#!/usr/bin/env bash
# Install podman (rootful, runc, cgroupfs) and debootstrap on Debian/Ubuntu, idempotently, and
# check that podman can run a container engine query.
#   bash scripts/setup-podman.sh
# Environment:
#   CONTAINERS_CONF_PATH  where to write containers.conf (default /etc/containers/containers.conf,
#                         the file rootful podman reads)
#   PODMAN_NOFILE / PODMAN_NPROC  default ulimits for containers (default 20000 / 1000): podman's
#                         own defaults (nofile=1048576) exceed the hard limits of some hosts and
#                         every container start then fails in runc with "setrlimit ... operation
#                         not permitted".
# Why runc and cgroupfs: crun fails on hosts with a hybrid cgroup v1 layout (no systemd), and the
# systemd cgroup manager needs a running systemd.
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "$0")/_common.sh"

conf="${CONTAINERS_CONF_PATH:-/etc/containers/containers.conf}"
nofile="${PODMAN_NOFILE:-20000}"
nproc="${PODMAN_NPROC:-1000}"

[ "$(id -u)" -eq 0 ] || die "run as root: the image scripts use rootful podman and debootstrap"
[ "$(os_family)" = debian ] || die "setup-podman.sh supports Debian/Ubuntu hosts only"

# Never ask for more than the host's hard limits allow.
hard_nofile="$(ulimit -Hn)"; hard_nproc="$(ulimit -Hu)"
if [ "$hard_nofile" != unlimited ] && [ "$nofile" -gt "$hard_nofile" ]; then nofile="$hard_nofile"; fi
if [ "$hard_nproc" != unlimited ] && [ "$nproc" -gt "$hard_nproc" ]; then nproc="$hard_nproc"; fi

need=()
for pkg in podman runc debootstrap; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
  log "installing ${need[*]}"
  # Rootful only: uidmap, slirp4netns and fuse-overlayfs are for rootless podman and are not needed.
  apt_install "${need[@]}"
else
  log "podman, runc and debootstrap already installed"
fi

runc_path="$(command -v runc)" || die "runc is not on PATH after installing it"

mkdir -p "$(dirname "$conf")"
want="$(cat <<CONF
# Written by scripts/setup-podman.sh (wheel release toolkit).
[containers]
default_ulimits = ["nofile=${nofile}:${nofile}", "nproc=${nproc}:${nproc}"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"

[engine.runtimes]
runc = ["${runc_path}"]
CONF
)"
if [ -f "$conf" ] && [ "$(cat "$conf")" = "$want" ]; then
  log "$conf already up to date"
else
  if [ -f "$conf" ] && ! grep -q 'Written by scripts/setup-podman.sh' "$conf"; then
    cp -p "$conf" "$conf.bak.$(date +%s)"
    log "kept the previous $conf as $conf.bak.*"
  fi
  printf '%s\n' "$want" > "$conf"
  log "wrote $conf (runtime runc, cgroupfs, ulimits nofile=$nofile nproc=$nproc)"
fi

info="$(podman info --format '{{.Host.OCIRuntime.Name}} {{.Host.CgroupManager}} {{.Host.CgroupsVersion}} {{.Store.GraphDriverName}}' 2>&1)" \
  || die "podman info failed: $(printf '%s' "$info" | tail -n 1)"
log "podman $(podman --version | awk '{print $3}') ok: runtime/cgroup manager/cgroups/storage = $info"
