"""ELF facts for `release verify`: what one shared object or executable needs and carries.

A file streaming out of a wheel is planned from its first bytes (`plan_reading`: which ranges to
keep, which are loaded) and described once it has passed (`describe`); a file already in memory is
described by `inspect_elf`. The format itself is read by `release.inspect.elfformat`.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from release.inspect.elfformat import (
    DT_GNU_HASH,
    DT_HASH,
    DT_NEEDED,
    DT_RPATH,
    DT_RUNPATH,
    DT_SONAME,
    DT_STRSZ,
    DT_STRTAB,
    DT_VERNEED,
    DT_VERNEEDNUM,
    ELF_MAGIC,
    ET_EXEC,
    MAX_DYNAMIC,
    MAX_NOTES,
    PT_DYNAMIC,
    PT_INTERP,
    PT_NOTE,
    SHT_DYNAMIC,
    SHT_GNU_HASH,
    SHT_GNU_VERNEED,
    SHT_HASH,
    ElfFormatError,
    Header,
    Image,
    MissingRange,
    Section,
    address_to_offset,
    check_table,
    code_ranges,
    covered_bytes,
    dynamic_entries,
    linked_strings,
    loaded_ranges,
    machine_name,
    read_header,
    read_sections,
    read_segments,
    section_bytes,
    string_at,
    version_needs,
    walk_notes,
)
from release.inspect.versions import max_required
from release.wheel.files import open_regular
from release.wheel.inflate import crc32


class ElfReadError(Exception):
    """A file starts like an ELF file but cannot be parsed (the message says why)."""


@dataclass(frozen=True)
class ElfInfo:
    """What the verifier needs to know about one ELF file of a wheel."""

    path: str
    size: int
    executable: bool
    needed: tuple[str, ...]
    soname: str | None
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    version_requirements: tuple[tuple[str, str], ...]
    """(library file, version name) pairs from `.gnu.version_r`, e.g. ('libc.so.6', 'GLIBC_2.34')."""
    debug_sections: tuple[str, ...]
    device_sections: tuple[str, ...]
    architectures: tuple[str, ...]
    code_sha256: str
    """sha256 of the `CodeFingerprint` of `.text` (of the executable segments without section
    headers) and of the symbol hash table (a fingerprint of the exported names), or of the whole
    file when it has no code. Renaming a copy (file name, SONAME) keeps it."""
    machine: str = "x86_64"
    """The platform architecture it is built for (`x86_64`, `aarch64`, `i686`…), as tags spell it."""
    padding: int = 0
    """Bytes of the file that belong to no section and no header: alignment padding."""
    comment: tuple[str, ...] = ()
    """The strings of its `.comment` section: the compilers (and linker) that made it, e.g.
    'GCC: (Debian 14.2.0-19) 14.2.0' (at most `MAX_COMMENT_STRINGS`, from its first `MAX_COMMENT` bytes)."""

    def max_version(self, prefix: str) -> str | None:
        """The newest version with this prefix required (`GLIBC` -> '2.34'), or None."""
        return max_required(self.version_requirements, prefix)


def is_elf(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC


# --- one file's facts ----------------------------------------------------------------------------

HEAD_KEEP = 8 << 20
"""The first bytes of a large file kept while it streams: its dynamic symbols and strings."""
TAIL_KEEP = 64 << 10
"""Bytes kept before the section header table: the section names usually end there."""
MAX_SECTION_TABLE = 8 << 20
MAX_COMMENT = 16 << 10
"""Bytes of a `.comment` section read at most (real ones hold a few strings, merged by the linker)."""
MAX_COMMENT_STRINGS = 32
MAX_COMMENT_LENGTH = 200
AROUND_LOAD, SEGMENT_HEAD, TABLE_WINDOW = 64 << 10, 256 << 10, 1 << 20
"""Bytes kept around each loadable segment's bytes (before, after: where `.comment` and section
names lie) and from its start (patchelf puts the tables it moves there); bytes kept from the start
of a table that only its section header gives a size to."""
PHDRS_WITHIN = 1 << 20
"""The program headers must lie in the file's first MiB (every linker puts them after the header)."""
Architectures = Callable[[Sequence[tuple[int, int]]], tuple[str, ...]]
Fingerprint = Callable[[Sequence[tuple[int, int]]], bytes]


class CodeFingerprint:
    """What identifies a library's code, built as its bytes pass: the length and CRC-32 of its code
    and the sha256 of the first MiB. A renamed copy has the same one; another library (other code,
    or the same code at other addresses) another. Cheaper than a second sha256 over hundreds of MB."""

    SAMPLE = 1 << 20

    def __init__(self) -> None:
        self.length = 0
        self.crc = 0
        self.sample = hashlib.sha256()

    def update(self, data: bytes | memoryview) -> None:
        if self.length < self.SAMPLE:
            self.sample.update(data[: self.SAMPLE - self.length])
        self.crc = crc32(data, self.crc)
        self.length += len(data)

    def digest(self) -> bytes:
        return self.length.to_bytes(8, "little") + self.crc.to_bytes(4, "little") + self.sample.digest()


def _unreadable(path: str, exc: Exception) -> ElfReadError:
    return ElfReadError(f"{path}: not a readable ELF file ({exc})")


@dataclass(frozen=True)
class Plan:
    """What to keep of an ELF file while it streams, decided from its first bytes."""

    keep: tuple[tuple[int, int], ...]
    loaded: tuple[tuple[int, int], ...]
    """The loadable segments: GPU code is loaded, so only these are searched for it."""
    dynamic: tuple[int, int] | None = None
    """The dynamic segment: once it has passed, `dynamic_keep` adds the tables it names."""


def plan_reading(path: str, head: bytes, size: int) -> Plan:
    """The byte ranges to keep (headers, dynamic and note segments, the section table) and the
    loaded ones, from the first bytes of the file; `ElfReadError` for a malformed header."""
    try:
        return _plan(head, size)
    except (ElfFormatError, struct.error) as exc:
        raise _unreadable(path, exc) from None


def _plan(head: bytes, size: int) -> Plan:
    header = read_header(head, size)
    if header.phoff + header.phnum * header.phentsize > min(size, PHDRS_WITHIN, len(head)):
        msg = f"program headers ({header.phnum} at {header.phoff}) not within the file's first MiB"
        raise ElfFormatError(msg)
    segments = read_segments(header, Image(size, [(0, head)]))
    keep = [(0, min(size, HEAD_KEEP))]
    # Past the end of each loadable segment's bytes lies `.comment`; before a segment that patchelf
    # added, the section names, and at its start the tables it moved: kept, they are not read again.
    for start, end in loaded_ranges(segments):
        keep += [
            (max(0, start - AROUND_LOAD), min(end, start + SEGMENT_HEAD)),
            (end, min(size, end + AROUND_LOAD)),
        ]
    limits = {PT_DYNAMIC: MAX_DYNAMIC, PT_NOTE: MAX_NOTES, PT_INTERP: 4096}
    dynamic = None
    for seg in segments:
        if seg.type == PT_DYNAMIC:
            dynamic = (seg.offset, seg.offset + seg.filesz)
        if seg.type in limits:
            if seg.filesz > limits[seg.type]:
                msg = f"a segment of type {seg.type} holds {seg.filesz} bytes (more than {limits[seg.type]})"
                raise ElfFormatError(msg)
            keep.append((seg.offset, seg.offset + seg.filesz))
    if header.shoff:
        check_table(header, "section header", header.shoff, header.shnum, header.shentsize)
        table = header.shnum * header.shentsize
        if table > MAX_SECTION_TABLE:
            msg = f"a section header table of {table} bytes"
            raise ElfFormatError(msg)
        keep.append((max(0, header.shoff - TAIL_KEEP), header.shoff + table))
    return Plan(tuple(keep), tuple(loaded_ranges(segments)), dynamic)


def dynamic_keep(image: Image) -> list[tuple[int, int]]:
    """The ranges the dynamic entries name (string table, version needs, symbol hash table), kept as
    the file streams on: not read again where they lie past its first bytes (patchelf moves
    `.dynstr` to the end). Empty where the entries do not parse (`describe` says why)."""
    try:
        header = read_header(image.read(0, min(image.size, 64)), image.size)
        segment = next(s for s in read_segments(header, image) if s.type == PT_DYNAMIC)
        values = dict(dynamic_entries(header, image.read(segment.offset, segment.filesz)))
    except (ElfFormatError, MissingRange, struct.error, StopIteration):
        return []
    sizes = {DT_STRTAB: values.get(DT_STRSZ, 0), DT_VERNEED: TABLE_WINDOW, DT_GNU_HASH: TABLE_WINDOW}
    places = {tag: address_to_offset(header, values[tag]) for tag in (*sizes, DT_HASH) if tag in values}
    return [(w[0], w[0] + min(sizes.get(t, TABLE_WINDOW), w[1], MAX_DYNAMIC)) for t, w in places.items() if w]


def tables_needed(path: str, image: Image) -> list[tuple[int, int]]:
    """The sections `describe` reads beyond the headers (section names, the dynamic section, the
    version-needed section, their string tables, the symbol hash table), as byte ranges. Raises
    `MissingRange` when even the section header table was not kept."""
    try:
        header = read_header(image.read(0, min(image.size, 64)), image.size)
        read_segments(header, image)
        sections = read_sections(header, image)
    except (ElfFormatError, struct.error) as exc:
        raise _unreadable(path, exc) from None
    wanted = {sections[header.shstrndx]} if sections and header.shstrndx else set()
    extra: list[tuple[int, int]] = []
    comment = comment_section(image, sections, header.shstrndx)
    if comment is not None:
        extra.append((comment.offset, comment.offset + min(comment.size, MAX_COMMENT)))
    for section in sections:
        if section.type in (SHT_DYNAMIC, SHT_GNU_VERNEED):
            wanted.add(section)
            if 0 < section.link < len(sections):
                wanted.add(sections[section.link])
        elif section.type in (SHT_GNU_HASH, SHT_HASH):
            wanted.add(section)
    return sorted([(s.offset, s.offset + s.size) for s in wanted if s.in_file] + extra)


def comment_section(image: Image, sections: Sequence[Section], shstrndx: int) -> Section | None:
    """The `.comment` section, when the section names are at hand (None otherwise)."""
    if not sections or not shstrndx:
        return None
    names = sections[shstrndx]
    if not names.in_file or not image.holds(names.offset, names.size):
        return None
    table = section_bytes(image, names)
    return next(
        (
            s
            for s in sections
            if s.in_file
            and 0 <= s.name_offset < len(table)
            and table[s.name_offset : s.name_offset + 9] == b".comment\0"
        ),
        None,
    )


def _comment(image: Image, section: Section | None) -> tuple[str, ...]:
    return comment_strings(image.read(section.offset, min(section.size, MAX_COMMENT))) if section else ()


def comment_strings(data: bytes) -> tuple[str, ...]:
    """The distinct printable strings of a `.comment` section's bytes, in order, each cut to
    `MAX_COMMENT_LENGTH` characters, at most `MAX_COMMENT_STRINGS` of them."""
    found: dict[str, None] = {}
    for raw in data[:MAX_COMMENT].split(b"\0"):
        text = raw.decode("utf-8", errors="replace").strip()[:MAX_COMMENT_LENGTH]
        if text and text.isprintable():
            found[text] = None
            if len(found) == MAX_COMMENT_STRINGS:
                break
    return tuple(found)


def describe(
    path: str,
    image: Image,
    *,
    device_sections: Sequence[str],
    fingerprint: Fingerprint,
    file_digest: bytes,
    architectures: Architectures,
) -> ElfInfo:
    """The facts of one ELF file from its kept bytes: `fingerprint` gives the `CodeFingerprint`
    digest of byte ranges, `file_digest` is the sha256 of the whole file; `architectures` names the GPU
    architectures of the containers inside given byte ranges. Raises `MissingRange` when a byte it
    needs was not kept, `ElfReadError` when the file is malformed."""
    try:
        return _describe(path, image, device_sections, (fingerprint, architectures), file_digest)
    except (ElfFormatError, struct.error) as exc:
        raise _unreadable(path, exc) from None


def _describe(
    path: str,
    image: Image,
    device_sections: Sequence[str],
    readers: tuple[Fingerprint, Architectures],
    whole: bytes,
) -> ElfInfo:
    header = read_header(image.read(0, min(image.size, 64)), image.size)
    segments = read_segments(header, image)
    sections = read_sections(header, image)
    table = section_bytes(image, sections[header.shstrndx]) if sections and header.shstrndx else b""
    names = [string_at(table, s.name_offset, "section name") if table else "" for s in sections]
    for seg in segments:
        if seg.type == PT_NOTE:
            walk_notes(header, image.read(seg.offset, seg.filesz), seg.align)
    entries, strings = _dynamic(header, sections, image)
    found: dict[int, list[str]] = {DT_NEEDED: [], DT_SONAME: [], DT_RPATH: [], DT_RUNPATH: []}
    for tag, value in entries:
        if tag in found:
            found[tag].append(string_at(strings, value, f"dynamic tag {tag}"))
    search = {tag: [p for text in found[tag] for p in text.split(":") if p] for tag in (DT_RPATH, DT_RUNPATH)}
    device = [s for s in sections if names[s.index] in device_sections and s.in_file]
    hashes = next((s for s in sections if s.type in (SHT_GNU_HASH, SHT_HASH) and s.in_file), None)
    fingerprint, architectures = readers
    text = [(s.offset, s.offset + s.size) for s in sections if names[s.index] == ".text" and s.in_file]
    code = text or code_ranges(segments)
    if code:
        table = section_bytes(image, hashes) if hashes else b""
        code_sha256 = hashlib.sha256(fingerprint(code) + table).hexdigest()
    else:
        code_sha256 = whole.hex()
    comment = next((s for s in sections if names[s.index] == ".comment" and s.in_file), None)
    return ElfInfo(
        path=path,
        size=image.size,
        executable=header.type == ET_EXEC or any(s.type == PT_INTERP for s in segments),
        needed=tuple(found[DT_NEEDED]),
        soname=found[DT_SONAME][0] if found[DT_SONAME] else None,
        rpath=tuple(search[DT_RPATH]),
        runpath=tuple(search[DT_RUNPATH]),
        version_requirements=tuple(_versions(header, sections, image, entries, strings)),
        debug_sections=tuple(n for n in names if n.startswith((".debug_", ".zdebug_"))),
        device_sections=tuple(names[s.index] for s in device),
        architectures=architectures([(s.offset, s.offset + s.size) for s in device]),
        code_sha256=code_sha256,
        machine=machine_name(header),
        padding=max(0, image.size - covered_bytes(header, sections)),
        comment=_comment(image, comment),
    )


Entries = list[tuple[int, int]]


def _dynamic(header: Header, sections: Sequence[Section], image: Image) -> tuple[Entries, bytes]:
    """The dynamic entries and their string table: from the sections, else from the segments."""
    section = next((s for s in sections if s.type == SHT_DYNAMIC), None)
    if section is not None:
        if section.size > MAX_DYNAMIC:
            msg = f"a dynamic section of {section.size} bytes"
            raise ElfFormatError(msg)
        entries = dynamic_entries(header, section_bytes(image, section))
        return entries, linked_strings(sections, section, image)
    segment = next((s for s in header.segments if s.type == PT_DYNAMIC), None)
    if segment is None:
        return [], b""
    entries = dynamic_entries(header, image.read(segment.offset, segment.filesz))
    values = dict(entries)
    where = address_to_offset(header, values.get(DT_STRTAB, -1))
    if where is None:
        return entries, b""
    length = values.get(DT_STRSZ, 0)
    if length > where[1]:
        msg = f"DT_STRSZ {length} runs past its segment"
        raise ElfFormatError(msg)
    return entries, image.read(where[0], length)


def _versions(
    header: Header, sections: Sequence[Section], image: Image, entries: Entries, strings: bytes
) -> list[tuple[str, str]]:
    """The version requirements: from the version-needed section, else from DT_VERNEED."""
    section = next((s for s in sections if s.type == SHT_GNU_VERNEED), None)
    if section is not None:
        names = linked_strings(sections, section, image)
        return version_needs(header, section_bytes(image, section), section.info, names)
    values = dict(entries)
    if sections or DT_VERNEED not in values:
        return []
    where = address_to_offset(header, values[DT_VERNEED])
    if where is None:
        msg = "DT_VERNEED points outside the loadable segments"
        raise ElfFormatError(msg)
    data = image.read(where[0], min(where[1], MAX_DYNAMIC))
    return version_needs(header, data, values.get(DT_VERNEEDNUM, 0), strings)


MAX_FETCH_ROUNDS = 8


def read_elf_file(path: Path) -> ElfInfo:
    """The dynamic facts of an ELF file on disk (NEEDED, SONAME, search paths, versions), reading
    only its headers and tables, not its code: a GPU runtime's libraries run to hundreds of MB.
    Code fingerprints and GPU architectures are left empty. `ElfReadError` when it is malformed,
    `OSError` when it cannot be read."""
    with open_regular(path) as stream:
        size = os.fstat(stream.fileno()).st_size

        def fetch(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, bytes]]:
            pieces = []
            for start, end in ranges:
                stream.seek(start)
                pieces.append((start, stream.read(max(0, min(end, size) - start))))
            return pieces

        head = fetch([(0, min(size, PHDRS_WITHIN))])
        plan = plan_reading(str(path), head[0][1], size)
        pieces = head + fetch(plan.keep)
        pieces += fetch(tables_needed(str(path), Image(size, pieces)))
        for _round in range(MAX_FETCH_ROUNDS):
            try:
                return describe(
                    str(path), Image(size, pieces), device_sections=(), fingerprint=lambda _r: b"",
                    file_digest=b"", architectures=lambda _r: (),
                )  # fmt: skip
            except MissingRange as missing:
                pieces += fetch([(missing.offset, missing.offset + missing.length)])
    msg = f"{path}: not a readable ELF file (its tables point at more than {MAX_FETCH_ROUNDS} places)"
    raise ElfReadError(msg)


def inspect_elf(
    path: str,
    data: bytes,
    *,
    device_sections: Sequence[str] = (),
    architecture_names: re.Pattern[bytes] | None = None,
) -> ElfInfo:
    """The facts of one ELF file held whole in memory; `ElfReadError` when it is malformed.
    `architecture_names` finds the GPU architectures in the device sections (none by default)."""
    from release.inspect.devicecode import NO_ARCHITECTURES, DeviceScanner, outside  # noqa: PLC0415

    names = architecture_names or NO_ARCHITECTURES

    plan = plan_reading(path, data[:PHDRS_WITHIN], len(data))
    scanner = DeviceScanner(len(data), names)
    for start, end in plan.loaded:
        scanner.feed(start, data[start:end])

    def architectures(ranges: Sequence[tuple[int, int]]) -> tuple[str, ...]:
        unscanned = outside(ranges, plan.loaded)
        again = DeviceScanner(len(data), names)
        for start, end in unscanned:
            again.feed(start, data[start:end])
        return tuple(sorted({*scanner.architectures(ranges), *again.architectures(unscanned)}))

    def fingerprint(ranges: Sequence[tuple[int, int]]) -> bytes:
        code = CodeFingerprint()
        with memoryview(data) as view:
            for start, end in ranges:
                code.update(view[start:end])
        return code.digest()

    return describe(
        path,
        Image.whole(data),
        device_sections=device_sections,
        fingerprint=fingerprint,
        file_digest=hashlib.sha256(data).digest(),
        architectures=architectures,
    )


def file_regions(data: bytes, path: str = "ELF file") -> list[tuple[str, int, int]]:
    """(name, offset, size) of the parts of an ELF file held whole in memory: the ELF header, the
    program and section header tables and every section with bytes in the file, in file order, so
    that two builds of one library can be compared part by part (`release reproduce`).
    `ElfReadError` when it is malformed."""
    try:
        header = read_header(data[:64], len(data))
        image = Image.whole(data)
        sections = read_sections(header, image)
        table = section_bytes(image, sections[header.shstrndx]) if sections and header.shstrndx else b""
        regions = [("ELF header", 0, header.ehsize)]
        if header.phnum:
            regions.append(("program headers", header.phoff, header.phnum * header.phentsize))
        if header.shnum:
            regions.append(("section headers", header.shoff, header.shnum * header.shentsize))
        for s in sections:
            if s.in_file:
                name = string_at(table, s.name_offset, "section name") if table else f"section {s.index}"
                regions.append((name or f"section {s.index}", s.offset, s.size))
    except (ElfFormatError, MissingRange, struct.error) as exc:
        raise _unreadable(path, exc) from None
    return sorted(regions, key=lambda r: (r[1], r[0]))
