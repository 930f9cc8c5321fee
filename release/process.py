"""Every process the toolkit starts is started here: in its own process group, with stdin closed,
a deadline, a cap on the output kept, and SIGINT/SIGTERM forwarded to the whole group.

- `run`: a command whose output is read (a query, a probe, a repair): stdout and stderr kept apart
  (or merged), each capped at `OUTPUT_CAP` bytes (the middle is left out, never the end).
- `stream`: a long command whose output goes to a file or to our own terminal (a compile,
  cibuildwheel, an installer), with an optional heartbeat while it runs.
- `start`: a process that outlives the call (a local service, a detached leg); its owner ends it.

A command past its deadline has its group stopped (TERM, then KILL after a grace period) and
reaped; `TimedOut` is then raised, one line naming the command (a `ReleaseError`, and a
`subprocess.TimeoutExpired` for callers that turn a timeout into their own message). A command that
cannot start raises OSError, as `subprocess` does. `tests/unit/test_processes.py` fails when a
module of `release/` starts a process any other way.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from release import interrupts
from release.errors import ReleaseError

QUERY_S = 120.0
"""A question with a quick answer: a tool's `--version`, a git or package-database query."""
CHANGE_S = 600.0
"""A quick change on this machine: patchelf on one file, a hard-linked copy, a user added."""
REPAIR_S = 1800.0
"""auditwheel repair of one wheel (it reads and rewrites every library in it)."""
INSTALL_S = 3600.0
"""Making a root file system (debootstrap), installing a tool or a toolchain."""
STEP_S = 3 * 3600.0
"""One rehearsed workflow step (it may build every wheel of a variant)."""
BUILD_S = 6 * 3600.0
"""A compile: an engine's cmake and ninja, cibuildwheel for a variant's Pythons (generous: a cold
ROCm build on 2 cores takes over an hour)."""

OUTPUT_CAP = 16 * 1024 * 1024
"""The bytes of each output stream `run` keeps: the first half and the last half beyond it."""
TIMED_OUT = 124
"""The exit status `run_bounded` gives a command stopped at its deadline (as timeout(1) does)."""
STDOUT = subprocess.STDOUT
"""For `start`'s stderr: into the same file as stdout."""

_GRACE_S = 5.0
"""How long pipes may stay open after the group's leader exited (or was stopped)."""
_POLL_S = 0.5


@dataclass(frozen=True)
class Result:
    """What a finished command did (the fields `subprocess.CompletedProcess` has)."""

    args: tuple[str, ...]
    returncode: int
    stdout: str = ""
    stderr: str = ""

    @property
    def output(self) -> str:
        """stdout, then stderr."""
        return self.stdout + self.stderr

    def last_line(self) -> str:
        """The last non-empty line of stderr, else of stdout, else `exit N`."""
        lines = self.stderr.strip().splitlines() or self.stdout.strip().splitlines()
        return lines[-1].strip() if lines else f"exit {self.returncode}"


class TimedOut(ReleaseError, subprocess.TimeoutExpired):
    """A command outlived its deadline: its process group was stopped and reaped."""

    def __init__(self, cmd: Sequence[str], timeout: float, output: str = "", stderr: str = "") -> None:
        subprocess.TimeoutExpired.__init__(self, list(cmd), timeout, output, stderr)

    def __str__(self) -> str:
        words = [str(w) for w in self.cmd]
        shown = " ".join(words[:4]) + (" …" if len(words) > 4 else "")
        return f"`{shown}` gave no result within {self.timeout:g} s: stopped (a hung tool or engine?)"


class _Capped:
    """The bytes of one stream: all of them up to `cap`, else the first and last `cap // 2`."""

    def __init__(self, cap: int) -> None:
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > 2 * self.half:  # trimmed now and then, not at every chunk
            self._trim()

    def _trim(self) -> None:
        cut = len(self.tail) - self.half
        if cut > 0:
            self.dropped += cut
            del self.tail[:cut]

    def flush(self) -> None:
        """Nothing more comes."""

    def text(self) -> str:
        self._trim()
        said = b"" if not self.dropped else f"\n[… {self.dropped} bytes left out …]\n".encode()
        raw = bytes(self.head) + said + bytes(self.tail)
        return raw.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


class _Lines(_Capped):
    """`_Capped`, each complete line also given to `say` (decoded, its end stripped) as it comes."""

    def __init__(self, cap: int, say: Callable[[str], None]) -> None:
        super().__init__(cap)
        self.say = say
        self.pending = bytearray()

    def add(self, chunk: bytes) -> None:
        super().add(chunk)
        self.pending += chunk
        *complete, rest = self.pending.split(b"\n")
        self.pending = bytearray(rest)
        for line in complete:
            self.say(line.decode("utf-8", errors="replace").rstrip())

    def flush(self) -> None:
        if self.pending:
            self.say(self.pending.decode("utf-8", errors="replace").rstrip())
            self.pending = bytearray()


def _stop(proc: subprocess.Popen[bytes], session: bool) -> None:
    """Stop `proc`: its whole group when it leads one, else itself (TERM, then KILL)."""
    if session:
        interrupts.stop_group(proc)
        return
    proc.terminate()
    try:
        proc.wait(timeout=_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def _watched(proc: subprocess.Popen[bytes], session: bool) -> Iterator[None]:
    """SIGINT or SIGTERM, or an exception, while the block runs stops `proc` (`interrupts.tracked`
    where it leads its own group)."""
    if session:
        with interrupts.tracked(proc):
            yield
        return
    try:
        yield
    except BaseException:
        _stop(proc, session)
        raise


def _env(env: Mapping[str, str] | None) -> dict[str, str] | None:
    return dict(env) if env is not None else None


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    merge: bool = False,
    cap: int = OUTPUT_CAP,
    lines: Callable[[str], None] | None = None,
    session: bool = True,
) -> Result:
    """Run `argv` to its end and keep its output (stderr into stdout with `merge`), at most `cap`
    bytes of each stream; with `lines`, each line of stdout is also passed to it as it comes. With
    `session=False` it stays in our session (sudo may ask for a password on our terminal) and is
    stopped alone. Past `timeout` seconds its group is stopped and `TimedOut` raised; on
    SIGINT or SIGTERM the group is stopped and `interrupts.Interrupted` propagates."""
    args = [str(word) for word in argv]
    interrupts.check()
    proc = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge else subprocess.PIPE,
        env=_env(env), cwd=cwd, start_new_session=session,
    )  # fmt: skip
    streams = {
        pipe: _Lines(cap, lines) if lines is not None and pipe is proc.stdout else _Capped(cap)
        for pipe in (proc.stdout, proc.stderr)
        if pipe is not None
    }
    try:
        with _watched(proc, session):
            timed_out = _collect(proc, streams, time.monotonic() + timeout, session)
    finally:
        for pipe, capped in streams.items():
            pipe.close()
            capped.flush()
    texts = [capped.text() for capped in streams.values()]
    out, err = texts[0], "".join(texts[1:])
    if timed_out:
        raise TimedOut(args, timeout, out, err)
    return Result(tuple(args), proc.returncode, out, err)


def _collect(
    proc: subprocess.Popen[bytes], streams: dict[IO[bytes], _Capped], deadline: float, session: bool
) -> bool:
    """Read the pipes until they close; True when the deadline came first (the group then stopped).
    Pipes still held open by a process that left the group are read for `_GRACE_S` more only."""
    timed_out = False
    end = deadline
    with selectors.DefaultSelector() as selector:
        for pipe, capped in streams.items():
            selector.register(pipe, selectors.EVENT_READ, capped)
        while selector.get_map():
            now = time.monotonic()
            if now >= end:
                if timed_out or proc.poll() is not None:
                    break
                timed_out = True
                _stop(proc, session)
                end = time.monotonic() + _GRACE_S
                continue
            if not timed_out and end > now + _GRACE_S and proc.poll() is not None:
                end = now + _GRACE_S
            for key, _ in selector.select(min(end - now, _POLL_S)):
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    key.data.add(chunk)
                else:
                    selector.unregister(key.fileobj)
    if not timed_out:
        try:  # the pipes closed; the leader may still run
            proc.wait(timeout=max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            _stop(proc, session)
            timed_out = True
    return timed_out


def stream(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    to: IO[Any] | None = None,
    every: float = 0,
    tick: Callable[[], None] | None = None,
    session: bool = True,
) -> Result:
    """Run `argv` to its end, its stdout and stderr written to the open file `to` (else to ours, as
    they come); `tick()` every `every` seconds while it runs. The `Result` holds no output. Past
    `timeout` seconds its group is stopped and `TimedOut` raised; on SIGINT or SIGTERM the group
    is stopped and `interrupts.Interrupted` propagates. `session=False` as for `run`."""
    args = [str(word) for word in argv]
    interrupts.check()
    proc = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=to, stderr=subprocess.STDOUT if to is not None else None,
        env=_env(env), cwd=cwd, start_new_session=session,
    )  # fmt: skip
    deadline = time.monotonic() + timeout
    with _watched(proc, session):
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimedOut(args, timeout)  # `_watched` stops it on the way out
            try:
                proc.wait(timeout=min(left, every) if every > 0 and tick is not None else left)
                break
            except subprocess.TimeoutExpired:
                if tick is not None and time.monotonic() < deadline:
                    tick()
    return Result(tuple(args), proc.returncode)


def start(
    argv: Sequence[str],
    *,
    stdout: IO[Any] | None,
    stderr: IO[Any] | int | None = STDOUT,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
) -> subprocess.Popen[bytes]:
    """`argv` started to outlive this call (a local service, a detached leg), in its own process
    group, stdin closed. It has no deadline here: its owner waits for it under its own deadline and
    ends it with `interrupts.stop_group`."""
    interrupts.check()
    return subprocess.Popen(
        [str(word) for word in argv], stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
        env=_env(env), cwd=cwd, start_new_session=True,
    )  # fmt: skip


def run_bounded(cmd: list[str], *, timeout: float, env: dict[str, str] | None = None) -> tuple[int, str]:
    """(exit status, stdout and stderr together) of `cmd`; `TIMED_OUT` with a last line saying so
    when it was stopped at its deadline. Raises OSError when `cmd` cannot start."""
    try:
        done = run(cmd, timeout=timeout, env=env, merge=True)
    except TimedOut as exc:
        return TIMED_OUT, str(exc.output or "") + f"\nno answer within {timeout:g}s: stopped"
    return done.returncode, done.stdout


def run_bounded_apart(
    cmd: list[str], *, timeout: float, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """`run_bounded` with stdout and stderr kept apart: (exit status, stdout, stderr)."""
    try:
        done = run(cmd, timeout=timeout, env=env)
    except TimedOut as exc:
        said = f"\nno answer within {timeout:g}s: stopped"
        return TIMED_OUT, str(exc.output or ""), str(exc.stderr or "") + said
    return done.returncode, done.stdout, done.stderr
