"""The bytes of an ELF file that a reader of its symbols needs: a copy holding only these, at their
offsets, with a hole (zeros) everywhere else, reads as the file does to such a tool.

abi3audit (through pyelftools) opens the header and the section table, makes an object of every
section (a symbol table looks up its string table's header; a hash table, an attributes section
and a compressed section read their own headers as they are made), then reads `.comment`, `.symtab`
and `.dynsym` with their strings. A wheel's largest libraries are mostly code and GPU binaries that
it never reads: its copy of a 850 MB library is a sparse file of a few MB, written from what
verify's one pass over the wheel kept, not inflated a second time.
"""

from __future__ import annotations

import contextlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from release.inspect.elf import ElfReadError, comment_section
from release.inspect.elfformat import (
    SHF_COMPRESSED,
    SHT_ATTRIBUTES,
    SHT_DYNAMIC,
    SHT_DYNSYM,
    SHT_GNU_HASH,
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    SHT_GNU_VERSYM,
    SHT_HASH,
    SHT_NOTE,
    SHT_STRTAB,
    SHT_SYMTAB,
    SHT_SYMTAB_SHNDX,
    ElfFormatError,
    Header,
    Image,
    MissingRange,
    Section,
    address_to_offset,
    dynamic_entries,
    merged_ranges,
    read_header,
    read_sections,
    read_segments,
)
from release.wheel.files import open_regular

PT_DYNAMIC = 2
DT_STRTAB, DT_SYMTAB = 5, 6

_WHOLE = frozenset(
    {
        SHT_SYMTAB,
        SHT_STRTAB,  # the section names, symbol names, dynamic strings
        SHT_HASH,
        SHT_DYNAMIC,
        SHT_NOTE,
        SHT_DYNSYM,
        SHT_SYMTAB_SHNDX,
        SHT_GNU_HASH,
        SHT_GNU_VERDEF,
        SHT_GNU_VERNEED,
        SHT_GNU_VERSYM,
        SHT_ATTRIBUTES,  # parsed as the section is made
    }
)
"""Section types whose whole content is kept."""
LIMIT = 64 << 20
"""Bytes of tables one file's copy may hold; a file that needs more is copied whole instead."""


@dataclass(frozen=True)
class SymbolRanges:
    ranges: list[tuple[int, int]]
    """What a reader of the symbols reads, merged and in order."""
    names: list[tuple[int, int]]
    """The string tables the symbol tables name (where every symbol's name is)."""


@dataclass(frozen=True)
class SymbolCopy:
    """What a copy of one shared object is written from."""

    pieces: list[tuple[int, bytes]]
    python: bool
    """Some symbol table's strings hold `Py`: without it, no symbol can be one of Python's C API
    (every name there starts with `Py` or `_Py`), and an audit of them has nothing to judge."""
    doubt: str = ""
    """Why the section headers' `.dynsym` is not the table the loader binds through (`DT_SYMTAB`
    and `DT_STRTAB` of the dynamic table name another): then the copy is the whole file, audited
    as it is, and the finding warns ('' when they agree)."""


def symbol_ranges(path: str, image: Image) -> SymbolRanges | None:
    """The byte ranges of the file (`image`: with its section table kept) that a reader of its
    symbols reads; None when they exceed `LIMIT`. `ElfReadError` when the tables cannot be read."""
    try:
        header = read_header(image.read(0, min(image.size, 64)), image.size)
        sections = read_sections(header, image)
    except (ElfFormatError, struct.error) as exc:
        msg = f"{path}: not a readable ELF file ({exc})"
        raise ElfReadError(msg) from None
    ranges = [(0, max(header.ehsize, 64 if header.wide else 52))]
    if header.phnum:
        ranges.append((header.phoff, header.phoff + header.phnum * header.phentsize))
    if header.shnum:
        ranges.append((header.shoff, header.shoff + header.shnum * header.shentsize))
    with contextlib.suppress(ElfFormatError, MissingRange, struct.error):
        dynamic = [s for s in read_segments(header, image) if s.type == PT_DYNAMIC]
        ranges.extend((d.offset, d.offset + min(d.filesz, _DYNAMIC_LIMIT)) for d in dynamic[:1])
    comment = comment_section(image, sections, header.shstrndx)
    chdr = 24 if header.wide else 12
    names = [
        (linked.offset, linked.offset + linked.size)
        for s in sections
        if s.type in (SHT_SYMTAB, SHT_DYNSYM)
        and 0 < s.link < len(sections)
        and (linked := sections[s.link]).in_file
    ]
    for section in sections:
        if not section.in_file:
            continue
        if section.type in _WHOLE or section == comment:
            ranges.append((section.offset, section.offset + section.size))
        elif section.flags & SHF_COMPRESSED:
            ranges.append((section.offset, section.offset + min(section.size, chdr)))
    merged = merged_ranges([(lo, min(hi, image.size)) for lo, hi in ranges])
    if sum(hi - lo for lo, hi in merged) > LIMIT:
        return None
    return SymbolRanges(merged, [(lo, min(hi, image.size)) for lo, hi in names])


_DYNAMIC_LIMIT = 1 << 20
"""Bytes of a dynamic segment read (one entry is 16 bytes: 65,536 entries)."""


def symbol_doubt(image: Image) -> str:
    """Why the `.dynsym` the section headers name (with the string table its `sh_link` names) is
    not the symbol table the loader binds through (`DT_SYMTAB`, `DT_STRTAB`); '' when it is, or
    when the file has no dynamic table to bind through. `image` holds the headers, the section
    table and the dynamic segment (`symbol_ranges`)."""
    try:
        header = read_header(image.read(0, min(image.size, 64)), image.size)
        segments = read_segments(header, image)
        dynamic = next((s for s in segments if s.type == PT_DYNAMIC), None)
        if dynamic is None:
            return ""
        table = image.read(dynamic.offset, min(dynamic.filesz, _DYNAMIC_LIMIT))
        values = dict(dynamic_entries(header, table))
        sections = read_sections(header, image)
    except (ElfFormatError, MissingRange, struct.error) as exc:
        return f"its dynamic table cannot be read against its section headers ({exc})"
    if DT_SYMTAB not in values:
        return ""
    symtab = address_to_offset(header, values[DT_SYMTAB])
    strtab = address_to_offset(header, values[DT_STRTAB]) if DT_STRTAB in values else None
    found = [s for s in sections if s.type == SHT_DYNSYM]
    if not found:
        return "DT_SYMTAB names a symbol table, but no section header is a .dynsym"
    dynsym = found[0]
    if symtab is None or dynsym.offset != symtab[0]:
        return f".dynsym is at offset {dynsym.offset}, but DT_SYMTAB points elsewhere"
    linked: Section | None = sections[dynsym.link] if 0 < dynsym.link < len(sections) else None
    if linked is None or linked.type != SHT_STRTAB:
        return f".dynsym's sh_link ({dynsym.link}) names no string table"
    if strtab is None or linked.offset != strtab[0]:
        return f".dynsym's strings are at offset {linked.offset}, but DT_STRTAB points elsewhere"
    return ""


STB_LOCAL = 0
SHN_UNDEF = 0


def python_symbols(path: Path) -> tuple[frozenset[str], frozenset[str]]:
    """(defined, undefined) global names starting with `Py`/`_Py` in the symbol tables of the ELF
    file at `path` (a copy `symbol_copy` wrote); empty where the tables cannot be read. The
    defined ones are the module's own (`PyInit_x`, `PyModExport_x`, PEP 793): not the API it uses."""
    defined: set[str] = set()
    undefined: set[str] = set()
    try:
        with open_regular(path) as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(64)
            header = read_header(head, size)
            fh.seek(header.shoff)
            table = fh.read(min(header.shnum * header.shentsize, LIMIT))
            image = Image(size, [(0, head), (header.shoff, table)])
            sections = read_sections(header, image)
            for section in sections:
                if section.type not in (SHT_SYMTAB, SHT_DYNSYM) or not 0 < section.link < len(sections):
                    continue
                strings = sections[section.link]
                if section.size > LIMIT or strings.size > LIMIT or not section.entsize:
                    continue
                fh.seek(section.offset)
                raw = fh.read(section.size)
                fh.seek(strings.offset)
                names = fh.read(strings.size)
                _collect(header, raw, section.entsize, names, into=(defined, undefined))
    except (OSError, ElfFormatError, MissingRange, struct.error):
        return frozenset(), frozenset()
    return frozenset(defined), frozenset(undefined)


def _collect(
    header: Header, raw: bytes, entsize: int, names: bytes, *, into: tuple[set[str], set[str]]
) -> None:
    """Add the global `Py`/`_Py` names of one symbol table (`raw`) to (defined, undefined)."""
    wide, order = header.wide, header.order
    defined, undefined = into
    fmt = struct.Struct(order + ("IBBHQQ" if wide else "IIIBBH"))
    for at in range(0, len(raw) - fmt.size + 1, entsize):
        fields = fmt.unpack_from(raw, at)
        if wide:
            name, info, _other, shndx = fields[0], fields[1], fields[2], fields[3]
        else:
            name, info, _other, shndx = fields[0], fields[3], fields[4], fields[5]
        if info >> 4 == STB_LOCAL or not 0 <= name < len(names):
            continue
        end = names.find(b"\0", name)
        text = names[name : end if end >= 0 else len(names)]
        if not text.startswith((b"Py", b"_Py")):
            continue
        (undefined if shndx == SHN_UNDEF else defined).add(text.decode("ascii", "replace"))
