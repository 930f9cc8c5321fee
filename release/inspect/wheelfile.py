"""The wheel file itself, around its reading (`release.inspect.reader`): its sha256 (the report's
key), what stands for a second hash after the reading (its identity), and malloc's settings for a
read that allocates and frees a piece at a time."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import time

SETTLED_NS = 2_000_000_000
"""A wheel whose ctime is older than this (2 s) and unchanged after its reading was not written to
meanwhile: its sha256 is not taken twice."""
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
_KEEP_FREED = 64 << 20


@functools.cache
def keep_freed_memory() -> None:
    """Ask glibc's malloc (where it is the allocator) to keep up to `_KEEP_FREED` bytes of freed
    memory and one arena: the pieces a read allocates and frees are then not returned to the
    kernel and faulted in again, zeroed, for the next piece (that was a third of the CPU beyond
    the floor on a 150 MB wheel, as system time)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_TRIM_THRESHOLD, _KEEP_FREED)
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(_M_ARENA_MAX, 1)


def identity(fd: int) -> tuple[int, int, int, int, int]:
    """What changes when the open file's bytes do: device, inode, size, mtime and ctime (every
    write sets the ctime to the clock's time, and no call sets it back)."""
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def settled(identity: tuple[int, int, int, int, int]) -> bool:
    """Whether the file's last change is older than `SETTLED_NS`: a write in the same tick of the
    kernel's coarse clock as the one before it may leave the ctime as it was, so the wheel of a
    file changed just now is hashed again after its reading instead."""
    return time.time_ns() - identity[4] > SETTLED_NS


def fd_sha256(fd: int) -> str:
    """sha256 of the open file's bytes, read by position in 1 MiB pieces (bounded memory)."""
    digest = hashlib.sha256()
    offset = 0
    while piece := os.pread(fd, 1 << 20, offset):
        digest.update(piece)
        offset += len(piece)
    return digest.hexdigest()
