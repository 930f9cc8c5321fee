"""The stable-abi rule's copies against the libraries themselves, on the corpus wheels.

verify gives abi3audit a sparse copy of each shared object (its headers and symbol tables, written
from the one pass: `release.inspect.symboltables`) and skips one whose symbol names hold no `Py`.
This check runs abi3audit on every shared object of every corpus wheel twice, on the whole file
and on verify's copy, and requires the same result (symbols outside the limited API, symbols newer
than the floor, the computed version); a skipped one must have no finding on the whole file.

Usage: python benchmarks/symbol_copies.py [--only PROJECT ...]   (exit 1 on any difference)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from release.inspect import reader  # noqa: E402
from tests.corpus.fetch import cache_dir, download, load_manifest  # noqa: E402


def _audit(scratch: Path, files: list[Path]) -> dict[str, Any]:
    if not files:
        return {}
    out = scratch / "report.json"
    out.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "abi3audit", "--report", "--output", str(out), "--strict"]
    subprocess.run(
        [*argv, "--assume-minimum-abi3", "3.9", *map(str, files)], capture_output=True, check=False
    )
    specs: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))["specs"]
    return {path: spec["object"]["result"] for path, spec in specs.items()}


def _same(result: dict[str, Any]) -> dict[str, Any]:
    return {**result, "non_abi3_symbols": sorted(result["non_abi3_symbols"])}


def _check(wheel: Path) -> tuple[int, int, int]:
    """(audited, skipped, wrong) for one wheel."""
    read_all = reader._read_all
    reader._read_all = lambda *a, **k: read_all(*a, **{**k, "symbols": True})
    try:
        contents = reader.read_wheel(wheel, ())
    finally:
        reader._read_all = read_all
    shared = [e.path for e in contents.elf_files if not e.executable]
    wrong = 0
    with tempfile.TemporaryDirectory() as name, zipfile.ZipFile(wheel) as archive:
        scratch = Path(name)
        copied: list[tuple[str, Path, Path]] = []
        skipped: list[tuple[str, Path]] = []
        for index, path in enumerate(shared):
            whole, copy = scratch / f"w{index}.abi3.so", scratch / f"c{index}.abi3.so"
            whole.write_bytes(archive.read(path))
            if contents.symbol_copy(path, copy):
                copied.append((path, whole, copy))
            else:
                skipped.append((path, whole))
        of_wholes = _audit(scratch, [w for _, w, _ in copied] + [w for _, w in skipped])
        of_copies = _audit(scratch, [c for _, _, c in copied])
        for path, whole, copy in copied:
            if _same(of_wholes[str(whole)]) != _same(of_copies[str(copy)]):
                wrong += 1
                print(
                    f"  {path}: the copy's result differs: {of_copies[str(copy)]} != {of_wholes[str(whole)]}"
                )
        for path, whole in skipped:
            result = of_wholes[str(whole)]
            if result["non_abi3_symbols"] or result["future_abi3_objects"]:
                wrong += 1
                print(f"  {path}: skipped, but the whole file has findings: {result}")
    return len(copied), len(skipped), wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=())
    args = parser.parse_args()
    cache = cache_dir()
    totals = [0, 0, 0]
    print(f"{'wheel':<34} {'audited':>8} {'skipped':>8} {'wrong':>6}")
    for item in load_manifest():
        if args.only and item.project not in args.only:
            continue
        counts = _check(download(item, cache, quiet=True))
        totals = [t + c for t, c in zip(totals, counts, strict=True)]
        print(f"{item.project:<34} {counts[0]:8d} {counts[1]:8d} {counts[2]:6d}", flush=True)
    print(f"{'all':<34} {totals[0]:8d} {totals[1]:8d} {totals[2]:6d}")
    return 1 if totals[2] else 0


if __name__ == "__main__":
    raise SystemExit(main())
