"""Run `release verify` on every hostile case, each in a child with a memory limit and a timeout,
and write the outcome table (tests/hostile/BASELINE.md is this script's output).

    python3 -m tests.hostile.run_today [--out FILE] [--jobs N] [--timeout S] [--memory BYTES] [ID ...]

Each child runs `python3 -m release --matrix M verify [--write-reports] WHEEL` from the repository
root under RLIMIT_AS (default 2 GiB) in its own session; past the timeout (default 60 s) the whole
session is killed. Peak RSS comes from wait4's rusage of that child. M is the repository's
matrix.yaml for cases flagged `matrix`, otherwise a path that does not exist (verify then runs as it
does on any wheel that is not one of ours).

Outcome classes: `ok` (exit 0, a report), `rule:<ids>` (exit non-zero, the rules that failed),
`clean error` (one `error:` line, no traceback), `traceback <Type>`, `MemoryError` (a traceback
ending in MemoryError: what RLIMIT_AS turns an out-of-memory into), `killed <signal>`, `hang`.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.hostile.cases import CASES, SENTINEL, Case, generate

ROOT = Path(__file__).resolve().parents[2]
MEMORY = 2 << 30
TIMEOUT = 60.0
SLOW = 10.0
HEAVY_MB = 500


@dataclass
class Outcome:
    case: Case
    size: int
    outcome: str
    detail: str
    rss_mb: float
    seconds: float
    matches: bool


def _limit(memory: int) -> None:
    os.setsid()
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


def run_case(item: Case, directory: Path, *, timeout: float, memory: int) -> Outcome:
    wheel = generate(item, directory)
    matrix = ROOT / "matrix.yaml" if "matrix" in item.flags else Path("/nonexistent/matrix.yaml")
    command = [sys.executable, "-m", "release", "--matrix", str(matrix), "verify"]
    if "report-symlink" in item.flags:
        command.append("--write-reports")
    command.append(str(wheel))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                preexec_fn=lambda: _limit(memory))  # noqa: PLW1509
        timed_out = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - started > timeout:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        seconds = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait again
        out.seek(0)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    rss_mb = usage.ru_maxrss / 1024
    lines = [x for x in stderr.strip().splitlines() if x.strip()]
    last = lines[-1] if lines else ""
    code = proc.returncode
    if timed_out:
        outcome, detail = "hang", f"killed after {timeout:.0f} s"
    elif code < 0:
        outcome, detail = f"killed {signal.Signals(-code).name}", last
    elif "Traceback (most recent call last)" in stderr:
        kind = last.split(":", 1)[0].strip()
        outcome = "MemoryError" if kind == "MemoryError" else f"traceback {kind}"
        detail = last
    elif code == 0:
        outcome, detail = "ok", ""
    elif "failed verification:" in last:
        rules = last.rsplit(".whl: ", 1)[-1]
        outcome, detail = f"rule:{rules.replace(' ', '')}", last
    else:
        outcome, detail = "clean error", last
    if "report-symlink" in item.flags:
        sentinel = directory / f"{item.id}.outside" / "sentinel.json"
        if sentinel.read_text() != SENTINEL:
            detail = ("SENTINEL OVERWRITTEN through the symlink; " + detail).strip("; ")
            outcome += " (followed symlink)"
    if item.expected == "error":
        matches = outcome == "clean error"
    elif item.expected == "ok":
        matches = outcome == "ok"
    else:
        failed = set(outcome.removeprefix("rule:").split(",")) if outcome.startswith("rule:") else set()
        matches = set(item.expected_rules) <= failed
    return Outcome(item, wheel.stat().st_size, outcome, detail, rss_mb, seconds, matches)


def _cell(text: str, limit: int = 160) -> str:
    text = re.sub(r"\s+", " ", text).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _verdict(r: Outcome) -> str:
    """yes / no; a matching outcome reached slowly (> 10 s) or with > 500 MB peak RSS is flagged."""
    if not r.matches:
        return "**no**"
    costs = [f"{r.seconds:.0f} s"] if r.seconds > SLOW else []
    costs += [f"{r.rss_mb:.0f} MB"] if r.rss_mb > HEAVY_MB else []
    return f"yes, but {' and '.join(costs)}" if costs else "yes"


def render(results: Sequence[Outcome], *, timeout: float, memory: int) -> str:
    counts: dict[str, int] = {}
    for r in results:
        key = "rule failure" if r.outcome.startswith("rule:") else r.outcome.split(" (")[0]
        counts[key] = counts.get(key, 0) + 1
    lines = [
        "# Hostile corpus: today's `release verify`",
        "",
        "Generated by `python3 -m tests.hostile.run_today` (the cases: `tests/hostile/cases.py`).",
        f"Each case ran alone as `python3 -m release --matrix M verify WHEEL` from the repository root, "
        f"under RLIMIT_AS={memory >> 20} MiB and a {timeout:.0f} s timeout; peak RSS is the child's "
        "ru_maxrss. M is the repository's matrix.yaml for cases marked (matrix), otherwise no matrix.",
        "`matches` says whether today's outcome is the expected one (`yes, but …` when it took over "
        f"{SLOW:.0f} s or {HEAVY_MB} MB to get there).",
        "",
        f"{len(results)} cases; today: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + "; "
        f"{sum(r.matches for r in results)} match their expected outcome.",
        "",
        "| case | wheel bytes | expected | today | matches | peak RSS MB | seconds | what it printed last |",
        "|---|---:|---|---|---|---:|---:|---|",
    ]
    for r in results:
        flags = f" ({', '.join(sorted(r.case.flags))})" if r.case.flags else ""
        lines.append(
            f"| `{r.case.id}`{flags} | {r.size:,} | {r.case.expected} | {r.outcome} | "
            f"{_verdict(r)} | {r.rss_mb:.0f} | {r.seconds:.1f} | {_cell(r.detail)} |"
        )
    lines += ["", "Cases:", ""]
    lines += [f"- `{c.id}`: {c.description}" for c in (r.case for r in results)]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*")
    parser.add_argument("--out", type=Path, help="write the Markdown table here")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=TIMEOUT)
    parser.add_argument("--memory", type=int, default=MEMORY)
    parser.add_argument("--dir", type=Path, help="where to write the wheels (default: a temporary directory)")
    args = parser.parse_args(argv)
    selected = [c for c in CASES if not args.ids or c.id in args.ids]
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        directory = args.dir or Path(tmp)

        def one(item: Case) -> Outcome:
            result = run_case(item, directory, timeout=args.timeout, memory=args.memory)
            print(f"{item.id:<36} {result.outcome:<28} {result.rss_mb:7.0f} MB {result.seconds:6.1f} s "
                  f"{'ok' if result.matches else 'MISMATCH'}", flush=True)
            return result

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(one, selected))
    text = render(results, timeout=args.timeout, memory=args.memory)
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
