"""GPU code containers inside an ELF file, found while its bytes stream by.

Two containers are read: NVIDIA fat binaries (a header with the magic 0xba55ed50, then one entry
header per code object, each naming its `sm_XX` architecture) and uncompressed clang offload
bundles (`__CLANG_OFFLOAD_BUNDLE__`, then the entries' target ids such as
`hipv4-amdgcn-amd-amdhsa--gfx942`; a bundle header that does not parse is searched for target names
instead). Which names are architectures is the backends' data (their `architectures` patterns):
the containers' formats are code, the backends' names are not. The scanner looks for both magics
outside the containers it has already read, follows each container's entries by their sizes
instead of scanning its payload, and records the architectures by where each container starts;
the ELF parser keeps those inside the sections the backend names. Compressed offload bundles
(`CCOB`) are not opened.
"""

from __future__ import annotations

import bisect
import re
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

NV_MAGIC = struct.pack("<IHH", 0xBA55ED50, 1, 16)
"""A fat binary header: magic, version 1, header size 16 (then the size of its entries)."""
BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
MAX_CAPTURES = 1 << 16
"""Headers read per file at most (each a few dozen bytes; a real library has a few thousand)."""
_BUNDLE_HEAD = 64 << 10
_MAX_BUNDLE_ENTRIES = 4096
NO_ARCHITECTURES = re.compile(rb"(?!x)x")
"""Finds no name: for callers that read no device sections."""


def architecture_names(patterns: Iterable[str]) -> re.Pattern[bytes]:
    """The backends' `architectures` patterns (`gfx[0-9]{3,4}[a-z]?`) as one that finds any of
    their names standing alone in bytes: no letter, digit or underscore before, no digit after.
    A pattern that does not compile is left out (loading the backend data reports it)."""
    names = []
    for pattern in sorted(set(patterns)):
        try:
            re.compile(pattern.encode("ascii"))
        except (re.error, UnicodeEncodeError):
            continue
        names.append(f"(?:{pattern})")
    if not names:
        return NO_ARCHITECTURES
    return re.compile(f"(?<![A-Za-z0-9_])({'|'.join(names)})(?![0-9])".encode("ascii"))


def find_architectures(data: bytes, names: re.Pattern[bytes]) -> tuple[str, ...]:
    """GPU architecture names (gfx942, sm_90, mp_21) written out in raw bytes: what `names` (the
    backends' `architectures` patterns, see `architecture_names`)
    matches, its first group when it has one."""
    return tuple(sorted({m.group(m.lastindex or 0).decode("ascii", "replace") for m in names.finditer(data)}))


def outside(ranges: Sequence[tuple[int, int]], scanned: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The ranges not wholly inside one of the `scanned` ones, sorted."""
    return sorted(r for r in ranges if not any(lo <= r[0] and r[1] <= hi for lo, hi in scanned))


@dataclass
class _Capture:
    start: int
    length: int
    then: Callable[[int, bytes], None]
    data: bytearray


class DeviceScanner:
    """Feed it an ELF file's bytes in order; ask it which architectures start inside given ranges."""

    def __init__(self, size: int, names: re.Pattern[bytes]) -> None:
        self.size = size
        self.names = names
        """Matches one architecture name (see `find_architectures`)."""
        self.found: dict[int, set[str]] = {}
        """Container start offset -> architectures its headers name."""
        self._captures: list[_Capture] = []
        self._captured = 0
        self._covered = 0
        """Bytes before this offset belong to containers already read: they are not scanned."""
        self._carry = b""
        self._next = 0

    def feed(self, offset: int, chunk: bytes) -> None:
        """Bytes of the file at `offset`, in increasing order (gaps are allowed: bytes that cannot
        hold GPU code, such as debug sections, need not pass)."""
        if offset != self._next:
            self._carry = b""
        self._next = offset + len(chunk)
        if self._carry:  # a magic across the seam: the end of the last chunk and the start of this one
            seam = self._carry + chunk[: _LONGEST_MAGIC - 1]
            self._fill(offset - len(self._carry), seam)
            self._scan(offset - len(self._carry), seam, before=offset)
        self._fill(offset, chunk)
        self._scan(offset, chunk, before=offset + len(chunk))
        keep = _LONGEST_MAGIC - 1
        self._carry = (self._carry + bytes(chunk[-keep:]))[-keep:]

    def _scan(self, base: int, window: bytes, *, before: int) -> None:
        """Start reading every container whose magic starts in `window` before `before`, outside
        the containers already read."""
        starts = [(c.magic, c) for c in CONTAINERS]
        end = min(len(window), before - base)
        upcoming = [-1] * len(starts)
        position = max(0, self._covered - base)
        while position < end:
            for i, (magic, _start) in enumerate(starts):
                if upcoming[i] < position:
                    found = _find(window, magic, position, end)
                    upcoming[i] = found if found >= 0 else len(window)
            hit = min(upcoming)
            if hit >= end:
                break
            container = starts[upcoming.index(hit)][1]
            if base + hit >= self._covered and base + hit not in self.found:
                container.open(self, base + hit)
                self._fill(base, window)
            position = max(hit + 1, self._covered - base)

    def architectures(self, ranges: Sequence[tuple[int, int]]) -> tuple[str, ...]:
        """The architectures of the containers that start inside any of `ranges` (headers the bytes
        fed did not complete are read as far as they go)."""
        while self._captures:
            capture = self._captures.pop(0)
            capture.then(capture.start, bytes(capture.data))
        names = {
            arch
            for start, archs in self.found.items()
            if any(lo <= start < hi for lo, hi in ranges)
            for arch in archs
        }
        return tuple(sorted(names))

    def _want(self, start: int, length: int, then: Callable[[int, bytes], None]) -> None:
        length = min(length, self.size - start)
        if length <= 0 or self._captured >= MAX_CAPTURES:
            return
        self._captured += 1
        bisect.insort(self._captures, _Capture(start, length, then, bytearray()), key=lambda c: c.start)

    def _fill(self, base: int, window: bytes) -> None:
        """Complete the captures this window reaches, in order (a completed one may want more)."""
        end = base + len(window)
        while self._captures and self._captures[0].start < end:
            capture = self._captures[0]
            have = capture.start + len(capture.data)
            if have < base:  # wanted behind the stream: those bytes are gone
                self._captures.pop(0)
                continue
            capture.data += window[have - base : capture.start + capture.length - base]
            if len(capture.data) < capture.length:
                return
            self._captures.pop(0)
            capture.then(capture.start, bytes(capture.data))

    # --- what container formats use -------------------------------------------------------------

    def want(self, start: int, length: int, then: Callable[[int, bytes], None]) -> None:
        """Call `then(start, bytes)` once `length` bytes from `start` have passed (or as many as
        passed, when `architectures` is asked first)."""
        self._want(start, length, then)

    def record(self, start: int, names: Iterable[str] = ()) -> None:
        """A container starts at `start`; `names` are architectures its headers name."""
        self.found.setdefault(start, set()).update(names)

    def cover(self, end: int) -> None:
        """The bytes before `end` belong to a container already read: they are not scanned."""
        if end <= self.size:
            self._covered = max(self._covered, end)


def _find(window: bytes, magic: bytes, start: int, end: int) -> int:
    """Where `magic` first starts in `window` from `start` (-1, or a place at or past `end`: nowhere
    before `end`). The fat binary's magic is found by its rarest byte in code (0xed: about one byte
    in 5,000 of x86 code), which `bytes.find` finds with memchr, several times faster than any
    longer needle; when that byte comes too often (compressed data), by `_find_needle`."""
    rare = _RARE.get(magic)
    if rare is None:
        return _find_needle(window, magic, start, end)
    at, byte = rare, magic[rare : rare + 1]
    misses = 64 + (len(window) - start) // _RARE_SPACING
    found = window.find(byte, start + at)
    while 0 <= found - at < end:
        if window.startswith(magic, found - at):
            return found - at
        misses -= 1
        if misses <= 0:
            return _find_needle(window, magic, found - at + 1, end)
        found = window.find(byte, found + 1)
    return -1


def _find_needle(window: bytes, magic: bytes, start: int, end: int) -> int:
    """`_find` by a needle: a magic ending in a zero byte (the fat binary's, as most code bytes are
    zero) is found by its first five bytes: bytes.find skips by the needle's last byte, and skips
    through a binary twice as fast."""
    needle = magic[:5] if magic.endswith(b"\0") else magic
    found = window.find(needle, start)
    while 0 <= found < end and not window.startswith(magic, found):
        found = window.find(needle, found + 1)
    return found


_RARE = {NV_MAGIC: 1}
"""Magic -> the index of its byte that is rarest in code."""
_RARE_SPACING = 1024
"""`_find` by that byte tolerates one false hit per this many bytes (each costs about 0.15 us,
the needle search about 0.5 ns a byte), then searches by the needle."""


class ContainerFormat(Protocol):
    """One format of GPU code container (code: a file format, not a backend's facts). The scanner
    finds `magic` in the bytes and calls `open`; the format asks for its header bytes with
    `scan.want`, and tells the scanner what it found with `scan.record` and `scan.cover`."""

    magic: bytes

    def open(self, scan: DeviceScanner, start: int) -> None: ...


class FatBinary:
    """NVIDIA fat binaries: a 16-byte header, then one 32-byte entry header per code object, each
    naming its `sm_XX` architecture."""

    magic = NV_MAGIC

    def open(self, scan: DeviceScanner, start: int) -> None:
        scan.want(start, 16, lambda at, raw: self._header(scan, at, raw))

    def _header(self, scan: DeviceScanner, start: int, data: bytes) -> None:
        if len(data) < 16:
            return
        _magic, _version, header_size, entries = struct.unpack_from("<IHHQ", data)
        end = start + header_size + entries
        if header_size != 16 or end > scan.size:
            return
        scan.record(start)
        scan.cover(end)
        scan.want(start + header_size, 32, lambda at, raw: self._entry(scan, start, end, at, raw))

    def _entry(self, scan: DeviceScanner, container: int, end: int, at: int, data: bytes) -> None:
        if len(data) < 32:
            return
        _kind, _version, header_size, payload = struct.unpack_from("<HHIQ", data)
        (arch,) = struct.unpack_from("<I", data, 28)
        if header_size < 32:
            return
        if 10 <= arch < 1000:
            scan.record(container, (f"sm_{arch}",))
        following = at + header_size + payload
        if following + 32 <= end:
            scan.want(following, 32, lambda nxt, raw: self._entry(scan, container, end, nxt, raw))


class OffloadBundle:
    """Uncompressed clang offload bundles: the magic, an entry count, then per entry its offset,
    size and target id (`hipv4-amdgcn-amd-amdhsa--gfx942`), whose architecture the backends'
    patterns name."""

    magic = BUNDLE_MAGIC

    def open(self, scan: DeviceScanner, start: int) -> None:
        scan.want(start, _BUNDLE_HEAD, lambda at, raw: self._header(scan, at, raw))

    def _header(self, scan: DeviceScanner, start: int, data: bytes) -> None:
        at = len(BUNDLE_MAGIC)
        if at + 8 > len(data):
            return
        (count,) = struct.unpack_from("<Q", data, at)
        at += 8
        ids: list[bytes] = []
        extent = 0
        for _ in range(min(count, _MAX_BUNDLE_ENTRIES)):
            if at + 24 > len(data):
                break
            offset, size, id_length = struct.unpack_from("<QQQ", data, at)
            at += 24
            if at + id_length > len(data):
                break
            ids.append(data[at : at + id_length])
            at += id_length
            extent = max(extent, offset + size)
        # A header that does not parse (another bundle version) still names its targets in text.
        named = b"\0".join(ids) if ids else data
        scan.record(start, find_architectures(named, scan.names))
        scan.cover(start + extent)


CONTAINERS: tuple[ContainerFormat, ...] = (FatBinary(), OffloadBundle())
"""The container formats the scanner reads; a new format is one more class here."""
_LONGEST_MAGIC = max(len(c.magic) for c in CONTAINERS)
