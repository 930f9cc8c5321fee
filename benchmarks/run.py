"""`nox -s bench`: every benchmark, each printing ratios measured within one run.

Usage: python benchmarks/run.py [--only startup|build|binding|verify|symbol-copies ...] [--quick]
(`nox -s bench -- --only build --quick` passes the arguments through.)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# name: (script, takes --quick)
BENCHMARKS = {
    "startup": ("startup_bench.py", False),  # the CLI's start-up: every command pays it
    "build": ("build_bench.py", True),
    "binding": ("binding_bench.py", True),
    "verify": ("verify_bench.py", False),
    "symbol-copies": ("symbol_copies.py", False),  # what verify's speed rests on: abi3audit's results kept
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", action="append", choices=list(BENCHMARKS), help="run only these (repeatable)"
    )
    parser.add_argument("--quick", action="store_true", help="smaller inputs where a benchmark has them")
    args = parser.parse_args()
    failed = []
    for name in args.only or list(BENCHMARKS):
        script, has_quick = BENCHMARKS[name]
        print(f"== {script}", flush=True)
        cmd = [sys.executable, str(HERE / script), *(["--quick"] if args.quick and has_quick else [])]
        if subprocess.run(cmd, check=False).returncode != 0:
            failed.append(script)
    print(
        f"\nbenchmarks below their goal: {', '.join(failed)}"
        if failed
        else "\nall benchmarks met their goals"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
