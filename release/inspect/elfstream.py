"""One ELF member of a wheel as it streams by (`release.inspect.reader`), and its facts once it
has passed.

A file of at most `HEAD_KEEP` bytes is kept whole as it passes (its pieces as they came, not
joined) and described from them afterwards: no work per piece, and its GPU containers are searched
for (in its loaded segments, as a larger file's) only when it has device sections. A larger file
keeps the ranges its plan names (headers, dynamic and note segments, the section table), the
CRC-32 of each 64 KiB block (its code's identity) and its GPU containers, searched in its loaded
segments as they pass; a table outside the kept ranges is read again from the inflation checkpoint
before it.
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Sequence

from release.inspect.devicecode import DeviceScanner, outside
from release.inspect.elf import (
    HEAD_KEEP,
    CodeFingerprint,
    ElfInfo,
    ElfReadError,
    Plan,
    describe,
    dynamic_keep,
    is_elf,
    plan_reading,
    tables_needed,
)
from release.inspect.elfformat import Image, MissingRange
from release.inspect.symboltables import SymbolCopy, symbol_doubt, symbol_ranges
from release.wheel.inflate import Budget, Checkpoints, crc32, span
from release.wheel.zip import Archive, ZipEntry

_HEAD = 64 << 10
"""Bytes of an ELF file gathered before its reading is planned."""
_REFETCH_LIMIT = 64 << 20
"""Bytes of an ELF file's tables fetched again at most (after the stream did not keep them)."""
_REFETCHES = 4
_BLOCK = 64 << 10


class ElfStream:
    """One ELF member as it streams by: what its plan keeps, and its GPU containers."""

    def __init__(self, name: str, size: int, checkpoints: Checkpoints, names: re.Pattern[bytes]) -> None:
        self.name = name
        self.size = size
        self.checkpoints = checkpoints
        """Where a read of a range of the file can resume (a large file is read again in places)."""
        self.whole = size <= HEAD_KEEP
        """Kept whole as it passes (every piece): scanned and described once it has passed."""
        self.head = bytearray()
        self.plan: Plan | None = None
        self.keep: list[tuple[int, int]] = []
        """The plan's ranges, and the tables its dynamic segment names once that has passed."""
        self.kept: list[tuple[int, bytes]] = []
        self.scanner = DeviceScanner(size, names)
        self.blocks = array.array("I")
        """CRC-32 of each whole `_BLOCK` of a file not kept whole: its code identity without a
        second pass."""
        self._crc = 0
        self._waiting: list[tuple[int, bytes]] = []
        self._scanned = not self.whole
        self.symbols: SymbolCopy | None = None
        """Its headers and tables, for a copy that tools reading its symbols take for the file
        (`release.inspect.symboltables`); None when they were not asked for or are too large."""

    def feed(self, offset: int, piece: bytes) -> None:
        if self.plan is None:
            self.head += piece[: _HEAD - len(self.head)]
            self._waiting.append((offset, piece))
            if len(self.head) < min(_HEAD, self.size):
                return
            self.plan = plan_reading(self.name, bytes(self.head), self.size)
            self.keep = list(self.plan.keep)
            waiting, self._waiting = self._waiting, []
            for at, data in waiting:
                self._take(self.plan, at, data)
        elif self.whole:
            self.kept.append((offset, piece))
        else:
            self._take(self.plan, offset, piece)

    def _take(self, plan: Plan, offset: int, piece: bytes) -> None:
        if self.whole:
            self.kept.append((offset, piece))
            return
        for at, loaded in overlaps(plan.loaded, offset, piece):
            self.scanner.feed(at, loaded)
        self.kept.extend(overlaps(self.keep, offset, piece))
        if plan.dynamic is not None and offset < plan.dynamic[1] <= offset + len(piece):
            near = [p for at, data in self.kept for p in overlaps([plan.dynamic], at, data)]
            more = dynamic_keep(Image(self.size, [(0, bytes(self.head)), *near]))
            self.keep.extend(more)
            self.kept.extend(overlaps(more, offset, piece))
        with memoryview(piece) as view:
            at = 0
            while at < len(view):
                take = min(_BLOCK - (offset + at) % _BLOCK, len(view) - at)
                self._crc = crc32(view[at : at + take], self._crc)
                at += take
                if (offset + at) % _BLOCK == 0:
                    self.blocks.append(self._crc)
                    self._crc = 0

    def scanned(self) -> DeviceScanner:
        """The scanner, fed the loaded segments: as they passed, or (a file kept whole) now, the
        same bytes in the same order."""
        if not self._scanned and self.plan is not None:
            self._scanned = True
            for lo, hi in self.plan.loaded:
                for offset, piece in self.kept:
                    for at, loaded in overlaps([(lo, hi)], offset, piece):
                        self.scanner.feed(at, loaded)
        return self.scanner

    def block_print(self, ranges: Sequence[tuple[int, int]]) -> bytes | None:
        """The identity of `ranges` from the CRC-32 of the whole blocks inside them (None when one
        holds no whole block): the same for two files with the same bytes at the same offsets."""
        digest = hashlib.sha256()
        for lo, hi in ranges:
            first, last = -(-lo // _BLOCK), hi // _BLOCK
            if last <= first or last > len(self.blocks):
                return None
            digest.update(hi.to_bytes(8, "little") + (hi - lo).to_bytes(8, "little"))
            digest.update(self.blocks[first:last].tobytes())
        return b"blocks" + digest.digest()


def _symbol_copy(
    name: str,
    image: Image,
    kept: Sequence[tuple[int, bytes]],
    read_again: Callable[[Sequence[tuple[int, int]]], Iterable[tuple[int, bytes]]],
) -> SymbolCopy | None:
    """What a reader of the file's symbols reads (the ranges the stream did not keep read again);
    None when that is more than `symboltables.LIMIT` bytes."""
    wanted = symbol_ranges(name, image)
    if wanted is None:
        return None
    missing = [(lo, hi) for lo, hi in wanted.ranges if not image.holds(lo, hi - lo)]
    if missing:
        image = Image(image.size, [*kept, *read_again(missing)])
    doubt = symbol_doubt(image)
    if doubt:  # the loader binds through other tables than the copy would show: audit the whole file
        return SymbolCopy([], python=True, doubt=doubt)
    python = any(b"Py" in image.read(lo, hi - lo) for lo, hi in wanted.names)
    return SymbolCopy([(lo, image.read(lo, hi - lo)) for lo, hi in wanted.ranges], python)


def overlaps(ranges: Sequence[tuple[int, int]], offset: int, piece: bytes) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) of the parts of `piece` (at `offset`) inside each of `ranges`."""
    end = offset + len(piece)
    for lo, hi in ranges:
        if lo <= offset and end <= hi:
            yield offset, piece  # the whole piece (most of a loaded segment's): not copied
        elif lo < end and offset < hi:
            start = max(lo, offset)
            yield start, piece[start - offset : min(hi, end) - offset]


def elf_stream(
    entry: ZipEntry, first: list[tuple[int, bytes]], marks: Checkpoints, names: re.Pattern[bytes]
) -> ElfStream | None:
    """A stream for an ELF member (given its first pieces), None for any other file."""
    if not is_elf(b"".join(p for _, p in first)[:4]):
        return None
    stream = ElfStream(entry.name, entry.size, marks, names)
    for at, piece in first:
        stream.feed(at, piece)
    return stream


def describe_stream(
    archive: Archive,
    entry: ZipEntry,
    budget: Budget,
    stream: ElfStream,
    *,
    whole: bytes,
    device_sections: Sequence[str],
    names: re.Pattern[bytes],
    symbols: bool = False,
) -> ElfInfo:
    """The ELF facts once the member has streamed by, fetching what the plan did not keep: the
    tables the section headers name, in one more pass up to the last of them. With `symbols`, a
    shared object also keeps what a reader of its symbols needs (`stream.symbols`)."""
    kept = stream.kept

    def read_again(ranges: Sequence[tuple[int, int]]) -> Iterator[tuple[int, bytes]]:
        """The bytes of `ranges` (in order), each read again from the checkpoint before it (from
        the pieces of a file kept whole)."""
        pieces = tuple(kept)
        for lo, hi in sorted(ranges):
            if stream.whole:
                source: Iterable[tuple[int, bytes]] = pieces
            else:
                source = span(archive, entry, budget, start=lo, end=hi, checkpoints=stream.checkpoints)
            for offset, piece in source:
                yield from overlaps([(lo, hi)], offset, piece)

    def architectures(ranges: Sequence[tuple[int, int]]) -> tuple[str, ...]:
        """GPU architectures in `ranges`; a device section outside the loaded segments (an
        unloaded one, as objcopy adds them) was not scanned as it passed: it is read again."""
        if not ranges:
            return ()
        scanner = stream.scanned()
        unscanned = outside(ranges, stream.plan.loaded if stream.plan is not None else ())
        if not unscanned:
            return scanner.architectures(ranges)
        again = DeviceScanner(entry.size, names)
        for at, data in read_again(unscanned):
            again.feed(at, data)
        return tuple(sorted({*scanner.architectures(ranges), *again.architectures(unscanned)}))

    def fingerprint(ranges: Sequence[tuple[int, int]]) -> bytes:
        """The code fingerprint of `ranges`: from the kept bytes, else from the blocks' CRC-32,
        else (code too small to hold a whole block, and not kept) read again up to it."""
        code = CodeFingerprint()
        if all(image.holds(lo, hi - lo) for lo, hi in ranges):
            for lo, hi in ranges:
                for part in image.parts(lo, hi - lo):
                    code.update(part)
            return code.digest()
        blocks = stream.block_print(ranges)
        if blocks is not None:
            return blocks
        for _at, data in read_again(ranges):
            code.update(data)
        return code.digest()

    for _ in range(_REFETCHES):
        image = Image(entry.size, kept)
        try:
            info = describe(
                entry.name,
                image,
                device_sections=device_sections,
                fingerprint=fingerprint,
                file_digest=whole,
                architectures=architectures,
            )
        except MissingRange as missing:
            wanted = [(missing.offset, missing.offset + missing.length)]
        else:
            if symbols and not info.executable:
                stream.symbols = _symbol_copy(entry.name, image, kept, read_again)
            return info
        with contextlib.suppress(MissingRange):
            wanted += tables_needed(entry.name, image)
        wanted = [(lo, hi) for lo, hi in wanted if not image.holds(lo, hi - lo)]
        if sum(hi - lo for lo, hi in wanted) > _REFETCH_LIMIT:
            msg = f"{entry.name}: not a readable ELF file (its tables need more than {_REFETCH_LIMIT} bytes)"
            raise ElfReadError(msg)
        kept.extend(read_again(wanted))
    msg = f"{entry.name}: not a readable ELF file (its tables lie in more than {_REFETCHES} places)"
    raise ElfReadError(msg)
