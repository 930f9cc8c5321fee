"""Byte-level builders for hostile wheels: compression bombs, ELF files, raw zip archives.

Stdlib only (struct, zlib, bz2, lzma, hashlib). Nothing here calls the toolkit: the point is to
produce the exact bytes a hostile uploader could, including the lies `zipfile` would never write.

* `deflate_pieces`: a raw deflate stream made of literal pieces (stored blocks) and runs of one
  byte (a hand-built dynamic-Huffman block in which every 258-byte match costs two bits): runs of
  gigabytes cost a megabyte and no compression time.
* `bzip2_bomb`: one bzip2 block of 45 MB of zeros (compressed once, ~40 bytes) repeated bit-exactly.
* `lzma_bomb`: a raw LZMA1 stream written for the decoder, not by an encoder: after one literal,
  the range decoder is held at `code == range - 1` and fed 0xFF bytes, so every bit it decodes is 1
  and every symbol is a 273-byte rep3 match: ~6600 output bytes per input byte.
* `ElfImage`: a minimal, well-formed ELF shared object (ELF64/ELF32, either byte order) with
  .dynstr, .dynamic, .gnu.version_r and .text, whose header fields can then be patched by name.
* `ZipEntry`/`build_zip`: a zip writer that writes whatever it is told (sizes, CRCs, offsets,
  external attributes, names with NUL bytes, overlapping entries, comments).
* `wheel_entries`: the members of a valid wheel (METADATA, WHEEL, RECORD with real hashes).
"""

from __future__ import annotations

import base64
import bz2
import functools
import hashlib
import io
import lzma
import stat
import struct
import zipfile
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# --- deflate ------------------------------------------------------------------------------------


class _BitWriter:
    """Deflate's bit order: fields LSB first, Huffman codes MSB first."""

    def __init__(self) -> None:
        self.value = 0
        self.nbits = 0

    def bits(self, value: int, count: int) -> None:
        self.value |= (value & ((1 << count) - 1)) << self.nbits
        self.nbits += count

    def code(self, code: int, length: int) -> None:
        reversed_code = int(format(code, f"0{length}b")[::-1], 2) if length else 0
        self.bits(reversed_code, length)

    def zeros(self, count: int) -> None:
        self.nbits += count

    def align(self) -> None:
        self.nbits += -self.nbits % 8

    def getvalue(self) -> bytes:
        return self.value.to_bytes((self.nbits + 7) // 8, "little")


def _stored(writer: _BitWriter, data: bytes, *, final: bool) -> None:
    chunks = [data[i : i + 0xFFFF] for i in range(0, len(data), 0xFFFF)] or [b""]
    for index, chunk in enumerate(chunks):
        writer.bits(1 if final and index == len(chunks) - 1 else 0, 1)
        writer.bits(0, 2)  # BTYPE 00: stored
        writer.align()
        writer.bits(len(chunk), 16)
        writer.bits(len(chunk) ^ 0xFFFF, 16)
        if chunk:
            writer.bits(int.from_bytes(chunk, "little"), 8 * len(chunk))


def _match_run(writer: _BitWriter, matches: int) -> None:
    """One dynamic-Huffman block of `matches` (length 258, distance 1) copies, then end-of-block.

    Literal/length code: 285 -> '0', literal 0 -> '10', end-of-block 256 -> '11'.
    Distance code: 0 -> '0', 1 -> '1'. A match is '0' + '0': two zero bits.
    """
    writer.bits(0, 1)  # BFINAL 0
    writer.bits(2, 2)  # BTYPE 10: dynamic
    writer.bits(286 - 257, 5)  # HLIT: literal/length codes 0..285
    writer.bits(2 - 1, 5)  # HDIST: distance codes 0..1
    order = (16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15)
    cl_lengths = {18: 1, 1: 2, 2: 2}  # code-length code: 18 -> '0', 1 -> '10', 2 -> '11'
    writer.bits(18 - 4, 4)  # HCLEN: the first 18 entries of `order` (up to symbol 1)
    for symbol in order[:18]:
        writer.bits(cl_lengths.get(symbol, 0), 3)
    cl_code = {18: (0, 1), 1: (2, 2), 2: (3, 2)}

    def emit(symbol: int, extra: int = 0, extra_bits: int = 0) -> None:
        writer.code(*cl_code[symbol])
        if extra_bits:
            writer.bits(extra, extra_bits)

    # literal/length lengths: 0 -> 2, 1..255 -> 0, 256 -> 2, 257..284 -> 0, 285 -> 1; distances 1, 1.
    emit(2)
    emit(18, 138 - 11, 7)
    emit(18, 117 - 11, 7)
    emit(2)
    emit(18, 28 - 11, 7)
    emit(1)
    emit(1)
    emit(1)
    writer.zeros(2 * matches)
    writer.code(3, 2)  # end of block


def deflate_pieces(pieces: Sequence[bytes | tuple[int, int]]) -> tuple[bytes, int]:
    """A raw deflate stream of `pieces`: bytes are stored as they are; `(byte, count)` is a run of
    one byte value, `count` long, at ~1/1032 of its size. Returns (stream, inflated size)."""
    writer = _BitWriter()
    size = 0
    for piece in pieces:
        if isinstance(piece, bytes):
            _stored(writer, piece, final=False)
            size += len(piece)
            continue
        value, count = piece
        if count <= 0:
            continue
        _stored(writer, bytes([value]), final=False)
        matches, rest = divmod(count - 1, 258)
        if matches:
            _match_run(writer, matches)
        if rest:
            _stored(writer, bytes([value]) * rest, final=False)
        size += count
    _stored(writer, b"", final=True)
    return writer.getvalue(), size


def deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    return compressor.compress(data) + compressor.flush()


def crc_of_pieces(pieces: Sequence[bytes | tuple[int, int]]) -> int:
    """CRC-32 of what `deflate_pieces` inflates to, computed without materialising large runs."""
    crc = 0
    block = bytes(1 << 20)
    for piece in pieces:
        if isinstance(piece, bytes):
            crc = zlib.crc32(piece, crc)
            continue
        value, count = piece
        chunk = block if value == 0 else bytes([value]) * len(block)
        while count > 0:
            take = min(count, len(chunk))
            crc = zlib.crc32(chunk[:take], crc)
            count -= take
    return crc


# --- bzip2 ----------------------------------------------------------------------------------------

_BZ_BLOCK_MAGIC = 0x314159265359
_BZ_EOS_MAGIC = 0x177245385090
BZ2_BLOCK_INPUT = 45_000_000  # zeros: just under one 900k block after bzip2's run-length stage


# One bzip2 block of BZ2_BLOCK_INPUT zeros as libbz2 (level 9) writes it: 287 bits, block magic first.
# Kept as a constant because deriving it compresses 45 MB (about a second); `derive_bzip2_block()`
# recomputes it and tests/hostile/test_generate.py checks the two agree.
_BZ2_BLOCK = (0x18A0AC9329ACE480DB6400AC55A010600008000004100018660294D3292429362A490A4F, 287, 0xC901B6C8)


def _bzip2_block() -> tuple[int, int, int]:
    return _BZ2_BLOCK


@functools.cache
def derive_bzip2_block() -> tuple[int, int, int]:
    """(block bits, bit count, block CRC) of one bzip2 block holding BZ2_BLOCK_INPUT zero bytes."""
    raw = bz2.compress(bytes(BZ2_BLOCK_INPUT), 9)
    total = 8 * len(raw)
    value = int.from_bytes(raw, "big")
    for pad in range(8):
        eos = total - pad - 80
        if (value >> (total - eos - 48)) & ((1 << 48) - 1) == _BZ_EOS_MAGIC:
            break
    else:
        msg = "no bzip2 end-of-stream marker found"
        raise AssertionError(msg)
    nbits = eos - 32
    block = (value >> (total - eos)) & ((1 << nbits) - 1)
    if block >> (nbits - 48) != _BZ_BLOCK_MAGIC:
        msg = "bzip2 stream does not hold exactly one block"
        raise AssertionError(msg)
    crc = (block >> (nbits - 80)) & 0xFFFFFFFF
    return block, nbits, crc


def bzip2_bomb(blocks: int) -> tuple[bytes, int]:
    """A valid single bzip2 stream of `blocks` identical blocks: (stream, inflated size)."""
    block, nbits, crc = _bzip2_block()
    acc = int.from_bytes(b"BZh9", "big")
    bits = 32
    combined = 0
    for _ in range(blocks):
        acc = (acc << nbits) | block
        bits += nbits
        combined = (((combined << 1) | (combined >> 31)) & 0xFFFFFFFF) ^ crc
    acc = (acc << 48) | _BZ_EOS_MAGIC
    acc = (acc << 32) | combined
    bits += 80
    pad = -bits % 8
    acc <<= pad
    bits += pad
    return acc.to_bytes(bits // 8, "big"), blocks * BZ2_BLOCK_INPUT


# --- LZMA -----------------------------------------------------------------------------------------

LZMA_RATIO = 6596  # measured output bytes per input byte of `lzma_bomb` (0xFF fill)


def lzma_bomb(input_bytes: int) -> bytes:
    """A zip method-14 (LZMA) payload: zip's 4-byte LZMA header, the 5 property bytes (lc=3 lp=0
    pb=2, 64 KiB dictionary), then a raw LZMA1 stream of about `input_bytes` bytes that decodes to
    one 0xFF literal followed by 273-byte matches, ~LZMA_RATIO times its size, with no end marker.

    The stream is built for the decoder: its first code word makes the first bit a 0 (a literal)
    and leaves `code == range - 1`; from then on every input byte is 0xFF, which keeps that
    invariant through normalisation, so every decoded bit is 1: match, rep, not rep0, not rep1,
    not rep2 (rep3 = distance 1), long length 273."""
    props = bytes([(2 * 5 + 0) * 9 + 3]) + struct.pack("<I", 1 << 16)
    header = struct.pack("<BBH", 9, 4, len(props)) + props
    first_bound = (0xFFFFFFFF >> 11) * 1024
    stream = b"\x00" + (first_bound - 1).to_bytes(4, "big") + b"\xff" * max(0, input_bytes - 5)
    return header + stream


def lzma_payload(data: bytes) -> bytes:
    """An honest zip method-14 payload of `data` (as zipfile writes it)."""
    filters = [{"id": lzma.FILTER_LZMA1, "lc": 3, "lp": 0, "pb": 2, "dict_size": 1 << 16}]
    props = lzma._encode_filter_properties(filters[0])  # type: ignore[attr-defined]
    compressor = lzma.LZMACompressor(lzma.FORMAT_RAW, filters=filters)
    return struct.pack("<BBH", 9, 4, len(props)) + props + compressor.compress(data) + compressor.flush()


# --- ELF ------------------------------------------------------------------------------------------

EM_386 = 3
EM_PPC64 = 21
EM_X86_64 = 62
EM_AARCH64 = 183
SHT_PROGBITS = 1
SHT_STRTAB = 3
SHT_DYNAMIC = 6
SHT_NOTE = 7
SHT_GNU_VERNEED = 0x6FFFFFFE
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
SHF_COMPRESSED = 0x800
PT_LOAD = 1
PT_DYNAMIC = 2
PT_INTERP = 3
PT_NOTE = 4
DT_NULL = 0
DT_NEEDED = 1
DT_STRTAB = 5
DT_STRSZ = 10
DT_SYMTAB = 6
DT_SYMENT = 11
SHT_DYNSYM = 11
DT_SONAME = 14
DT_RUNPATH = 29
DT_VERNEED = 0x6FFFFFFE
DT_VERNEEDNUM = 0x6FFFFFFF

_EHDR_FIELDS = (
    "e_type", "e_machine", "e_version", "e_entry", "e_phoff", "e_shoff", "e_flags",
    "e_ehsize", "e_phentsize", "e_phnum", "e_shentsize", "e_shnum", "e_shstrndx",
)  # fmt: skip
_SHDR_FIELDS = (
    "sh_name", "sh_type", "sh_flags", "sh_addr", "sh_offset", "sh_size",
    "sh_link", "sh_info", "sh_addralign", "sh_entsize",
)  # fmt: skip
_PHDR64_FIELDS = ("p_type", "p_flags", "p_offset", "p_vaddr", "p_paddr", "p_filesz", "p_memsz", "p_align")
_PHDR32_FIELDS = ("p_type", "p_offset", "p_vaddr", "p_paddr", "p_filesz", "p_memsz", "p_flags", "p_align")


def elf_hash(name: bytes) -> int:
    h = 0
    for c in name:
        h = ((h << 4) + c) & 0xFFFFFFFF
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


@dataclass
class Section:
    name: str
    sh_type: int
    data: bytes
    flags: int = 0
    link: int = 0
    info: int = 0
    align: int = 1
    entsize: int = 0


@dataclass
class ElfImage:
    """A minimal ELF shared object; `build()` lays it out and returns the image (a bytearray
    that the patch helpers then modify in place)."""

    needed: Sequence[str] = ("libc.so.6",)
    soname: str | None = "libhostile.so"
    runpath: str | None = None
    verneed: Sequence[tuple[str, Sequence[str]]] = (("libc.so.6", ("GLIBC_2.2.5",)),)
    text: bytes = b"\x55\x48\x89\xe5\x31\xc0\x5d\xc3" * 4
    machine: int = EM_X86_64
    elfclass: int = 64
    big_endian: bool = False
    interp: bytes | None = None
    extra_sections: Sequence[Section] = ()
    dynamic_null: bool = True
    note_segment: bool = False
    e_type: int = 3  # ET_DYN
    symbols: Sequence[tuple[str, bool]] = ()
    """(name, defined) of global functions in a `.dynsym` (with DT_SYMTAB): defined ones in .text."""
    image: bytearray = field(default_factory=bytearray, init=False)
    section_index: dict[str, int] = field(default_factory=dict, init=False)
    section_offset: dict[str, int] = field(default_factory=dict, init=False)
    dynstr_offsets: dict[str, int] = field(default_factory=dict, init=False)

    @property
    def _e(self) -> str:
        return ">" if self.big_endian else "<"

    @property
    def _w(self) -> str:
        return "Q" if self.elfclass == 64 else "I"

    def _ehdr_format(self) -> str:
        w = self._w
        return f"{self._e}HHI{w}{w}{w}IHHHHHH"

    def _shdr_format(self) -> str:
        w = self._w
        return f"{self._e}II{w}{w}{w}{w}II{w}{w}"

    def _phdr_format(self) -> str:
        return f"{self._e}IIQQQQQQ" if self.elfclass == 64 else f"{self._e}IIIIIIII"

    def build(self) -> bytearray:
        e = self._e
        strings = [*self.needed, *(f for f, _ in self.verneed)]
        strings += [v for _, vs in self.verneed for v in vs]
        strings += [s for s in (self.soname, self.runpath) if s]
        strings += [name for name, _defined in self.symbols]
        dynstr = bytearray(b"\0")
        for s in strings:
            if s not in self.dynstr_offsets:
                self.dynstr_offsets[s] = len(dynstr)
                dynstr += s.encode() + b"\0"
        verneed = bytearray()
        for i, (file, versions) in enumerate(self.verneed):
            last = i == len(self.verneed) - 1
            size = 16 + 16 * len(versions)
            file_at = self.dynstr_offsets[file]
            verneed += struct.pack(f"{e}HHIII", 1, len(versions), file_at, 16, 0 if last else size)
            for j, version in enumerate(versions):
                nxt = 0 if j == len(versions) - 1 else 16
                verneed += struct.pack(
                    f"{e}IHHII", elf_hash(version.encode()), 0, 2 + j, self.dynstr_offsets[version], nxt
                )
        sections: list[Section] = []
        if self.interp is not None:
            sections.append(Section(".interp", SHT_PROGBITS, self.interp, SHF_ALLOC))
        sections.append(Section(".dynstr", SHT_STRTAB, bytes(dynstr), SHF_ALLOC))
        if self.verneed:
            sections.append(
                Section(".gnu.version_r", SHT_GNU_VERNEED, bytes(verneed), SHF_ALLOC,
                        info=len(self.verneed), align=8)
            )
        if self.symbols:
            text_index = len(sections) + 2  # .dynsym comes next, then .text (indexes start at 1)
            wide = self.elfclass == 64
            entry = f"{e}IBBHQQ" if wide else f"{e}IIIBBH"
            rows = [bytes(struct.calcsize(entry))]
            for name, defined in self.symbols:
                shndx = text_index if defined else 0
                fields = (self.dynstr_offsets[name], 0x12, 0, shndx, 0, 0) if wide else (
                    self.dynstr_offsets[name], 0, 0, 0x12, 0, shndx)
                rows.append(struct.pack(entry, *fields))
            sections.append(Section(".dynsym", SHT_DYNSYM, b"".join(rows), SHF_ALLOC, info=1, align=8,
                                    entsize=struct.calcsize(entry)))
        sections.append(Section(".text", SHT_PROGBITS, self.text, SHF_ALLOC | SHF_EXECINSTR, align=16))
        dyn_size = 16 if self.elfclass == 64 else 8
        sections.append(Section(".dynamic", SHT_DYNAMIC, b"", SHF_ALLOC, align=8, entsize=dyn_size))
        sections.extend(self.extra_sections)
        sections.append(Section(".shstrtab", SHT_STRTAB, b""))
        shstrtab = bytearray(b"\0")
        name_offsets = []
        for section in sections:
            name_offsets.append(len(shstrtab))
            shstrtab += section.name.encode() + b"\0"
        ehsize = 64 if self.elfclass == 64 else 52
        phentsize = 56 if self.elfclass == 64 else 32
        phnum = 2 + (self.interp is not None) + self.note_segment
        offset = ehsize + phnum * phentsize
        placed: list[tuple[Section, int, bytes]] = []
        dyn_index = -1
        for index, section in enumerate(sections, 1):
            offset += -offset % max(section.align, 1)
            if section.name == ".dynamic":
                dyn_index = len(placed)
                data = bytes(dyn_size * (8 + len(self.needed) + 2 * bool(self.symbols)))  # filled below
            elif section.name == ".shstrtab":
                data = bytes(shstrtab)
            else:
                data = section.data
            placed.append((section, offset, data))
            self.section_index[section.name] = index
            self.section_offset[section.name] = offset
            offset += len(data)
        # the dynamic section, now that addresses are known (vaddr == file offset)
        tags: list[tuple[int, int]] = [(DT_NEEDED, self.dynstr_offsets[n]) for n in self.needed]
        if self.soname:
            tags.append((DT_SONAME, self.dynstr_offsets[self.soname]))
        if self.runpath:
            tags.append((DT_RUNPATH, self.dynstr_offsets[self.runpath]))
        tags += [(DT_STRTAB, self.section_offset[".dynstr"]), (DT_STRSZ, len(dynstr))]
        if self.symbols:
            entsize = 24 if self.elfclass == 64 else 16
            tags += [(DT_SYMTAB, self.section_offset[".dynsym"]), (DT_SYMENT, entsize)]
        if self.verneed:
            tags += [(DT_VERNEED, self.section_offset[".gnu.version_r"]), (DT_VERNEEDNUM, len(self.verneed))]
        if self.dynamic_null:
            tags.append((DT_NULL, 0))
        dyn_fmt = f"{e}qQ" if self.elfclass == 64 else f"{e}iI"
        dyn_data = b"".join(struct.pack(dyn_fmt, t, v) for t, v in tags)
        section, dyn_offset, _ = placed[dyn_index]
        placed[dyn_index] = (section, dyn_offset, dyn_data)
        end = max(o + len(d) for _, o, d in placed)
        shoff = end + (-end % 8)
        shentsize = 64 if self.elfclass == 64 else 40
        image = bytearray(shoff + shentsize * (len(sections) + 1))
        for _, off, data in placed:
            image[off : off + len(data)] = data
        shdr = self._shdr_format()
        link_of = {
            ".dynamic": self.section_index[".dynstr"],
            ".gnu.version_r": self.section_index[".dynstr"],
            ".dynsym": self.section_index[".dynstr"],
        }
        for index, (section, off, data) in enumerate(placed, 1):
            addr = off if section.flags & SHF_ALLOC else 0
            link = section.link or link_of.get(section.name, 0)
            struct.pack_into(
                shdr, image, shoff + index * shentsize,
                name_offsets[index - 1], section.sh_type, section.flags, addr, off, len(data),
                link, section.info, section.align, section.entsize,
            )  # fmt: skip
        ident = b"\x7fELF" + bytes([2 if self.elfclass == 64 else 1, 2 if self.big_endian else 1, 1, 0])
        image[0:16] = ident.ljust(16, b"\0")
        struct.pack_into(
            self._ehdr_format(), image, 16,
            self.e_type, self.machine, 1, 0, ehsize, shoff, 0,
            ehsize, phentsize, phnum, shentsize, len(sections) + 1, self.section_index[".shstrtab"],
        )  # fmt: skip
        phdrs = [(PT_LOAD, 5, 0, 0, 0, end, end, 0x1000)]
        dyn_len = len(dyn_data)
        phdrs.append((PT_DYNAMIC, 6, dyn_offset, dyn_offset, dyn_offset, dyn_len, dyn_len, 8))
        if self.interp is not None:
            off = self.section_offset[".interp"]
            phdrs.append((PT_INTERP, 4, off, off, off, len(self.interp), len(self.interp), 1))
        if self.note_segment:
            note = next((s for s in placed if s[0].sh_type == SHT_NOTE), None)
            off, size = (note[1], len(note[2])) if note else (0, 0)
            phdrs.append((PT_NOTE, 4, off, off, off, size, size, 4))
        fmt = self._phdr_format()
        for i, (p_type, p_flags, p_off, p_vaddr, p_paddr, filesz, memsz, align) in enumerate(phdrs):
            if self.elfclass == 64:
                values = (p_type, p_flags, p_off, p_vaddr, p_paddr, filesz, memsz, align)
            else:
                values = (p_type, p_off, p_vaddr, p_paddr, filesz, memsz, p_flags, align)
            struct.pack_into(fmt, image, ehsize + i * phentsize, *values)
        self.image = image
        return image

    # --- patching an image after build() ------------------------------------------------------

    def ehdr(self, name: str) -> int:
        fmt = self._ehdr_format()
        return int(struct.unpack_from(fmt, self.image, 16)[_EHDR_FIELDS.index(name)])

    def set_ehdr(self, name: str, value: int) -> None:
        fmt = self._ehdr_format()
        values = list(struct.unpack_from(fmt, self.image, 16))
        values[_EHDR_FIELDS.index(name)] = value
        struct.pack_into(fmt, self.image, 16, *values)

    def shdr_offset(self, section: str | int) -> int:
        index = section if isinstance(section, int) else self.section_index[section]
        return self.ehdr("e_shoff") + index * self.ehdr("e_shentsize")

    def set_shdr(self, section: str | int, name: str, value: int) -> None:
        fmt = self._shdr_format()
        at = self.shdr_offset(section)
        values = list(struct.unpack_from(fmt, self.image, at))
        values[_SHDR_FIELDS.index(name)] = value
        struct.pack_into(fmt, self.image, at, *values)

    def shdr(self, section: str | int, name: str) -> int:
        fmt = self._shdr_format()
        return int(struct.unpack_from(fmt, self.image, self.shdr_offset(section))[_SHDR_FIELDS.index(name)])

    def set_phdr(self, index: int, name: str, value: int) -> None:
        fmt = self._phdr_format()
        fields = _PHDR64_FIELDS if self.elfclass == 64 else _PHDR32_FIELDS
        at = self.ehdr("e_phoff") + index * struct.calcsize(fmt)
        values = list(struct.unpack_from(fmt, self.image, at))
        values[fields.index(name)] = value
        struct.pack_into(fmt, self.image, at, *values)

    def pack(self, fmt: str, offset: int, *values: int) -> None:
        struct.pack_into(self._e + fmt, self.image, offset, *values)


def elf_bytes(**options: object) -> bytes:
    return bytes(ElfImage(**options).build())  # type: ignore[arg-type]


# --- zip ------------------------------------------------------------------------------------------

ZIP_STORED = 0
ZIP_DEFLATED = 8
ZIP_BZIP2 = 12
ZIP_LZMA = 14
MODE_FILE = (stat.S_IFREG | 0o644) << 16
MODE_EXEC = (stat.S_IFREG | 0o755) << 16
MODE_SYMLINK = (stat.S_IFLNK | 0o777) << 16


@dataclass
class ZipEntry:
    """One member as written: every field may lie. `payload` is the compressed bytes (computed
    from `data` and `method` when None); `crc`/`file_size`/`compress_size` default to the truth."""

    name: str | bytes
    data: bytes = b""
    method: int = ZIP_DEFLATED
    payload: bytes | None = None
    crc: int | None = None
    file_size: int | None = None
    compress_size: int | None = None
    external_attr: int = MODE_FILE
    flag_bits: int = 0
    local_name: str | bytes | None = None
    share_local_of: str | bytes | None = None
    """Write no local header: point the central entry at the named entry's local header."""
    central: bool = True
    """False: local header and data only, no central directory entry."""
    version_needed: int = 20

    def encoded_name(self, which: str | bytes | None = None) -> bytes:
        name = self.name if which is None else which
        return name if isinstance(name, bytes) else name.encode("utf-8")

    def compressed(self) -> bytes:
        if self.payload is not None:
            return self.payload
        if self.method == ZIP_STORED:
            return self.data
        if self.method == ZIP_DEFLATED:
            return deflate(self.data)
        if self.method == ZIP_BZIP2:
            return bz2.compress(self.data)
        if self.method == ZIP_LZMA:
            return lzma_payload(self.data)
        msg = f"no compressor for method {self.method}; give payload"
        raise ValueError(msg)


def build_zip(
    entries: Iterable[ZipEntry],
    *,
    comment: bytes = b"",
    cd_offset: int | None = None,
    cd_count: int | None = None,
    prefix: bytes = b"",
) -> bytes:
    """The archive, written exactly as described (no ZIP64: sizes must fit 32 bits)."""
    out = bytearray(prefix)
    central = bytearray()
    count = 0
    local_offsets: dict[bytes, tuple[int, ZipEntry, bytes]] = {}
    for entry in entries:
        name = entry.encoded_name()
        if entry.share_local_of is not None:
            target = entry.encoded_name(entry.share_local_of)
            offset, shared, payload = local_offsets[target]
        else:
            payload = entry.compressed()
            shared = entry
            offset = len(out)
            local_name = entry.encoded_name(entry.local_name) if entry.local_name is not None else name
            local_offsets[name] = (offset, entry, payload)
            out += struct.pack(
                "<IHHHHHIIIHH", 0x04034B50, entry.version_needed, entry.flag_bits, entry.method, 0, 0x21,
                _crc(entry), _csize(entry, payload), _fsize(entry), len(local_name), 0,
            )  # fmt: skip
            out += local_name + payload
        if not entry.central:
            continue
        count += 1
        central += struct.pack(
            "<IHHHHHHIIIHHHHHII", 0x02014B50, (3 << 8) | 20, entry.version_needed, shared.flag_bits,
            shared.method, 0, 0x21, _crc(shared), _csize(shared, payload), _fsize(shared),
            len(name), 0, 0, 0, 0, entry.external_attr, offset,
        )  # fmt: skip
        central += name
    start = len(out)
    out += central
    total = cd_count if cd_count is not None else count
    where = cd_offset if cd_offset is not None else start
    if total > 0xFFFF:  # ZIP64 end record and locator; the classic record says "see ZIP64"
        zip64_at = len(out)
        out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, total, total, len(central), where)
        out += struct.pack("<IIQI", 0x07064B50, 0, zip64_at, 1)
        total = 0xFFFF
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, total, total, len(central), where, len(comment))
    out += comment
    return bytes(out)


def _crc(entry: ZipEntry) -> int:
    return entry.crc if entry.crc is not None else zlib.crc32(entry.data)


def _fsize(entry: ZipEntry) -> int:
    return entry.file_size if entry.file_size is not None else len(entry.data)


def _csize(entry: ZipEntry, payload: bytes) -> int:
    return entry.compress_size if entry.compress_size is not None else len(payload)


# --- wheels ---------------------------------------------------------------------------------------


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def dist_info(distribution: str, version: str) -> str:
    return f"{distribution.replace('-', '_')}-{version}.dist-info"


def metadata_text(distribution: str, version: str) -> bytes:
    return f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n\n".encode()


def wheel_text(tags: Sequence[str], *, purelib: bool = False) -> bytes:
    lines = ["Wheel-Version: 1.0", "Generator: tests/hostile", f"Root-Is-Purelib: {str(purelib).lower()}"]
    lines += [f"Tag: {t}" for t in tags]
    return ("\n".join(lines) + "\n").encode()


def record_text(rows: Iterable[tuple[str, bytes | None]], record_name: str) -> bytes:
    """RECORD for (name, content) rows; content None -> a row with no hash and no size."""
    lines = []
    for name, data in rows:
        lines.append(f"{name},," if data is None else f"{name},{record_hash(data)},{len(data)}")
    lines.append(f"{record_name},,")
    return ("\n".join(lines) + "\n").encode()


# --- a small valid wheel ----------------------------------------------------------------------------


def small_wheel(directory: Path, tag: str, members: dict[str, bytes], name: str = "tiny") -> Path:
    """A small valid wheel: the members, METADATA, WHEEL with `tag` (a compressed tag set may be
    written with dots) and a complete RECORD."""
    info = f"{name}-0.1.0.dist-info"
    tags = [
        f"{i}-{a}-{p}" for i in tag.split("-", maxsplit=1)[0].split(".") for a in tag.split("-")[1].split(".")
        for p in tag.split("-")[2].split(".")
    ]
    files = {
        **members,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n".encode(),
        f"{info}/WHEEL": "".join(
            ["Wheel-Version: 1.0\nRoot-Is-Purelib: false\n", *(f"Tag: {t}\n" for t in tags)]
        ).encode(),
    }
    rows = [f"{member},{record_hash(data)},{len(data)}" for member, data in files.items()]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for member, data in files.items():
            zf.writestr(zipfile.ZipInfo(member), data)
        zf.writestr(f"{info}/RECORD", "\n".join([*rows, f"{info}/RECORD,,"]) + "\n")
    path = directory / f"{name}-0.1.0-{tag}.whl"
    path.write_bytes(buffer.getvalue())
    return path
