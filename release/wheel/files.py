"""File digests and the one way a wheel is opened: only a regular file, never blocking.

A FIFO named like a wheel blocks `open()` forever; a link to `/dev/zero` reads without end.
`open_regular` opens without blocking (`O_NONBLOCK`, no controlling terminal) and checks what it
opened with `fstat`: anything but a regular file is refused at once (`NotRegularFile`, an
OSError) before a byte is read or the path reaches another tool. Every stage that reads a wheel
(hashing, metadata, the checks before twine) goes through it, as verify does.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path

_CHUNK = 1 << 20
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotRegularFile(OSError):
    """The path is not a regular file (a FIFO, a device, a directory): refused before reading."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(errno.EINVAL, f"{kind}, not a regular file", str(path))
        self.kind = kind


def kind_of(mode: int) -> str | None:
    """None for a regular file, else what it is ("a FIFO", "a character device", ...)."""
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


@contextlib.contextmanager
def open_regular(path: Path) -> Iterator[io.FileIO]:
    """`path` opened for reading if, and only if, it is a regular file (links followed, then the
    opened file checked); `NotRegularFile` otherwise, at once, without blocking."""
    fd = os.open(path, _FLAGS)
    kind = kind_of(os.fstat(fd).st_mode)
    if kind is not None:
        os.close(fd)
        raise NotRegularFile(path, kind)
    try:
        os.set_blocking(fd, True)
        fh = io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh


def require_regular(path: Path) -> None:
    """Raise `NotRegularFile` (an OSError) unless `path` is a regular file, without blocking."""
    with open_regular(path):
        pass


def file_sha256(path: Path) -> str:
    """sha256 of a whole regular file, read in 1 MiB pieces (a large wheel is never held or
    mapped whole). Raises OSError (`NotRegularFile` for a FIFO or a device)."""
    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    with open_regular(path) as fh:
        while count := fh.readinto(view):
            digest.update(view[:count])
    return digest.hexdigest()


def not_regular(path: Path) -> str | None:
    """Why `path` is not read as a wheel ("a FIFO", "a character device", a dangling link), or
    None for a regular file: checked without blocking."""
    try:
        require_regular(path)
    except NotRegularFile as exc:
        return exc.kind
    except OSError as exc:
        return f"cannot be opened ({exc.strerror or exc})"
    return None
