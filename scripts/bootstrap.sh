#!/usr/bin/env bash
# Set up a fresh Debian/Ubuntu machine for this repository, idempotently: the Debian packages a
# build needs (python3 with venv and headers, git, compilers, CMake, Ninja, ccache), the virtual
# environment .venv with the toolkit and its test tools, the GPU toolchains of the variants built on
# this machine (none in this repository's matrix: each has its local image), podman where a variant's
# declared toolkit is not this machine's (it then builds in its local image), and the interpreters
# matrix.yaml lists (found where present; otherwise from uv or pyenv where they can download, the
# distribution's packages, or Debian sid's build: scripts/python-debian.sh). Ends with a table of what
# the machine has and how to get the rest.
#
#   bash scripts/bootstrap.sh            # as root, or as a user with sudo
#
# Environment: BOOTSTRAP_TOOLCHAINS (space-separated backends, "" for none; default: the backends of
# the variants matrix.yaml builds on this machine, those without a local build image, whose
# declared toolkit then must be here), BOOTSTRAP_VENV (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/_common.sh
. scripts/_common.sh

venv="${BOOTSTRAP_VENV:-.venv}"
t_start=$(date +%s)
step() { log "[$(( $(date +%s) - t_start ))s] $*"; }

family="$(os_family)" || exit 1
[ "$family" = debian ] || die "bootstrap.sh knows Debian and Ubuntu (apt). Elsewhere install Python 3.10+ \
with venv and headers, git, a C++ compiler, CMake and Ninja, then: python3 -m venv .venv && \
.venv/bin/pip install -e '.[test]'"

step "Debian packages: python3 (venv, headers), git, compilers, CMake, Ninja, ccache"
apt_install python3 python3-venv python3-dev git build-essential cmake ninja-build ccache \
  ca-certificates file binutils patchelf
python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || die "python3 is $(python3 -V 2>&1): the toolkit needs Python 3.10 or newer"

step "virtual environment $venv with the toolkit and its test tools (uv pip install -e '.[test]')"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# uv (a dependency of the toolkit, from PyPI with pip) installs the rest: the same requirements in
# seconds where pip takes a minute of CPU; pip does it where uv cannot (an index only pip is set for).
if "$venv/bin/python" -m pip install --quiet --disable-pip-version-check uv \
   && UV_NATIVE_TLS=1 "$venv/bin/uv" pip install --quiet --python "$venv/bin/python" -e '.[test]'; then
  :
else
  log "uv could not install the toolkit here; pip installs it"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[test]' \
    || die "pip install -e '.[test]' into $venv failed (output above)"
fi
release="$venv/bin/release"

# The host's toolkit is installed only where a variant's build uses it: a variant with a local build
# image builds there whenever the host lacks its declared toolkit (the image has it).
if [ -z "${BOOTSTRAP_TOOLCHAINS+set}" ]; then
  toolchains="$("$venv/bin/python" - <<'PY'
from release.config.matrix import load
from release.plan.steps import make_plan

host = {s.variant.backend for s in make_plan(load("matrix.yaml")).builds if s.variant.build_image.local_recipe is None}
print(" ".join(sorted(host - {"cpu"})))
PY
)"
  [ -n "$toolchains" ] || log "no GPU toolchain on the host: every GPU variant of matrix.yaml builds in its local image"
else
  toolchains="$BOOTSTRAP_TOOLCHAINS"
fi
for backend in $toolchains; do
  step "$backend toolchain (release toolchain install $backend)"
  "$release" toolchain install "$backend"
done

step "container engine (a variant whose declared toolkit is not this machine's builds in its local image)"
needs_engine="$("$venv/bin/python" - <<'PY'
from release.machine.toolchain import check_toolkit, find_toolchain
from release.config.matrix import load
from release.errors import ToolchainError
from release.plan.steps import make_plan

seen = set()
for step in make_plan(load("matrix.yaml")).builds:
    variant = step.variant
    if variant.name in seen or variant.build_image.local_recipe is None:
        continue
    seen.add(variant.name)
    try:
        check_toolkit(variant, find_toolchain(variant.backend), allow=False)
    except ToolchainError:
        print(variant.name)
PY
)"
if [ -z "$needs_engine" ]; then
  log "every variant with a local image has its declared toolkit here: no container engine needed"
elif podman info >/dev/null 2>&1 || docker info >/dev/null 2>&1; then
  log "variants built in their local image ($(echo $needs_engine)): a container engine answers"
else
  log "variants built in their local image ($(echo $needs_engine)): setting up podman (scripts/setup-podman.sh)"
  as_root bash scripts/setup-podman.sh
fi

step "interpreters of matrix.yaml"
missing="$("$venv/bin/python" - <<'PY'
from release.machine.interpreters import find_interpreter
from release.config.matrix import load

print(" ".join(v for v in load("matrix.yaml").matrix.python if find_interpreter(v) is None))
PY
)"
if [ -n "$missing" ]; then
  # uv downloads CPython builds from github.com; pyenv compiles them from python.org's sources.
  [ -x "$venv/bin/uv" ] || "$venv/bin/python" -m pip install --quiet --disable-pip-version-check uv \
    || log "uv could not be installed from PyPI; trying the other ways"
  for version in $missing; do
    case "$version" in
      # A free-threaded CPython that cannot be had here: its steps are GitHub-only (release/plan/github_only.py)
      *t) "$release" toolchain install python "$version" \
            || log "Python $version (free-threaded) is not available here: its steps are GitHub-only (manylinux builds and smokes them)" ;;
      *) "$release" toolchain install python "$version" \
            || log "Python $version is not available here: builds skip it locally (CI=true fails instead)" ;;
    esac
  done
fi

step "what this machine has for matrix.yaml"
"$release" toolchain check
log "done in $(( $(date +%s) - t_start ))s; the toolkit runs from $venv: $venv/bin/nox -l lists the sessions"
