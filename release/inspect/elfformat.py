"""The ELF format, read defensively: headers, section and segment tables, and the walks over the
tables inside them (dynamic entries, version-needed chains, notes, string tables).

Every table is checked against the file before it is read, and every walk is bounded by the bytes
of the section or segment it lives in: a violation is one `ElfFormatError` sentence. Bytes come
from an `Image`, the whole file or the pieces of it kept while it streamed out of a wheel; a read
outside those pieces raises `MissingRange`, for the reader to fetch them.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

ELF_MAGIC = b"\x7fELF"
PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE = 1, 2, 3, 4
PF_X = 0x1
ET_EXEC = 2
SHT_SYMTAB, SHT_STRTAB, SHT_HASH, SHT_DYNAMIC, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 2, 3, 5, 6, 7, 8, 11
SHT_SYMTAB_SHNDX = 18
SHT_GNU_HASH, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 0x6FFFFFF6, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
SHT_ATTRIBUTES = 0x70000003
"""SHT_ARM_ATTRIBUTES and SHT_RISCV_ATTRIBUTES (the same number)."""
SHF_COMPRESSED = 0x800
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 14, 15, 29
DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFE, 0x6FFFFFFF
DT_HASH, DT_GNU_HASH = 4, 0x6FFFFEF5
MAX_DYNAMIC = 4 << 20
"""A dynamic segment larger than this is refused (real ones hold a few hundred bytes)."""
MAX_NOTES = 1 << 20
_SYMBOL_HASH = (SHT_GNU_HASH, SHT_HASH)
# (e_machine, 64-bit, little-endian) -> the platform tag's architecture.
_ARCHES = {
    (62, True, True): "x86_64",
    (3, False, True): "i686",
    (183, True, True): "aarch64",
    (40, False, True): "armv7l",
    (21, True, True): "ppc64le",
    (21, True, False): "ppc64",
    (22, True, False): "s390x",
    (243, True, True): "riscv64",
    (258, True, True): "loongarch64",
}


class ElfFormatError(ValueError):
    """The file breaks a rule of the ELF format (the message says which)."""


class MissingRange(Exception):
    """A read touched bytes of an `Image` that were not kept: (offset, length)."""

    def __init__(self, offset: int, length: int) -> None:
        super().__init__(offset, length)
        self.offset = offset
        self.length = length


class Image:
    """The bytes of one ELF file, or the kept pieces of it: `size` is the whole file's. The pieces
    are not joined (they may be megabytes, and most reads are a few bytes): a read copies what it
    asks for, joined only where it spans two pieces."""

    def __init__(self, size: int, pieces: Iterable[tuple[int, bytes]]) -> None:
        self.size = size
        self._runs: list[int] = []
        """Where each run of adjacent pieces starts (`_ends`: where it ends)."""
        self._ends: list[int] = []
        self._starts: list[int] = []
        """Where each piece starts: pieces in order, none overlapping another."""
        self._pieces: list[bytes | memoryview] = []
        end = -1
        for offset, given in sorted(pieces, key=lambda p: p[0]):
            if offset + len(given) <= end or not given:
                continue
            # A piece overlapping the one before: its new bytes only, as a view (not copied).
            data = memoryview(given)[end - offset :] if offset < end else given
            start = max(offset, end)
            if start == end:
                self._ends[-1] = start + len(data)
            else:
                self._runs.append(start)
                self._ends.append(start + len(data))
            self._starts.append(start)
            self._pieces.append(data)
            end = start + len(data)

    @classmethod
    def whole(cls, data: bytes) -> Image:
        return cls(len(data), [(0, data)])

    def holds(self, offset: int, length: int) -> bool:
        i = bisect.bisect_right(self._runs, offset) - 1
        return i >= 0 and offset + length <= self._ends[i]

    def read(self, offset: int, length: int) -> bytes:
        """Exactly `length` bytes at `offset` (the caller has checked them against `size`)."""
        parts = self.parts(offset, length)
        return bytes(parts[0]) if len(parts) == 1 else b"".join(parts)

    def parts(self, offset: int, length: int) -> list[bytes | memoryview]:
        """The bytes `read` returns, as slices of the pieces that hold them, in order (a piece of
        megabytes is then not copied to be hashed)."""
        if not self.holds(offset, length):
            raise MissingRange(offset, length)
        i = bisect.bisect_right(self._starts, offset) - 1
        start = offset - self._starts[i]
        piece = self._pieces[i]
        if not start and length == len(piece):
            return [piece]
        if start + length <= len(piece):
            return [memoryview(piece)[start : start + length]]
        parts: list[bytes | memoryview] = [memoryview(piece)[start:]]
        have = len(piece) - start
        while have < length:
            i += 1
            parts.append(memoryview(self._pieces[i])[: length - have])
            have += len(parts[-1])
        return parts


@dataclass(frozen=True)
class Segment:
    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    align: int


@dataclass(frozen=True)
class Section:
    index: int
    name_offset: int
    type: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int
    flags: int = 0

    @property
    def in_file(self) -> bool:
        return self.type != SHT_NOBITS and self.size > 0


@dataclass
class Header:
    """The ELF header, with extended numbering resolved once the section table is at hand."""

    wide: bool
    little: bool
    type: int
    machine: int
    phoff: int
    shoff: int
    ehsize: int
    phentsize: int
    phnum: int
    shentsize: int
    shnum: int
    shstrndx: int
    size: int
    segments: list[Segment] = field(default_factory=list)

    @property
    def order(self) -> str:
        return "<" if self.little else ">"

    def unpack(self, fmt: str, data: bytes, offset: int = 0) -> tuple[int, ...]:
        values: tuple[int, ...] = struct.unpack_from(self.order + fmt, data, offset)
        return values


def read_header(head: bytes, size: int) -> Header:
    """The ELF header from the file's first bytes (extended numbering is refused)."""
    checks = (
        (len(head) < 16 or head[:4] != ELF_MAGIC, "no ELF magic"),
        (head[4:5] not in (b"\x01", b"\x02"), f"EI_CLASS={head[4:5].hex()}"),
        (head[5:6] not in (b"\x01", b"\x02"), f"EI_DATA={head[5:6].hex()}"),
        (head[6:7] != b"\x01", f"EI_VERSION={head[6:7].hex()}"),
    )
    for failed, why in checks:
        if failed:
            raise ElfFormatError(why)
    wide, little = head[4] == 2, head[5] == 1
    fmt = "HHIQQQIHHHHHH" if wide else "HHIIIIIHHHHHH"
    need = 16 + struct.calcsize("<" + fmt)
    if len(head) < need or size < need:
        msg = f"{size} bytes, shorter than an ELF header"
        raise ElfFormatError(msg)
    order = "<" if little else ">"
    (
        etype,
        machine,
        _version,
        _entry,
        phoff,
        shoff,
        _flags,
        ehsize,
        phentsize,
        phnum,
        shentsize,
        shnum,
        shstrndx,
    ) = struct.unpack_from(order + fmt, head, 16)
    if phnum == 0xFFFF or (shoff and shnum == 0):
        msg = "extended numbering (more than 65534 program or 65279 section headers)"
        raise ElfFormatError(msg)
    return Header(
        wide,
        little,
        etype,
        machine,
        phoff,
        shoff if shnum else 0,
        ehsize,
        phentsize,
        phnum,
        shentsize,
        shnum,
        shstrndx,
        size,
    )


def check_table(header: Header, kind: str, offset: int, count: int, entsize: int) -> None:
    """A program or section header table: entries large enough, all inside the file."""
    least = {"program header": 56 if header.wide else 32, "section header": 64 if header.wide else 40}[kind]
    if count and entsize < least:
        msg = f"{kind} entries of {entsize} bytes, fewer than {least}"
        raise ElfFormatError(msg)
    if count and (offset <= 0 or offset + count * entsize > header.size):
        msg = f"{count} {kind} entries at offset {offset} run past the end of the file ({header.size} bytes)"
        raise ElfFormatError(msg)


def _entries(header: Header, fmt: str, raw: bytes, entsize: int) -> Iterator[tuple[int, ...]]:
    """The fields of each `entsize`-byte entry of a header table (`raw`: the whole table, checked),
    read by one compiled struct."""
    entry = struct.Struct(header.order + fmt)
    if not raw:  # no table: a relocatable object has no program headers and may say their size is 0
        return iter(())
    if entsize == entry.size:
        return entry.iter_unpack(raw)
    return (entry.unpack_from(raw, at) for at in range(0, len(raw), entsize))


def read_segments(header: Header, image: Image) -> list[Segment]:
    """The program headers (their table bounded by the file), each checked against the file."""
    check_table(header, "program header", header.phoff, header.phnum, header.phentsize)
    segments: list[Segment] = []
    raw = image.read(header.phoff, header.phnum * header.phentsize) if header.phnum else b""
    fmt = "IIQQQQQQ" if header.wide else "IIIIIIII"
    for i, fields in enumerate(_entries(header, fmt, raw, header.phentsize)):
        if header.wide:
            ptype, flags, offset, vaddr, _paddr, filesz, _memsz, align = fields
        else:
            ptype, offset, vaddr, _paddr, filesz, _memsz, flags, align = fields
        if filesz and offset + filesz > header.size:
            msg = f"segment {i} (type {ptype:#x}) runs past the end of the file"
            raise ElfFormatError(msg)
        segments.append(Segment(ptype, flags, offset, vaddr, filesz, align))
    header.segments = segments
    return segments


def read_sections(header: Header, image: Image) -> list[Section]:
    """The section headers (their table bounded by the file), each checked against the file."""
    check_table(header, "section header", header.shoff, header.shnum, header.shentsize)
    fmt = "IIQQQQIIQQ" if header.wide else "IIIIIIIIII"
    raw = image.read(header.shoff, header.shnum * header.shentsize) if header.shnum else b""
    sections: list[Section] = []
    for i, fields in enumerate(_entries(header, fmt, raw, header.shentsize)):
        name, stype, flags, _addr, offset, size, link, info, _align, entsize = fields
        section = Section(i, name, stype, offset, size, link, info, entsize, flags)
        if stype != SHT_NOBITS and size > 0 and offset + size > header.size:
            msg = f"section {i} ({size} bytes at {offset}) runs past the end of the file"
            raise ElfFormatError(msg)
        sections.append(section)
    if sections and not 0 <= header.shstrndx < len(sections):
        msg = f"e_shstrndx={header.shstrndx} with {len(sections)} sections"
        raise ElfFormatError(msg)
    return sections


# --- tables inside sections ---------------------------------------------------------------------


def string_at(table: bytes, offset: int, what: str) -> str:
    """The NUL-terminated string at `offset` of a string table, which must hold all of it."""
    if not 0 <= offset < len(table):
        msg = f"{what}: string offset {offset} outside its {len(table)}-byte string table"
        raise ElfFormatError(msg)
    end = table.find(b"\0", offset)
    if end < 0:
        msg = f"{what}: string at {offset} runs to the end of its string table without a NUL"
        raise ElfFormatError(msg)
    return table[offset:end].decode("utf-8", errors="replace")


def section_bytes(image: Image, section: Section) -> bytes:
    return image.read(section.offset, section.size) if section.in_file else b""


def linked_strings(sections: Sequence[Section], section: Section, image: Image) -> bytes:
    """The string table a section's sh_link names (checked to be one)."""
    link = section.link
    if not 0 < link < len(sections) or link == section.index or sections[link].type != SHT_STRTAB:
        msg = f"section {section.index} links section {link}, which is no string table"
        raise ElfFormatError(msg)
    return section_bytes(image, sections[link])


def address_to_offset(header: Header, address: int) -> tuple[int, int] | None:
    """(file offset, bytes to the end of its loadable segment) of a virtual address."""
    for seg in header.segments:
        if seg.type == PT_LOAD and seg.vaddr <= address < seg.vaddr + seg.filesz:
            return seg.offset + (address - seg.vaddr), seg.vaddr + seg.filesz - address
    return None


def dynamic_entries(header: Header, data: bytes) -> list[tuple[int, int]]:
    """(tag, value) pairs up to DT_NULL, which must be inside `data`."""
    entry = 16 if header.wide else 8
    fmt = header.order + ("qQ" if header.wide else "iI")
    entries: list[tuple[int, int]] = []
    for tag, value in struct.iter_unpack(fmt, data[: len(data) // entry * entry]):
        if tag == DT_NULL:
            return entries
        entries.append((tag, value))
    msg = f"the dynamic section ({len(data)} bytes) has no DT_NULL"
    raise ElfFormatError(msg)


def version_needs(header: Header, data: bytes, count: int, strings: bytes) -> list[tuple[str, str]]:
    """(library, version) pairs of a version-needed table: `count` entries and their auxiliaries,
    every step inside `data`, at most one step per 16 bytes of it."""
    steps = len(data) // 16
    if count > steps:
        msg = f"{count} version-needed entries cannot fit in {len(data)} bytes"
        raise ElfFormatError(msg)
    found: list[tuple[str, str]] = []
    at = 0
    for i in range(count):
        if at + 16 > len(data):
            msg = f"version-needed entry {i} at {at} runs past its section"
            raise ElfFormatError(msg)
        _version, cnt, file_name, aux, following = header.unpack("HHIII", data, at)
        library = string_at(strings, file_name, "version-needed file")
        where = at + aux
        for j in range(cnt):
            steps -= 1
            if steps < 0 or where + 16 > len(data):
                msg = f"version-needed auxiliary {j} of {library} runs past its section"
                raise ElfFormatError(msg)
            _hash, _flags, _other, name, step = header.unpack("IHHII", data, where)
            found.append((library, string_at(strings, name, "version-needed name")))
            if step == 0:
                if j != cnt - 1:
                    msg = f"{library}: {cnt} version names announced, the chain ends at {j + 1}"
                    raise ElfFormatError(msg)
                break
            where += step
        if following == 0:
            if i != count - 1:
                msg = f"{count} version-needed entries announced, the chain ends at {i + 1}"
                raise ElfFormatError(msg)
            break
        at += following
    return found


def walk_notes(header: Header, data: bytes, align: int) -> int:
    """The number of notes in a note segment, each inside it (names are padded to 4 bytes,
    descriptions to the segment's alignment, 4 or 8)."""
    at, count = 0, 0
    step = 8 if align == 8 else 4
    while at + 12 <= len(data):
        namesz, descsz, _type = header.unpack("III", data, at)
        size = 12 + -(-namesz // 4) * 4 + -(-descsz // step) * step
        if at + size > len(data):
            msg = f"a note (name {namesz} bytes, description {descsz}) runs past its segment"
            raise ElfFormatError(msg)
        at += size
        count += 1
    return count


def covered_bytes(header: Header, sections: Sequence[Section]) -> int:
    """Bytes of the file inside a header, a table, or a section (or a segment, without sections)."""
    ranges = [(0, header.ehsize), (header.phoff, header.phoff + header.phnum * header.phentsize)]
    ranges.append((header.shoff, header.shoff + header.shnum * header.shentsize))
    if sections:
        ranges += [(s.offset, s.offset + s.size) for s in sections if s.in_file]
    else:
        ranges += [(s.offset, s.offset + s.filesz) for s in header.segments if s.type == PT_LOAD]
    covered, reach = 0, 0
    for start, end in sorted(ranges):
        begin = max(start, reach)
        if end > begin:
            covered += end - begin
            reach = end
    return covered


def machine_name(header: Header) -> str:
    return _ARCHES.get(
        (header.machine, header.wide, header.little),
        f"e_machine {header.machine} ({64 if header.wide else 32}-bit "
        f"{'little' if header.little else 'big'}-endian)",
    )


def code_ranges(segments: Sequence[Segment]) -> list[tuple[int, int]]:
    """The file bytes of the executable loadable segments, sorted and merged."""
    code = [(s.offset, s.offset + s.filesz) for s in segments if s.type == PT_LOAD and s.flags & PF_X]
    return merged_ranges(code)


def loaded_ranges(segments: Sequence[Segment]) -> list[tuple[int, int]]:
    """The file bytes of every loadable segment, sorted and merged."""
    return merged_ranges([(s.offset, s.offset + s.filesz) for s in segments if s.type == PT_LOAD])


def merged_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`ranges` sorted, overlapping and adjacent ones joined, empty ones left out."""
    spans = sorted(ranges)
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        elif end > start:
            merged.append((start, end))
    return merged
