"""Build scaling: a 4-Python build of one variant divided by a 1-Python build, in one run.

Both builds start from an empty build directory (the core is compiled in each) with ccache off,
after the per-Python builder environments are warm, so the ratio measures compilation alone.
Goal: <= 1.5, because the core is compiled once per variant, not once per Python.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
GOAL = 1.5


def write_matrix(directory: Path, variant: str, venvs: Path, *, prebuild: bool = True) -> Path:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"]["source"] = str(ROOT / data["engine"]["source"])
    data["variants"] = {variant: data["variants"][variant]}
    if not prebuild:
        del data["engine"]["prebuild"]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "matrix.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    (directory / "build").mkdir(exist_ok=True)
    (directory / "build" / "venvs").symlink_to(venvs)
    return path


def timed_build(matrix: Path, variant: str, pythons: list[str]) -> float:
    shutil.rmtree(matrix.parent / "build" / variant, ignore_errors=True)
    shutil.rmtree(matrix.parent / "wheelhouse", ignore_errors=True)
    cmd = [sys.executable, "-m", "release", "--matrix", str(matrix), "build", "--variant", variant]
    for py in pythons:
        cmd += ["--python", py]
    env = {**os.environ, "CCACHE_DISABLE": "1"}
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"build failed:\n{proc.stdout}\n{proc.stderr}")
    return elapsed


def bench_variant(variant: str, pythons: list[str], venvs: Path) -> float:
    with tempfile.TemporaryDirectory(prefix="build-bench-") as tmp:
        matrix = write_matrix(Path(tmp) / "m", variant, venvs)
        flat = write_matrix(Path(tmp) / "flat", variant, venvs, prebuild=False)
        print(f"[{variant}] warming builder environments for {', '.join(pythons)} …", flush=True)
        timed_build(matrix, variant, pythons)
        one = timed_build(matrix, variant, [pythons[-1]])
        four = timed_build(matrix, variant, pythons)
        per_python = timed_build(flat, variant, pythons)
    ratio = four / one
    print(f"[{variant}] 1 Python {one:.1f} s, {len(pythons)} Pythons {four:.1f} s: ratio {ratio:.2f} "
          f"(goal <= {GOAL}) {'OK' if ratio <= GOAL else 'MISSED'}")
    print(f"[{variant}] {len(pythons)} Pythons compiling the core per Python (no prebuild): "
          f"{per_python:.1f} s, {per_python / four:.2f}x the prebuilt-core build", flush=True)
    return ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variant", action="append", help="variant(s) to measure (default: cpu, rocm)")
    args = parser.parse_args()
    pythons = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))["python"]
    venvs = ROOT / "build" / "venvs"
    venvs.mkdir(parents=True, exist_ok=True)
    ratios = {v: bench_variant(v, pythons, venvs) for v in args.variant or ["cpu", "rocm"]}
    return 0 if all(r <= GOAL for r in ratios.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
