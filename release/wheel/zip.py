"""The zip structure of a wheel, read from bytes and checked before anything is inflated.

`read_directory` parses the end record (zip64 too), every central directory entry and every local
header, and refuses what would make a later read unbounded or ambiguous: an end record that lies
about the directory, a count the directory does not hold, local headers that disagree with the
directory, data outside the file, compression other than stored and deflate, encryption, and
entries whose bytes overlap. Every loop is bounded by the bytes it walks.
"""

from __future__ import annotations

import itertools
import os
import stat
import struct
from collections.abc import Sequence
from typing import NamedTuple

STORED = 0
DEFLATED = 8
METHODS = {STORED: "stored", DEFLATED: "deflate"}
_METHOD_NAMES = {12: "bzip2", 14: "lzma", 93: "zstd", 95: "xz", 99: "AES encryption", 9: "deflate64"}

_EOCD = b"PK\x05\x06"
_EOCD64 = b"PK\x06\x06"
_LOCATOR64 = b"PK\x06\x07"
_CENTRAL = b"PK\x01\x02"
_LOCAL = b"PK\x03\x04"
_CENTRAL_HEADER = struct.Struct("<4sHHHHHHIIIHHHHHII")
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_EOCD_SIZE = 22
_CENTRAL_SIZE = 46
_LOCAL_SIZE = 30
_MAX_COMMENT = 0xFFFF
_UNIX = 3
_FLAG_ENCRYPTED = 0x1
_FLAG_UTF8 = 0x800


class ZipError(ValueError):
    """The archive cannot be read safely; the message names the member (or the archive part)."""


class Archive:
    """An open file read with `pread` (thread-safe, and nothing is mapped: bytes read stay out of
    the process's memory once used); a small file is read once, whole."""

    WHOLE = 32 << 20

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size
        self._whole = os.pread(fd, size, 0) if size <= self.WHOLE else None

    def read(self, offset: int, length: int) -> bytes:
        """Up to `length` bytes at `offset` (fewer only at the end of the file)."""
        length = max(0, min(length, self.size - offset))
        if self._whole is not None:
            return self._whole[offset : offset + length]
        data = os.pread(self.fd, length, offset)
        while len(data) < length:
            more = os.pread(self.fd, length - len(data), offset + len(data))
            if not more:
                break
            data += more
        return data


class ZipEntry(NamedTuple):
    """One central directory entry, checked against its local header (a tuple: a wheel may hold
    100,000 of them)."""

    name: str
    method: int
    crc: int
    compressed_size: int
    size: int
    """The declared uncompressed size: inflation stops (with an error) past it."""
    header_offset: int
    data_offset: int
    unix_mode: int
    """The unix mode (file type and permission bits) when written on unix, else 0."""
    is_dir: bool
    is_symlink: bool
    dos_time: int = 0
    """The modification time as the directory stores it: the DOS date in the high 16 bits, the
    DOS time in the low 16 (see `date_time`)."""

    @property
    def date_time(self) -> tuple[int, int, int, int, int, int]:
        """(year, month, day, hour, minute, second), as `zipfile.ZipInfo` takes it."""
        date, time = self.dos_time >> 16, self.dos_time & 0xFFFF
        year, month, day = (date >> 9) + 1980, (date >> 5) & 0xF, date & 0x1F
        return year, month, day, time >> 11, (time >> 5) & 0x3F, (time & 0x1F) * 2

    @property
    def data_end(self) -> int:
        return self.data_offset + self.compressed_size


def _u16(data: bytes, at: int) -> int:
    value: int = struct.unpack_from("<H", data, at)[0]
    return value


def _end_record(archive: Archive) -> tuple[int, int, int, int]:
    """(entries, directory size, directory offset, end of the directory area) from the end
    record, following a zip64 locator; refuses a second end record that also reaches the end."""
    lowest = max(0, archive.size - _EOCD_SIZE - _MAX_COMMENT)
    tail = archive.read(lowest, archive.size - lowest)
    fits: list[int] = []  # end records whose comment fits in the file (the last one wins, as in zipfile)
    exact: list[int] = []  # ... and those whose comment ends exactly at the end of the file
    at = len(tail) - _EOCD_SIZE
    while at >= 0:
        at = tail.rfind(_EOCD, 0, at + 4)
        if at < 0:
            break
        end = at + _EOCD_SIZE + _u16(tail, at + 20)
        if end <= len(tail):
            fits.append(at)
            if end == len(tail):
                exact.append(at)
        at -= 1
    if not fits:
        msg = "not a zip archive (no end of central directory record)"
        raise ZipError(msg)
    if len(exact) > 1:
        msg = "two end of central directory records both reach the end of the file (ambiguous archive)"
        raise ZipError(msg)
    found = exact or fits
    eocd = lowest + found[0]
    disk, cd_disk, _on_disk, entries, cd_size, cd_offset = struct.unpack_from("<HHHHII", tail, found[0] + 4)
    if disk or cd_disk:
        msg = "a multi-disk (split) archive"
        raise ZipError(msg)
    directory_end = eocd
    locator = archive.read(eocd - 20, 20) if eocd >= 20 else b""
    if locator[:4] == _LOCATOR64:
        _disk, record, _disks = struct.unpack_from("<IQI", locator, 4)
        zip64 = archive.read(record, 56) if record + 56 <= eocd - 20 else b""
        if zip64[:4] != _EOCD64:
            msg = "the zip64 end record is not where its locator says"
            raise ZipError(msg)
        entries, _, cd_size, cd_offset = struct.unpack_from("<QQQQ", zip64, 24)
        directory_end = record
    if cd_offset + cd_size > directory_end:
        msg = f"the central directory ({cd_size} bytes at {cd_offset}) runs past its end record"
        raise ZipError(msg)
    if entries * _CENTRAL_SIZE > cd_size:
        msg = f"the end record counts {entries} entries, more than {cd_size} directory bytes can hold"
        raise ZipError(msg)
    return entries, cd_size, cd_offset, directory_end


def _zip64_fields(extra: bytes, wanted: Sequence[str], name: str) -> dict[str, int]:
    """The 8-byte values of the zip64 extra field, in order, for the fields that overflowed."""
    at = 0
    while at + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, at)
        body = extra[at + 4 : at + 4 + length]
        if tag == 0x0001:
            if len(body) < 8 * len(wanted):
                break
            return {w: struct.unpack_from("<Q", body, 8 * i)[0] for i, w in enumerate(wanted)}
        at += 4 + length
    msg = f"{name}: zip64 sizes are missing from its extra field"
    raise ZipError(msg)


def _decode(raw: bytes, flags: int) -> str:
    # Like zipfile (and so pip): UTF-8 when the flag says so, else code page 437; kept whole
    # (a NUL stays in the name, for wheel-integrity to see).
    if raw.isascii():
        return raw.decode("ascii")
    if flags & _FLAG_UTF8:
        return raw.decode("utf-8", errors="surrogateescape")
    return raw.decode("cp437")


def _entry(archive: Archive, cd: bytes, at: int, member_area: int) -> tuple[ZipEntry, int]:
    """The central entry at `at` of the directory `cd`, checked against its local header (members
    end at `member_area`), and where the next entry starts."""
    if at + _CENTRAL_SIZE > len(cd):
        msg = f"central directory entry at {at} is damaged"
        raise ZipError(msg)
    (
        signature,
        made_by,
        _needed,
        flags,
        method,
        dos_time,
        dos_date,
        crc,
        csize,
        usize,
        name_len,
        extra_len,
        comment_len,
        _disk,
        _internal,
        external,
        offset,
    ) = _CENTRAL_HEADER.unpack_from(cd, at)
    if signature != _CENTRAL:
        msg = f"central directory entry at {at} is damaged"
        raise ZipError(msg)
    end = at + _CENTRAL_SIZE + name_len + extra_len + comment_len
    if end > len(cd):
        msg = f"central directory entry at {at} runs past the directory"
        raise ZipError(msg)
    raw = cd[at + _CENTRAL_SIZE : at + _CENTRAL_SIZE + name_len]
    name = _decode(raw, flags)
    if 0xFFFFFFFF in (usize, csize, offset):
        wanted = [k for k, v in (("size", usize), ("csize", csize), ("offset", offset)) if v == 0xFFFFFFFF]
        extra = cd[at + _CENTRAL_SIZE + name_len : at + _CENTRAL_SIZE + name_len + extra_len]
        big = _zip64_fields(extra, wanted, name)
        usize, csize, offset = big.get("size", usize), big.get("csize", csize), big.get("offset", offset)
    if flags & _FLAG_ENCRYPTED:
        msg = f"{name}: an encrypted member"
        raise ZipError(msg)
    if method not in METHODS:
        what = _METHOD_NAMES.get(method, f"method {method}")
        msg = f"{name}: compressed with {what}; a wheel is read only when stored or deflated"
        raise ZipError(msg)
    if method == STORED and csize != usize:
        msg = f"{name}: stored, but declares {csize} bytes in the archive and {usize} unpacked"
        raise ZipError(msg)
    data = _local_data(archive, name, raw, offset, method=method, member_area=member_area)
    if data + csize > member_area:
        msg = f"{name}: its {csize} bytes of data run past the member area"
        raise ZipError(msg)
    mode = (external >> 16) & 0xFFFF if made_by >> 8 == _UNIX else 0
    is_dir = name.endswith("/") or stat.S_ISDIR(mode)
    dos = dos_date << 16 | dos_time
    entry = ZipEntry(name, method, crc, csize, usize, offset, data, mode, is_dir, stat.S_ISLNK(mode), dos)
    return entry, end


def _local_data(archive: Archive, name: str, raw: bytes, at: int, *, method: int, member_area: int) -> int:
    """Where the member's data starts, after its local header (which must agree with the directory)."""
    local = archive.read(at, _LOCAL_SIZE + len(raw)) if at + _LOCAL_SIZE <= member_area else b""
    if len(local) < _LOCAL_SIZE:
        msg = f"{name}: no local header at offset {at}"
        raise ZipError(msg)
    signature, _needed, flags, local_method, *_rest, name_len, extra_len = _LOCAL_HEADER.unpack_from(local)
    if signature != _LOCAL:
        msg = f"{name}: no local header at offset {at}"
        raise ZipError(msg)
    if name_len != len(raw) or local[_LOCAL_SIZE:] != raw:
        msg = f"{name}: its local header names another file"
        raise ZipError(msg)
    if local_method != method or (flags & _FLAG_ENCRYPTED):
        msg = f"{name}: its local header disagrees with the central directory"
        raise ZipError(msg)
    start: int = at + _LOCAL_SIZE + name_len + extra_len
    return start


def read_directory(archive: Archive) -> list[ZipEntry]:
    """Every entry of the archive, in directory order; `ZipError` naming what is wrong."""
    entries, cd_size, cd_offset, _directory_end = _end_record(archive)
    cd = archive.read(cd_offset, cd_size)
    found: list[ZipEntry] = []
    at = 0
    for _ in range(entries):
        entry, at = _entry(archive, cd, at, cd_offset)
        found.append(entry)
    if at != len(cd):
        msg = f"the central directory holds more than the {entries} entries its end record counts"
        raise ZipError(msg)
    ordered = sorted(found, key=lambda e: e.header_offset)
    for before, after in itertools.pairwise(ordered):
        if after.header_offset < before.data_end:
            msg = f"{before.name} and {after.name}: entries overlap in the archive"
            raise ZipError(msg)
    return found
