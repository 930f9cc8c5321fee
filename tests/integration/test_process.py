"""`release.process`, the one way the toolkit starts a process, with real processes: deadlines stop
the whole group (a child that ignores SIGTERM too), output is capped, SIGTERM to the toolkit
reaches the child's group. Each test takes about a second."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from release import interrupts, process

ROOT = Path(__file__).resolve().parents[2]


def _gone(pid: int) -> bool:
    """True once `pid` is no process (a zombie whose parent is init counts: it is being reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"


def _wait_gone(pid: int, within: float = 5.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return False


def test_output_exit_status_and_streams_kept_apart_or_merged() -> None:
    done = process.run(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=10)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    assert done.last_line() == "err"
    merged = process.run(["sh", "-c", "echo out; echo err >&2"], timeout=10, merge=True)
    assert merged.stdout == "out\nerr\n" and merged.stderr == ""
    lines: list[str] = []
    process.run(["printf", "a\\nb\\nlast"], timeout=10, lines=lines.append)
    assert lines == ["a", "b", "last"]


def test_a_command_that_cannot_start_raises_oserror() -> None:
    with pytest.raises(FileNotFoundError):
        process.run(["/nonexistent/tool"], timeout=10)


def test_the_deadline_stops_the_whole_group_and_says_so(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild"
    started = time.monotonic()
    with pytest.raises(process.TimedOut) as raised:
        process.run(["sh", "-c", f"sleep 30 & echo $! > {pidfile}; echo partial; wait"], timeout=0.5)
    assert time.monotonic() - started < 4
    assert raised.value.output == "partial\n"
    assert "gave no result within 0.5 s: stopped" in str(raised.value)
    assert isinstance(raised.value, subprocess.TimeoutExpired)  # callers' `except TimeoutExpired` hold
    assert _wait_gone(int(pidfile.read_text()))
    assert process.run_bounded(["sh", "-c", "echo hi; sleep 30"], timeout=0.3) == (
        process.TIMED_OUT,
        "hi\n\nno answer within 0.3s: stopped",
    )


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interrupts, "_GRACE_S", 0.5)
    started = time.monotonic()
    with pytest.raises(process.TimedOut):
        process.run(["sh", "-c", "trap '' TERM; echo ready; sleep 30; echo never"], timeout=0.5)
    assert time.monotonic() - started < 4
    with pytest.raises(process.TimedOut):
        process.stream(["sh", "-c", "trap '' TERM; sleep 30"], timeout=0.3)
    assert time.monotonic() - started < 8


def test_output_is_capped_keeping_its_start_and_its_end() -> None:
    done = process.run(["sh", "-c", "yes | head -c 4000000; echo; echo the-end"], timeout=30, cap=10_000)
    assert len(done.stdout) < 11_000
    assert done.stdout.startswith("y\ny\n") and done.stdout.endswith("y\n\nthe-end\n")
    assert "bytes left out" in done.stdout


def test_a_leader_gone_while_a_runaway_holds_the_pipe_does_not_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A grandchild that left the group keeps stdout open: the call returns after the grace."""
    monkeypatch.setattr(process, "_GRACE_S", 0.5)
    pidfile = tmp_path / "runaway"
    started = time.monotonic()
    done = process.run(
        ["sh", "-c", f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 30' & echo leader-done"], timeout=60
    )
    assert done.stdout == "leader-done\n" and done.returncode == 0
    assert time.monotonic() - started < 4
    os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_stream_writes_to_a_file_and_beats(tmp_path: Path) -> None:
    log = tmp_path / "log"
    beats: list[float] = []
    with log.open("w") as out:
        done = process.stream(
            ["sh", "-c", "echo one; sleep 1; echo two >&2"], timeout=30, to=out, every=0.2,
            tick=lambda: beats.append(time.monotonic()),
        )  # fmt: skip
    assert done.returncode == 0 and log.read_text() == "one\ntwo\n"
    assert len(beats) >= 2


def test_started_processes_lead_their_own_group_with_stdin_closed(tmp_path: Path) -> None:
    script = "import os, sys; print(os.getpgid(0) == os.getpid(), repr(sys.stdin.read()))"
    with (tmp_path / "out").open("w") as out:
        proc = process.start([sys.executable, "-c", script], stdout=out)
    assert proc.wait(timeout=10) == 0
    assert (tmp_path / "out").read_text() == "True ''\n"


CHILD = """
import sys
from release import interrupts, process
with interrupts.handled():
    try:
        process.run(["sh", "-c", "sleep 30 & echo $! > " + sys.argv[1] + "; wait"], timeout=60)
    except interrupts.Interrupted as exc:
        print("interrupted", exc.signum, flush=True)
        sys.exit(128 + exc.signum)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_toolkit_reaches_the_child_group(tmp_path: Path, signum: int) -> None:
    pidfile = tmp_path / "grandchild"
    toolkit = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(pidfile)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        end = time.monotonic() + 20
        while not (pidfile.exists() and pidfile.read_text().strip()):
            assert time.monotonic() < end, "the child never started"
            time.sleep(0.05)
        grandchild = int(pidfile.read_text())
        assert not _gone(grandchild)
        toolkit.send_signal(signum)
        out, _ = toolkit.communicate(timeout=15)
    finally:
        toolkit.kill()
    assert toolkit.returncode == 128 + signum and out == f"interrupted {signum}\n"
    assert _wait_gone(grandchild)
