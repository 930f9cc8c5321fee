"""One build of a variant at a time: `build/<variant>/.lock`, held with `flock` for the whole
build (host or container), so two builds never share a work directory or a wheelhouse.

A second build waits, saying which process holds the lock, with a progress line now and then,
and gives up at a deadline. The kernel releases the lock when its holder exits, however it exits.
The lock file is never followed through a link, nor shared with another file by a hard link:
writing the holder's pid into it must never touch anything else.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from release.errors import BuildError, ReleaseError

LOCK_NAME = ".lock"
DEFAULT_WAIT_S = 1800.0
"""How long a second build waits for the first (a full variant build takes minutes)."""
_POLL_S = 0.2
_PROGRESS_S = 15.0


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"pid {text}" if text.isdigit() else "another process"


_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def _open_lock(path: Path, error: type[ReleaseError]) -> int:
    """The lock file's descriptor: never through a link, only a regular file of one name (a
    hard link would make the pid written into it land in another file); `error` otherwise."""
    fix = "remove it; the lock file is made anew"
    try:
        fd = os.open(path, _FLAGS, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            msg = f"{path} is a symbolic link: a lock file is never followed ({fix})"
        else:
            msg = f"{path}: cannot open the lock file ({exc.strerror}); {fix}"
        raise error(msg) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        what = "not a regular file" if not stat.S_ISREG(info.st_mode) else f"a file of {info.st_nlink} names"
        msg = f"{path} is {what}: a lock file is never shared with another file ({fix})"
        raise error(msg)
    return fd


@contextlib.contextmanager
def build_lock(
    directory: Path,
    *,
    what: str,
    wait_s: float = DEFAULT_WAIT_S,
    say: Callable[[str], None] = print,
    name: str = LOCK_NAME,
    error: type[ReleaseError] = BuildError,
) -> Iterator[None]:
    """Hold `directory/name` while the block runs; wait up to `wait_s` for another holder, then
    raise `error` naming it (publish takes the same kind of lock with its own name and error)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    fd = _open_lock(path, error)
    try:
        started = time.monotonic()
        announced = 0.0
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.monotonic() - started
                holder = _holder(fd)
                if waited >= wait_s:
                    msg = f"{what} is locked by {holder} ({path}); gave up after {waited:.0f} s"
                    raise error(msg) from None
                if announced == 0.0 or waited - announced >= _PROGRESS_S:
                    say(f"{what} is locked by {holder} ({path}): waiting ({waited:.0f} s of {wait_s:.0f} s)")
                    announced = max(waited, 1e-9)
                time.sleep(_POLL_S)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
