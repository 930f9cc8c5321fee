"""The hostile corpus tier: every generated hostile wheel (tests/hostile/cases.py) verified in a
child process under an address-space and a CPU limit.

Each must end as its case says: one clean `error:` line (no traceback), a report in which the
expected rules fail, or a passing report; within the limits; and with nothing written but the
report (`--write-reports` runs for every case; a symlink planted at the report path must not be
followed). The children run two at a time; the peak RSS and CPU seconds of each are printed.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.hostile.cases import CASES, SENTINEL, Case, generate

ROOT = Path(__file__).resolve().parents[2]
ADDRESS_SPACE = 768 << 20
"""RLIMIT_AS of each child: the interpreter, its worker threads' stacks and what verify holds."""
CPU_SECONDS = 10
"""RLIMIT_CPU of each child (it is killed past this)."""
CPU_SMALL = 2.0
"""CPU seconds a wheel under 10 MB may take, interpreter start included (the benchmark goal is 1 s;
past RLIMIT_CPU the child is killed whatever its size)."""
RSS_GOAL_MB = 256
WALL = 60.0


@dataclass(frozen=True)
class Run:
    case: Case
    code: int
    stderr: str
    size: int
    rss_mb: float
    cpu: float
    seconds: float
    before: frozenset[str]
    after: frozenset[str]
    sentinel: str | None


def _limits() -> None:
    os.setsid()
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS + 1))


def _listing(directory: Path) -> frozenset[str]:
    return frozenset(str(p.relative_to(directory)) for p in directory.rglob("*"))


def _run(item: Case, directory: Path) -> Run:
    wheel = generate(item, directory)
    before = _listing(directory)
    command = [sys.executable, "-m", "release"]
    if "matrix" in item.flags:
        command += ["--matrix", str(ROOT / "matrix.yaml")]
    command += ["verify", "--write-reports", str(wheel)]
    work = directory / f"{item.id}.cwd"
    work.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    with (work / "stderr").open("w+b") as err:
        proc = subprocess.Popen(
            command, cwd=work, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, env=env,
            preexec_fn=_limits,  # noqa: PLW1509 (the limits must be set in the child)
        )
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - started > WALL:
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    (work / "stderr").unlink()
    work.rmdir()
    sentinel = directory / f"{item.id}.outside" / "sentinel.json"
    return Run(
        case=item,
        code=proc.returncode,
        stderr=stderr,
        size=wheel.stat().st_size,
        rss_mb=usage.ru_maxrss / 1024,
        cpu=usage.ru_utime + usage.ru_stime,
        seconds=time.monotonic() - started,
        before=before,
        after=_listing(directory),
        sentinel=sentinel.read_text() if sentinel.is_file() else None,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    directory = tmp_path_factory.mktemp("hostile")
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda c: _run(c, directory / c.id.replace(".", "_")), CASES))
    print("\ncase                                 exit      bytes  peak RSS MB  CPU s  wall s")
    for r in results:
        print(f"{r.case.id:<36} {r.code:>4} {r.size:>10} {r.rss_mb:12.0f} {r.cpu:6.2f} {r.seconds:7.2f}")
    yield {r.case.id: r for r in results}


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize("item", CASES, ids=[c.id for c in CASES])
def test_hostile_wheel(item: Case, runs: dict[str, Run]) -> None:
    run = runs[item.id]
    lines = [x for x in run.stderr.splitlines() if x.strip()]
    assert "Traceback" not in run.stderr, run.stderr
    assert run.code >= 0, f"killed by signal {-run.code} (a limit?): {run.stderr}"
    if item.expected == "error":  # a usage error (2) for a file name, else a verification error (6)
        assert run.code in (2, 6), run.stderr
        assert len(lines) == 1 and lines[0].startswith("error: "), run.stderr
        assert "failed verification" not in lines[0], run.stderr
    elif item.expected == "ok":
        assert run.code == 0, run.stderr
    else:
        assert run.code == 6, run.stderr
        failed = set(lines[-1].rsplit(".whl: ", 1)[-1].replace(" ", "").split(","))
        assert set(item.expected_rules) <= failed, run.stderr
    if run.size < 10_000_000:
        assert run.cpu <= CPU_SMALL, f"{run.cpu:.2f} s of CPU"
    assert run.rss_mb <= RSS_GOAL_MB, f"{run.rss_mb:.0f} MB peak RSS"
    written = run.after - run.before
    report = {str(p) for p in written if p.endswith(".verify.json")}
    assert written - report == set(), f"written besides the report: {sorted(written - report)}"
    if "report-symlink" in item.flags:
        assert run.sentinel == SENTINEL, "the report was written through the symlink"
