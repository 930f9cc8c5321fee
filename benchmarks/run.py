"""`nox -s bench`: every benchmark, each printing ratios measured within one run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = ["build_bench.py", "verify_bench.py"]


def main() -> int:
    failed = []
    for name in BENCHMARKS:
        print(f"== {name}", flush=True)
        if subprocess.run([sys.executable, str(HERE / name)], check=False).returncode != 0:
            failed.append(name)
    print(
        f"\nbenchmarks below their goal: {', '.join(failed)}"
        if failed
        else "\nall benchmarks met their goals"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
