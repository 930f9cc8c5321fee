"""Reuse across builds: ccache configured so that identical translation units compiled for
different Pythons hit the cache, and wheels that need no rebuild because nothing they depend on
changed (a no-op rebuild is quick and says so)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from release import atomic
from release.wheel.files import file_sha256
from release.wheel.names import report_path

_warned: set[str] = set()


def ccache_env(work: Path) -> dict[str, str]:
    """ccache settings for every compiler call of a variant: paths relative to the variant's work
    directory (the staged source and every per-Python build tree live below it), the build
    directory not hashed (it differs per Python), and the compiler identified by content."""
    return {
        "CCACHE_BASEDIR": str(work),
        "CCACHE_NOHASHDIR": "true",
        "CCACHE_COMPILERCHECK": "content",
        "CCACHE_SLOPPINESS": "include_file_ctime,include_file_mtime,time_macros",
    }


@dataclass(frozen=True)
class Wave:
    """Wheels built at the same time, and the compile jobs each one runs."""

    steps: range
    parallel: int


def build_waves(count: int, *, jobs: int, cores: int, shared_cache: bool) -> tuple[Wave, ...]:
    """The order of `count` wheel builds. With a shared compiler cache the first wheel builds
    alone on every core: wheels started together would all miss on the objects they share (a
    core compiled with a per-Python -I is the same for every Python) and compile them each; the
    others then find them in the cache. The rest run `jobs` at a time, each with its share of
    the cores and one job more, so that a wheel in a serial phase (configure, link, repair) or
    the last one of an uneven wave leaves no core idle."""
    if count <= 0:
        return ()
    jobs, cores = max(1, jobs), max(1, cores)
    first = 1 if shared_cache and count > 1 else 0
    waves = [Wave(range(first), cores)] if first else []
    rest = range(first, count)
    together = min(jobs, len(rest))
    share = -(-cores // together)
    waves.append(Wave(rest, share + 1 if together > 1 else share))
    return tuple(waves)


def ccache_missing_note() -> str | None:
    """Said once per process where ccache is absent."""
    if shutil.which("ccache") or "ccache" in _warned:
        return None
    _warned.add("ccache")
    return (
        "note: ccache is not installed, so every Python compiles the whole engine again: "
        "`apt-get install ccache` (or `dnf install ccache`) makes per-Python builds share objects"
    )


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int

    @property
    def text(self) -> str:
        total = self.hits + self.misses
        return f"{self.hits}/{total} ({100 * self.hits / total:.0f}%)" if total else "-"


def read_stats_log(path: Path) -> CacheStats | None:
    """Hits and misses from a ccache stats log (CCACHE_STATSLOG: one counter name a line)."""
    if not path.is_file():
        return None
    hits = misses = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        word = line.strip()
        if word in ("direct_cache_hit", "preprocessed_cache_hit"):
            hits += 1
        elif word == "cache_miss":
            misses += 1
    return CacheStats(hits, misses)


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def wheel_key(parts: Mapping[str, object]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def up_to_date(stamp: Path, key: str, base: Path) -> Path | None:
    """The wheel a previous build made from exactly these inputs, if it is still where the stamp
    says (a path relative to `base`, or absolute) unchanged, with its report; None when it must be
    built."""
    try:
        data = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    wheel = base / str(data.get("wheel", ""))
    if not wheel.is_file() or not report_path(wheel).is_file():
        return None
    return wheel if file_sha256(wheel) == data.get("sha256") else None


def remember(stamp: Path, key: str, wheel: Path, base: Path) -> None:
    """Record `wheel` as built from `key`: its path relative to `base` when it lies inside (a copy
    of that directory keeps the record true), else absolute, and its SHA-256."""
    path, under = wheel.resolve(), base.resolve()
    stamp.parent.mkdir(parents=True, exist_ok=True)
    where = str(path.relative_to(under)) if path.is_relative_to(under) else str(path)
    record = {"key": key, "wheel": where, "sha256": file_sha256(wheel)}
    atomic.write_text(stamp, json.dumps(record))
