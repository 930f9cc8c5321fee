"""`python -m release verify` against `auditwheel show` and against the inflate floor, on the
real-world corpus wheels over 300 MB unpacked (tests/corpus/wheels.toml, downloaded into the cache).

For each wheel, in this one run:
* `auditwheel show WHEEL` and `python -m release verify --json WHEEL`, each a child process, the
  best wall time of `--runs` (auditwheel once); goal: verify 10x faster or more;
* the inflate floor: the time the fastest inflater installed (zlib, zlib-ng or isal, each tried)
  takes, in one thread, to inflate only
  the bytes of each ELF member up to the end of its dynamic segment; goal: verify within 2x of it
  (printed too: the time to inflate every member whole, which checking RECORD's sha256 needs);
* verify's peak RSS (goal: at most 256 MB for a 1 GB unpacked wheel) and CPU seconds.
Then verify's CPU seconds on the corpus wheels under 10 MB (goal: at most 1 s).

Usage: python benchmarks/verify_bench.py [--runs N] [--only PROJECT ...]   (exit 1 when a goal is missed)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from release.inspect.elfformat import PT_DYNAMIC, Image, read_header, read_segments  # noqa: E402
from release.wheel import inflate  # noqa: E402
from release.wheel.zip import Archive, ZipEntry, read_directory  # noqa: E402
from tests.corpus.fetch import CorpusWheel, cache_dir, download, load_manifest  # noqa: E402

LARGE = 300_000_000
SMALL = 10_000_000
AUDITWHEEL_RATIO = 10.0
FLOOR_RATIO = 2.0
RSS_MB = 256
SMALL_CPU = 1.0


@dataclass
class Child:
    seconds: float
    cpu: float
    rss_mb: float
    code: int


def child(command: list[str]) -> Child:
    """Run a command, discarding its output; its wall time, CPU time and peak RSS."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Child(
        time.perf_counter() - started,
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss / 1024,
        proc.returncode,
    )


def best(command: list[str], runs: int) -> Child:
    return min((child(command) for _ in range(runs)), key=lambda c: c.seconds)


def _inflaters() -> list[Any]:
    """Every inflater installed: zlib, and zlib-ng and isal when they are."""
    found: list[Any] = [zlib]
    for name in ("zlib_ng.zlib_ng", "isal.isal_zlib"):
        with contextlib.suppress(ImportError):
            found.append(importlib.import_module(name))
    return found


def _inflate(archive: Archive, entry: ZipEntry, end: int) -> float:
    """Seconds one thread takes to inflate the member's first `end` bytes, with the fastest
    inflater installed (each is tried; the best time counts)."""
    return min(_inflate_with(codec, archive, entry, end) for codec in _inflaters())


def _inflate_with(codec: Any, archive: Archive, entry: ZipEntry, end: int) -> float:
    compressed = memoryview(archive.read(entry.data_offset, entry.compressed_size))
    started = time.perf_counter()
    inflater = codec.decompressobj(-15)
    produced = at = 0
    tail: bytes | memoryview = b""
    while produced < end:
        if not tail:
            tail, at = compressed[at : at + (1 << 20)], at + (1 << 20)
        produced += len(inflater.decompress(tail, min(inflate.CHUNK, end - produced)))
        tail = inflater.unconsumed_tail
    return time.perf_counter() - started


def floors(wheel: Path) -> tuple[float, float]:
    """Seconds to inflate, in one thread with the fastest inflater: every ELF member up to the end
    of its dynamic segment (the floor of the goal); and every member whole (what checking RECORD's
    sha256 of every file needs at least)."""
    elf_floor = whole = 0.0
    with wheel.open("rb") as fh:
        archive = Archive(fh.fileno(), os.fstat(fh.fileno()).st_size)
        entries = [e for e in read_directory(archive) if not e.is_dir]
        for entry in entries:
            if entry.method != 0:
                whole += _inflate(archive, entry, entry.size)
            if entry.size < 64 or entry.method == 0:
                continue
            budget = inflate.Budget(entry.size * 2 + (1 << 20))
            head = b"".join(inflate.pieces(archive, entry, budget, limit=64 << 10))
            if head[:4] != b"\x7fELF":
                continue
            header = read_header(head, entry.size)
            segments = read_segments(header, Image(entry.size, [(0, head)]))
            end = max((s.offset + s.filesz for s in segments if s.type == PT_DYNAMIC), default=entry.size)
            elf_floor += _inflate(archive, entry, end)
    return elf_floor, whole


def unpacked_size(wheel: Path) -> int:
    with wheel.open("rb") as fh:
        archive = Archive(fh.fileno(), os.fstat(fh.fileno()).st_size)
        return sum(e.size for e in read_directory(archive))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=())
    parser.add_argument("--floor", type=Path, help=argparse.SUPPRESS)  # measured in a child of its own
    args = parser.parse_args()
    if args.floor:
        print(*floors(args.floor))
        return 0
    cache = cache_dir()
    corpus: list[tuple[CorpusWheel, Path]] = []
    for item in load_manifest():
        if not args.only or item.project in args.only:
            corpus.append((item, download(item, cache, quiet=True)))
    verify = [sys.executable, "-m", "release", "verify", "--json"]
    missed: list[str] = []
    names = ", ".join(c.__name__ for c in _inflaters())
    print(f"verify inflates with {inflate.INFLATER}; the floors take the fastest of {names}")
    print(f"{os.cpu_count()} CPUs")
    print(
        f"{'wheel':<34} {'unpacked MB':>11} {'auditwheel s':>12} {'verify s':>8} {'ratio':>6} "
        f"{'floor s':>7} {'÷floor':>6} {'inflate all s':>13} {'÷all':>5} {'RSS MB':>6} {'CPU s':>6} "
        f"{'auditwheel CPU s':>16}"
    )
    for item, path in corpus:
        size = unpacked_size(path)
        if size < LARGE:
            continue
        ours = best([*verify, str(path)], args.runs)
        theirs = child([sys.executable, "-m", "auditwheel", "show", str(path)])
        measured = [
            tuple(
                map(
                    float,
                    subprocess.run(
                        [sys.executable, __file__, "--floor", str(path)],
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout.split(),
                )
            )
            for _ in range(args.runs)
        ]
        floor_s, whole_s = min(m[0] for m in measured), min(m[1] for m in measured)
        ratio, over_floor = theirs.seconds / ours.seconds, ours.seconds / floor_s
        print(
            f"{item.project:<34} {size / 1e6:11.0f} {theirs.seconds:12.2f} {ours.seconds:8.2f} {ratio:6.1f} "
            f"{floor_s:7.2f} {over_floor:6.2f} {whole_s:13.2f} {ours.seconds / whole_s:5.2f} "
            f"{ours.rss_mb:6.0f} {ours.cpu:6.2f} {theirs.cpu:16.2f}",
            flush=True,
        )
        if ratio < AUDITWHEEL_RATIO:
            missed.append(f"{item.project}: auditwheel show ÷ verify {ratio:.1f} < {AUDITWHEEL_RATIO}")
        if over_floor > FLOOR_RATIO:
            missed.append(f"{item.project}: verify ÷ inflate floor {over_floor:.2f} > {FLOOR_RATIO}")
        if ours.rss_mb > RSS_MB * max(1.0, size / 1e9):
            missed.append(f"{item.project}: peak RSS {ours.rss_mb:.0f} MB")
    print("(wall times, which the machine's other load stretches; CPU seconds beside them; the floors")
    print(" are the best of the runs, each in a child of its own)")
    print(f"\n{'wheel under 10 MB':<34} {'CPU s':>6} (goal <= {SMALL_CPU} s, interpreter start included)")
    for item, path in corpus:
        if path.stat().st_size < SMALL:
            ours = best([*verify, str(path)], args.runs)
            print(f"{item.project:<34} {ours.cpu:6.2f}")
            if ours.cpu > SMALL_CPU:
                missed.append(f"{item.project}: {ours.cpu:.2f} s CPU")
    print("\n" + ("goals missed: " + "; ".join(missed) if missed else "every goal met"))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
