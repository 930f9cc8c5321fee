"""Bounded reading of zip members: every byte inflated is capped by the member's declared size
and by one budget for the whole read of a wheel.

A member that inflates past its declared size, stops short of it, or whose CRC-32 differs is an
error naming it. zlib-ng is used when installed (zlib otherwise); both release the GIL while they
work, so several members inflate at once in threads.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import import_module
from types import ModuleType
from typing import Protocol, cast

from release.wheel.zip import STORED, Archive, ZipEntry, ZipError

CHUNK = 1 << 20
"""Bytes of output per piece: the memory one member holds while it is read. A piece and its input
stay in a core's 2 MiB L2 cache between the inflation and the hashing; each piece costs Python
work and, with members read in threads, a GIL hand-off or two (256 KiB pieces: 2.5 times the
context switches and 0.06 s more CPU on nixl-cu12's 251 MB)."""
_INPUT = 256 << 10
BUDGET_FLOOR = 256 << 20
BUDGET_RATIO = 32
"""A read of a wheel may inflate `BUDGET_FLOOR + BUDGET_RATIO * its size` bytes: generous for real
wheels (GPU wheels unpack to 1.3-4 times their size), and it keeps a small wheel's read short."""


class _Inflater(Protocol):
    unconsumed_tail: bytes
    eof: bool

    def decompress(self, data: bytes | memoryview, max_length: int = ...) -> bytes: ...

    def copy(self) -> _Inflater: ...


class _Codec(Protocol):
    def decompressobj(self, wbits: int = ...) -> _Inflater: ...

    def crc32(self, data: bytes | memoryview, value: int = ...) -> int: ...


def _fastest() -> tuple[str, _Codec]:
    # zlib-ng inflates about as fast as isal here, twice zlib's speed, and its decompressors can
    # be copied (checkpoints); zlib is the fallback.
    try:
        module: ModuleType = import_module("zlib_ng.zlib_ng")
    except ImportError:
        return "zlib", cast("_Codec", zlib)
    return "zlib_ng", cast("_Codec", module)


INFLATER, _CODEC = _fastest()
"""Which inflater reads members ('zlib_ng', else 'zlib')."""
CHECKPOINT_EVERY = 16 << 20
"""Output bytes between two checkpoints of a member's inflation."""


@dataclass(frozen=True)
class Checkpoint:
    """Where an inflation can resume: its output offset, the next input position, the input not
    consumed yet and a copy of the decompressor."""

    produced: int
    position: int
    tail: bytes
    state: _Inflater


class Checkpoints:
    """The checkpoints of one member's inflation, every `CHECKPOINT_EVERY` bytes (about 45 KB each;
    none with an inflater that cannot copy its state): reading a range again then costs at most
    that many bytes more than the range."""

    def __init__(self) -> None:
        self.saved: list[Checkpoint] = []

    def before(self, offset: int) -> Checkpoint | None:
        return next((c for c in reversed(self.saved) if c.produced <= offset), None)


def decompressor() -> _Inflater:
    """A raw deflate decompressor of the fastest inflater installed."""
    return _CODEC.decompressobj(-15)


def crc32(data: bytes | memoryview, value: int = 0) -> int:
    """CRC-32 by the fastest implementation installed (zlib-ng's uses carry-less multiplication:
    several times zlib's speed)."""
    return _CODEC.crc32(data, value)


def budget_for(wheel_size: int) -> int:
    """How many bytes one read of a wheel of this size may inflate."""
    return BUDGET_FLOOR + BUDGET_RATIO * wheel_size


class Budget:
    """The bytes a read of one wheel may still inflate, shared by the threads reading it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0
        self._lock = threading.Lock()

    def take(self, count: int, name: str) -> None:
        with self._lock:
            self.spent += count
            over = self.spent > self.limit
        if over:
            msg = f"{name}: reading it would inflate more than {self.limit} bytes in all (the budget)"
            raise ZipError(msg)


def pieces(
    archive: Archive,
    entry: ZipEntry,
    budget: Budget,
    *,
    limit: int | None = None,
    chunk: int = CHUNK,
    checkpoints: Checkpoints | None = None,
) -> Iterator[bytes]:
    """The member's content in pieces of at most `chunk` bytes, checked against its declared size
    and CRC-32 (or only its first `limit` bytes, unchecked, when `limit` is given); `checkpoints`
    collects where a later read of a range can resume (see `span`)."""
    wanted = entry.size if limit is None else min(limit, entry.size)
    produced = 0
    crc = 0
    if entry.method == STORED:
        source = _stored(archive, entry, 0, wanted, chunk)
    else:
        source = _inflate(archive, entry, wanted, chunk, checkpoints=checkpoints)
    for piece in source:
        produced += len(piece)
        budget.take(len(piece), entry.name)
        if limit is None:
            crc = crc32(piece, crc)
        yield piece
    if limit is None and produced == entry.size and crc != entry.crc:
        msg = f"{entry.name}: CRC-32 {crc:08x}, the archive says {entry.crc:08x} (damaged member)"
        raise ZipError(msg)


def span(
    archive: Archive, entry: ZipEntry, budget: Budget, *, start: int, end: int, checkpoints: Checkpoints
) -> Iterator[tuple[int, bytes]]:
    """(offset, piece) pairs covering the member's bytes [start, end), from the last checkpoint
    before `start` (a stored member from `start` itself); the first piece may begin before it."""
    end = min(end, entry.size)
    if entry.method == STORED:
        source = _stored(archive, entry, start, end, CHUNK)
        offset = start
    else:
        resume = checkpoints.before(start)
        offset = resume.produced if resume is not None else 0
        source = _inflate(archive, entry, end, CHUNK, resume=resume)
    for piece in source:
        budget.take(len(piece), entry.name)
        yield offset, piece
        offset += len(piece)


def _stored(archive: Archive, entry: ZipEntry, start: int, end: int, chunk: int) -> Iterator[bytes]:
    for at in range(entry.data_offset + start, entry.data_offset + end, chunk):
        yield archive.read(at, min(chunk, entry.data_offset + end - at))


def _inflate(
    archive: Archive,
    entry: ZipEntry,
    wanted: int,
    chunk: int,
    *,
    checkpoints: Checkpoints | None = None,
    resume: Checkpoint | None = None,
) -> Iterator[bytes]:
    """Inflate the member (from `resume`, if given); stop after `wanted` bytes when that is less
    than its size, else check that the stream ends exactly at the declared size."""
    if resume is not None:
        inflater, produced = resume.state.copy(), resume.produced
        position, tail = resume.position, resume.tail
    else:
        inflater, produced, position, tail = decompressor(), 0, entry.data_offset, b""
    end = entry.data_end
    mark = produced + CHECKPOINT_EVERY if checkpoints is not None and hasattr(inflater, "copy") else -1
    while not inflater.eof:
        if not tail:
            if position >= end:
                break
            tail = archive.read(position, min(_INPUT, end - position))
            position += len(tail)
        # One byte more than may come, and never 0 (which would mean "no limit").
        room = min(chunk, entry.size - produced + 1)
        try:
            out = inflater.decompress(tail, room)
        except zlib.error as exc:
            msg = f"{entry.name}: not a valid deflate stream ({exc})"
            raise ZipError(msg) from None
        tail = inflater.unconsumed_tail
        if produced + len(out) > entry.size:
            msg = f"{entry.name}: inflates past its declared size of {entry.size} bytes"
            raise ZipError(msg)
        if wanted < entry.size and produced + len(out) >= wanted:
            yield out[: wanted - produced]
            return
        produced += len(out)
        if 0 <= mark <= produced and checkpoints is not None:
            checkpoints.saved.append(Checkpoint(produced, position, tail, inflater.copy()))
            mark = produced + CHECKPOINT_EVERY
        if out:
            yield out
    if not inflater.eof or produced != entry.size:
        msg = f"{entry.name}: inflates to {produced} bytes, its declared size is {entry.size}"
        raise ZipError(msg)


def read_member(archive: Archive, entry: ZipEntry, budget: Budget, *, most: int) -> bytes:
    """A small member whole (metadata, an `__init__.py`); `ZipError` when it declares more than `most`."""
    if entry.size > most:
        msg = f"{entry.name}: {entry.size} bytes, more than the {most} this file may hold"
        raise ZipError(msg)
    return b"".join(pieces(archive, entry, budget))
