"""`python -m release verify` against its physical floor, on the real-world corpus wheels
(tests/corpus/wheels.toml, downloaded into the cache by tests/corpus/fetch.py).

For each wheel over 100 MB unpacked, in this one run:
* the floor: the CPU seconds one thread takes to inflate every member and sha256 it (what checking
  RECORD needs at least), with the fastest inflater installed (zlib, zlib-ng or isal, each tried);
* `python -m release verify --json WHEEL` in a child process, its CPU seconds (best of `--runs`)
  less its start-up (the CPU of a verify of a wheel of three small files); goal: at most 1.5x the
  floor. An abi3 wheel's verify includes abi3audit (its stable-abi rule), which reads a sparse copy
  of each shared object's headers and symbol tables written from the one pass: held to the goal too;
* a re-verify of the same bytes beside their report (`verify_wheel(reuse=True)` in this process),
  its CPU seconds against one sha256 of the wheel file; goal: at most 1.2x;
* `auditwheel show WHEEL`, its wall time: a figure, not a goal (it hashes nothing);
* verify's peak RSS (goal: at most 256 MB for a 1 GB unpacked wheel).
Then verify's CPU seconds on the corpus wheels under 10 MB, start-up included (goal: at most 0.5 s).
Bytecode is compiled first, as an installed toolkit has it.

Usage: python benchmarks/verify_bench.py [--runs N] [--only PROJECT ...]   (exit 1 when a goal is missed)
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import hashlib
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from release.wheel import inflate  # noqa: E402
from release.wheel.zip import Archive, ZipEntry, read_directory  # noqa: E402
from tests.corpus.fetch import CorpusWheel, cache_dir, download, load_manifest  # noqa: E402

LARGE = 100_000_000
SMALL = 10_000_000
FLOOR_RATIO = 1.5
REUSE_RATIO = 1.2
RSS_MB = 256
SMALL_CPU = 0.5


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


def _inflaters() -> list[Any]:
    """Every inflater installed: zlib, and zlib-ng and isal when they are."""
    found: list[Any] = [zlib]
    for name in ("zlib_ng.zlib_ng", "isal.isal_zlib"):
        with contextlib.suppress(ImportError):
            found.append(importlib.import_module(name))
    return found


def _floor_with(codec: Any, archive: Archive, entries: list[ZipEntry], chunk: int) -> float:
    """CPU seconds one thread takes to inflate (with `codec`, `chunk` bytes of output at a time)
    and sha256 every member."""
    started = time.process_time()
    for entry in entries:
        compressed = memoryview(archive.read(entry.data_offset, entry.compressed_size))
        digest = hashlib.sha256()
        if entry.method == 0:
            digest.update(compressed)
            continue
        inflater = codec.decompressobj(-15)
        at, tail = 0, compressed[:0]
        while not inflater.eof:
            if not tail:
                if at >= len(compressed):
                    break
                tail, at = compressed[at : at + chunk // 4], at + chunk // 4
            digest.update(inflater.decompress(tail, chunk))
            tail = inflater.unconsumed_tail
    return time.process_time() - started


def floor(wheel: Path) -> float:
    """The floor: inflate + sha256 of every member, one thread, the fastest inflater installed and
    the fastest of a few piece sizes (verify's own among them)."""
    with wheel.open("rb") as fh:
        archive = Archive(fh.fileno(), os.fstat(fh.fileno()).st_size)
        entries = [e for e in read_directory(archive) if not e.is_dir]
        chunks = sorted({1 << 20, 4 << 20, inflate.CHUNK})
        return min(_floor_with(codec, archive, entries, c) for codec in _inflaters() for c in chunks)


def reverify(wheel: Path, scratch: Path) -> tuple[float, float]:
    """(CPU seconds of a re-verify of the wheel's bytes beside their report, of one sha256 of the
    wheel file), in this process; the wheel is linked into `scratch`, where its report is written."""
    from release.inspect.verify import verify_wheel, write_report  # noqa: PLC0415
    from release.wheel.files import file_sha256  # noqa: PLC0415

    copy = scratch / wheel.name
    with contextlib.suppress(FileNotFoundError):
        copy.unlink()
    try:
        os.link(wheel, copy)
    except OSError:
        shutil.copyfile(wheel, copy)
    write_report(verify_wheel(copy))
    started = time.process_time()
    file_sha256(copy)
    hashed = time.process_time() - started
    started = time.process_time()
    report = verify_wheel(copy, reuse=True)
    again = time.process_time() - started
    if not report.reused:
        msg = f"{wheel.name}: its report was not reused"
        raise SystemExit(msg)
    return again, hashed


def unpacked_size(wheel: Path) -> int:
    with wheel.open("rb") as fh:
        archive = Archive(fh.fileno(), os.fstat(fh.fileno()).st_size)
        return sum(e.size for e in read_directory(archive))


def startup(scratch: Path) -> Child:
    """What every `release verify` pays whatever the wheel: the interpreter, the imports, the
    policies and backends loaded, a report printed; measured on a wheel of three small files."""
    wheel = scratch / "startup-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("startup-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: startup\nVersion: 0.1\n")
        wheel_text = "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        zf.writestr("startup-0.1.dist-info/WHEEL", wheel_text)
        zf.writestr("startup-0.1.dist-info/RECORD", "")
    return child([sys.executable, "-m", "release", "verify", "--json", str(wheel)])


def _compile_the_audit_tool() -> None:
    """The stable-abi rule's tool and what it imports, compiled as `pip install` leaves them."""
    for tool in ("abi3audit", "abi3info", "elftools", "pefile", "rich", "kaitaistruct", "requests_cache"):
        spec = importlib.util.find_spec(tool)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        if origin.name == "__init__.py":
            compileall.compile_dir(str(origin.parent), quiet=1)
        else:
            compileall.compile_file(str(origin), quiet=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=())
    parser.add_argument("--floor", type=Path, help=argparse.SUPPRESS)  # measured in a child of its own
    args = parser.parse_args()
    if args.floor:
        print(floor(args.floor))
        return 0
    compileall.compile_dir(str(ROOT / "release"), quiet=1)
    _compile_the_audit_tool()
    cache = cache_dir()
    corpus: list[tuple[CorpusWheel, Path]] = []
    for item in load_manifest():
        if not args.only or item.project in args.only:
            corpus.append((item, download(item, cache, quiet=True)))
    verify = [sys.executable, "-m", "release", "verify", "--json"]
    missed: list[str] = []
    names = ", ".join(c.__name__ for c in _inflaters())
    bare = Path(tempfile.mkdtemp(prefix="verify-bench-startup-"))
    start = min((startup(bare) for _ in range(3)), key=lambda c: c.cpu)
    shutil.rmtree(bare)
    print(f"verify inflates with {inflate.INFLATER}; the floor takes the fastest of {names}")
    print(f"{os.cpu_count()} CPUs; verify's start-up {start.cpu:.2f} s CPU (taken off below)")
    print(
        f"{'wheel':<34} {'unpacked MB':>11} {'floor s':>7} {'verify CPU s':>12} {'÷floor':>6} "
        f"{'re-verify s':>11} {'hash s':>6} {'÷hash':>5} {'verify wall s':>13} {'auditwheel s':>12} "
        f"{'RSS MB':>6}"
    )
    with tempfile.TemporaryDirectory(prefix="verify-bench-") as scratch:
        for item, path in corpus:
            size = unpacked_size(path)
            if size < LARGE:
                continue
            ours = min((child([*verify, str(path)]) for _ in range(args.runs)), key=lambda c: c.cpu)
            theirs = child([sys.executable, "-m", "auditwheel", "show", str(path)])
            floor_s = min(
                float(
                    subprocess.run(
                        [sys.executable, __file__, "--floor", str(path)],
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout
                )
                for _ in range(args.runs)
            )
            again, hashed = min(reverify(path, Path(scratch)) for _ in range(args.runs))
            cpu = ours.cpu - start.cpu
            abi3 = "-abi3-" in path.name
            print(
                f"{item.project:<34} {size / 1e6:11.0f} {floor_s:7.2f} {cpu:12.2f} {cpu / floor_s:6.2f} "
                f"{again:11.3f} {hashed:6.3f} {again / hashed:5.2f} {ours.seconds:13.2f} "
                f"{theirs.seconds:12.2f} "
                f"{ours.rss_mb:6.0f}{'  (abi3: abi3audit included)' if abi3 else ''}",
                flush=True,
            )
            if cpu / floor_s > FLOOR_RATIO:
                missed.append(f"{item.project}: verify CPU ÷ floor {cpu / floor_s:.2f} > {FLOOR_RATIO}")
            if again / hashed > REUSE_RATIO:
                missed.append(f"{item.project}: re-verify ÷ one hash {again / hashed:.2f} > {REUSE_RATIO}")
            if ours.rss_mb > RSS_MB * max(1.0, size / 1e9):
                missed.append(f"{item.project}: peak RSS {ours.rss_mb:.0f} MB")
    print("(CPU seconds: wall times are stretched by the machine's other load; auditwheel is a figure)")
    print(f"\n{'wheel under 10 MB':<34} {'CPU s':>6} (goal <= {SMALL_CPU} s, start-up included)")
    for item, path in corpus:
        if path.stat().st_size < SMALL:
            ours = min((child([*verify, str(path)]) for _ in range(args.runs)), key=lambda c: c.cpu)
            print(f"{item.project:<34} {ours.cpu:6.2f}")
            if ours.cpu > SMALL_CPU:
                missed.append(f"{item.project}: {ours.cpu:.2f} s CPU")
    print("\n" + ("goals missed: " + "; ".join(missed) if missed else "every goal met"))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
