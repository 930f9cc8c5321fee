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

import struct
from dataclasses import dataclass

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
    Image,
    merged_ranges,
    read_header,
    read_sections,
)

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
