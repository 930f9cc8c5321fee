"""The CLI's start-up: CPU seconds before a command does its work (issue 60).

CI starts thousands of `release` processes, and on the small corpus wheels verify's start-up was two
thirds of the work. Measured here, each the fastest of `--runs` children after one that writes the
bytecode (as `.ci/run` keeps it):
* `python -c pass`: the interpreter alone, the figure the others are divided by;
* `release --help` and `release verify --help`: the parser, with only the chosen command's module;
* `release verify --json` of a wheel of three small files (no ELF): a figure, not a goal: start-up,
  then the backends and manylinux policies loaded and digested and a report printed, with almost
  nothing to read.
Goal: at most 0.12 s of CPU for `--help` and `verify --help` (the interpreter's own share included).

Usage: python benchmarks/startup_bench.py [--runs N]   (exit 1 when a goal is missed)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from verify_bench import child, startup  # noqa: E402

GOAL_S = 0.12
GOALS = ("release --help", "release verify --help")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="startup-bench-"))
    # As .ci/run: Python keeps what it compiles, in a tree of its own (not beside the sources).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ.setdefault("PYTHONPYCACHEPREFIX", str(scratch / "pycache"))
    release = [sys.executable, "-m", "release"]
    cwd = Path.cwd()
    os.chdir(scratch)  # no matrix.yaml here: verify of a foreign wheel loads none
    try:
        measured = {
            "python -c pass": lambda: child([sys.executable, "-c", "pass"]),
            "release --help": lambda: child([*release, "--help"]),
            "release verify --help": lambda: child([*release, "verify", "--help"]),
            "release verify --json WHEEL (3 small files)": lambda: startup(scratch),
        }
        cpu = {}
        for name, run in measured.items():
            first = run()  # writes the bytecode a later run reads
            if first.code not in (0, 6):  # 6: the wheel of three files fails rules, as it should
                print(f"{name}: exit {first.code}")
                return 1
            cpu[name] = min(run().cpu for _ in range(max(1, args.runs)))
    finally:
        os.chdir(cwd)
        shutil.rmtree(scratch, ignore_errors=True)
    bare = max(cpu["python -c pass"], 1e-3)
    print(f"{'command':<46} {'CPU s':>6} {'x bare python':>14}  (goal <= {GOAL_S} s CPU)")
    missed = []
    for name, seconds in cpu.items():
        goal = name in GOALS
        mark = ("  ok" if seconds <= GOAL_S else "  over the goal") if goal else "  (a figure)"
        mark = "" if name == "python -c pass" else mark
        print(f"{name:<46} {seconds:6.3f} {seconds / bare:13.1f}x{mark}")
        if goal and seconds > GOAL_S:
            missed.append(name)
    print("\n" + ("goals missed: " + "; ".join(missed) if missed else "every goal met"))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
