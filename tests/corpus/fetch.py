"""Download the real-world wheel corpus listed in tests/corpus/wheels.toml into a cache directory.

    python3 tests/corpus/fetch.py [--cache DIR] [--only PROJECT ...] [--list]

The cache defaults to ~/.cache/release-corpus and can be moved with RELEASE_CORPUS_CACHE (or
--cache). Every file is checked against its pinned size and sha256; a file already cached with the
right digest is not downloaded again. A download goes to `<name>.part` and is renamed only once its
digest matches, so an interrupted run never leaves a wrong wheel behind. Stdlib only.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from release import settings

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

MANIFEST = Path(__file__).with_name("wheels.toml")
CHUNK = 1 << 20


@dataclass(frozen=True)
class CorpusWheel:
    project: str
    version: str
    filename: str
    url: str
    sha256: str
    size: int
    why: str
    key: str = ""
    """The entry's name where one project has several wheels here (`cryptography-cp314t`)."""

    @property
    def name(self) -> str:
        """What expected.toml and the tests call this wheel: `key`, or the project."""
        return self.key or self.project


def load_manifest(path: Path = MANIFEST) -> list[CorpusWheel]:
    with path.open("rb") as fh:
        data = tomllib.load(fh)
    return [CorpusWheel(**entry) for entry in data["wheel"]]


def cache_dir(override: str | None = None) -> Path:
    if override:
        return Path(override).expanduser()
    env = settings.path("RELEASE_CORPUS_CACHE")
    if env is not None:
        return env
    return Path.home() / ".cache" / "release-corpus"


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def is_cached(wheel: CorpusWheel, cache: Path) -> bool:
    target = cache / wheel.filename
    return target.is_file() and target.stat().st_size == wheel.size and file_digest(target) == wheel.sha256


def _progress(name: str, done: int, total: int, started: float) -> None:
    elapsed = max(time.monotonic() - started, 1e-6)
    rate = done / elapsed / 1e6
    percent = 100 * done / max(total, 1)
    line = f"\r  {name}: {done / 1e6:8.1f} / {total / 1e6:.1f} MB  {percent:5.1f}%  {rate:6.1f} MB/s"
    sys.stderr.write(line)
    sys.stderr.flush()


def download(wheel: CorpusWheel, cache: Path, *, quiet: bool = False) -> Path:
    """Fetch one wheel into the cache (unless already there) and return its path."""
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / wheel.filename
    if is_cached(wheel, cache):
        if not quiet:
            print(f"  {wheel.filename}: cached", file=sys.stderr)
        return target
    part = target.with_name(target.name + ".part")
    digest = hashlib.sha256()
    done = 0
    started = time.monotonic()
    last = 0.0
    request = urllib.request.Request(wheel.url, headers={"User-Agent": "release-corpus-fetch/1"})
    with urllib.request.urlopen(request, timeout=120) as response, part.open("wb") as out:
        while chunk := response.read(CHUNK):
            out.write(chunk)
            digest.update(chunk)
            done += len(chunk)
            now = time.monotonic()
            if not quiet and now - last > 0.5:
                _progress(wheel.filename, done, wheel.size, started)
                last = now
    if not quiet:
        _progress(wheel.filename, done, wheel.size, started)
        sys.stderr.write("\n")
    if done != wheel.size or digest.hexdigest() != wheel.sha256:
        part.unlink()
        msg = (
            f"{wheel.filename}: got {done} bytes with sha256 {digest.hexdigest()}, "
            f"expected {wheel.size} bytes with sha256 {wheel.sha256}"
        )
        raise RuntimeError(msg)
    part.replace(target)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cache", help="cache directory (default: $RELEASE_CORPUS_CACHE or ~/.cache/release-corpus)"
    )
    parser.add_argument("--only", nargs="*", default=(), metavar="PROJECT", help="fetch only these projects")
    parser.add_argument("--list", action="store_true", help="print the manifest and the cache state only")
    args = parser.parse_args(argv)
    cache = cache_dir(args.cache)
    wheels = [w for w in load_manifest() if not args.only or {w.project, w.name} & set(args.only)]
    total = sum(w.size for w in wheels)
    if args.list:
        for w in wheels:
            state = "cached" if (cache / w.filename).is_file() else "missing"
            print(f"{w.size / 1e6:9.1f} MB  {state:7}  {w.filename}")
        print(f"{total / 1e6:9.1f} MB  total, cache {cache}")
        return 0
    print(f"corpus: {len(wheels)} wheels, {total / 1e6:.1f} MB, cache {cache}", file=sys.stderr)
    failures = 0
    for index, wheel in enumerate(wheels, 1):
        print(f"[{index}/{len(wheels)}] {wheel.name} {wheel.version}", file=sys.stderr)
        try:
            download(wheel, cache)
        except (OSError, RuntimeError) as exc:
            failures += 1
            print(f"error: {wheel.filename}: {exc}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
