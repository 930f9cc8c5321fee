"""SIGTERM is handled like SIGINT: long-running children (cmake and the ninja and compilers under
it, cibuildwheel) stop with us, and the stack unwinds so temporary folders are removed.

Such a child (every one `release.process` starts) runs in its own process group and is registered
with `tracked`; on SIGINT or SIGTERM every registered group is sent SIGTERM and the main thread raises
`Interrupted` (a KeyboardInterrupt), which `release.cli.main` turns into one line and 128 + the
signal's number.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

_GRACE_S = 5.0
"""How long a stopped process group has to exit before it is killed."""

_lock = threading.Lock()
_groups: set[int] = set()
_received: list[int] = []


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; `signum` says which."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


@contextlib.contextmanager
def tracked(proc: subprocess.Popen[Any]) -> Iterator[None]:
    """While the block runs, an interrupt stops `proc`'s process group (`proc` must lead it:
    started with `start_new_session=True`). Leaving the block with an exception stops the group
    too, so no grandchild outlives a failed or interrupted step."""
    with _lock:
        _groups.add(proc.pid)
        late = bool(_received)
    try:
        if late:  # the signal came while the child was starting: it was not told
            check()
        yield
    except BaseException:
        stop_group(proc)
        raise
    finally:
        with _lock:
            _groups.discard(proc.pid)


def stop_group(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM to `proc`'s process group, SIGKILL after a grace period, then reap `proc`."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=_GRACE_S)
    except subprocess.TimeoutExpired:
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
    # Grandchildren that ignored SIGTERM while their leader exited.
    _signal_group(proc.pid, signal.SIGKILL)


def check() -> None:
    """Raise `Interrupted` once a signal has arrived: worker threads call this before they start
    another child, so nothing new begins while the main thread unwinds."""
    if _received:
        raise Interrupted(_received[0])


def _handle(signum: int, _frame: FrameType | None) -> None:
    with _lock:
        _received.append(signum)
        groups = list(_groups)
    for pgid in groups:
        _signal_group(pgid, signal.SIGTERM)
    raise Interrupted(signum)


Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` in the main thread while the block runs (elsewhere,
    e.g. in a worker thread, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Handler] = {
        signum: signal.signal(signum, _handle) for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        _received.clear()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
