"""The hostile wheel corpus for `release verify`: each case builds one wheel, in memory, from bytes.

    python3 -m tests.hostile.cases OUTDIR [--only ID ...]     # write every case's wheel to OUTDIR

A case has an id, a one-line description and the outcome `release verify` must end in:

* ``error``: one clean error line that names the member (or the wheel, for a file that is no
  zip), a non-zero exit, no traceback, bounded time and memory;
* ``rule:<id>[,<id>...]``: a report in which each listed rule fails (ids of DESIGN.md's
  "Verification rules"; `wheel-integrity` is of the second wave);
* ``ok``: a report with no rule failing (controls, and inputs that are large but legitimate).

Flags: ``matrix`` (run with the repository's matrix.yaml, so that the wheel maps to a variant and
the import-package scan of `variant-conflict` runs), ``report-symlink`` (run with
``--write-reports``; the generator leaves ``<wheel>.verify.json`` as a symlink to a sentinel file
outside the wheel's directory, which must be left unchanged: verify must not follow the link).

Nothing is committed but this generator: wheels are written at test time into a temporary
directory. All cases together build in well under 5 s and write well under 50 MB.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.hostile.builders import (
    EM_386,
    EM_AARCH64,
    EM_PPC64,
    MODE_EXEC,
    MODE_FILE,
    MODE_SYMLINK,
    SHF_COMPRESSED,
    SHT_NOTE,
    SHT_PROGBITS,
    ZIP_BZIP2,
    ZIP_DEFLATED,
    ZIP_LZMA,
    ZIP_STORED,
    ElfImage,
    Section,
    ZipEntry,
    build_zip,
    bzip2_bomb,
    crc_of_pieces,
    deflate_pieces,
    dist_info,
    elf_bytes,
    lzma_bomb,
    metadata_text,
    record_hash,
    record_text,
    wheel_text,
)

DIST = "hostile"
VERSION = "1.0"
TAG = "cp312-cp312-manylinux_2_28_x86_64"
EXT = "hostile/_native.cpython-312-x86_64-linux-gnu.so"
SENTINEL = "SENTINEL: verify must not write through a symlinked report\n"


@dataclass(frozen=True)
class Built:
    filename: str
    data: bytes


@dataclass(frozen=True)
class Case:
    id: str
    description: str
    expected: str
    build: Callable[[], Built]
    flags: frozenset[str] = field(default_factory=frozenset)

    @property
    def expected_rules(self) -> tuple[str, ...]:
        if not self.expected.startswith("rule:"):
            return ()
        return tuple(self.expected.removeprefix("rule:").split(","))


# --- assembling wheels -------------------------------------------------------------------------


def wheel_name(dist: str = DIST, version: str = VERSION, tag: str = TAG) -> str:
    return f"{dist.replace('-', '_')}-{version}-{tag}.whl"


def make_wheel(
    members: Sequence[ZipEntry],
    *,
    dist: str = DIST,
    version: str = VERSION,
    tag: str = TAG,
    wheel_tags: Sequence[str] | None = None,
    record: bool | bytes = True,
    record_skip: Sequence[str] = (),
    with_wheel_file: bool = True,
    purelib: bool = False,
    trailer: Sequence[ZipEntry] = (),
    filename: str | None = None,
    **zip_options: object,
) -> Built:
    """A wheel of `members` plus METADATA, WHEEL and RECORD. RECORD hashes each member's `data`
    (a member given only as a compressed `payload` gets a row without hash: it is a bomb anyway)."""
    info = dist_info(dist, version)
    meta = [ZipEntry(f"{info}/METADATA", metadata_text(dist, version))]
    if with_wheel_file:
        meta.append(ZipEntry(f"{info}/WHEEL", wheel_text(wheel_tags or [tag], purelib=purelib)))
    entries = [*members, *meta]
    if record is not False:
        if isinstance(record, bytes):
            text = record
        else:
            rows = []
            for entry in entries:
                name = entry.encoded_name().decode("utf-8", "replace")
                if name in record_skip or not entry.central:
                    continue
                rows.append((name, entry.data if entry.payload is None else None))
            text = record_text(rows, f"{info}/RECORD")
        entries.append(ZipEntry(f"{info}/RECORD", text))
    data = build_zip([*entries, *trailer], **zip_options)  # type: ignore[arg-type]
    return Built(filename or wheel_name(dist, version, tag), data)


def ext(data: bytes, name: str = EXT, **options: object) -> ZipEntry:
    return ZipEntry(name, data, external_attr=MODE_EXEC, **options)  # type: ignore[arg-type]


def init_py(text: bytes = b'"""hostile test package"""\n') -> ZipEntry:
    return ZipEntry("hostile/__init__.py", text)


def elf_wheel(image: bytes | bytearray, **options: object) -> Built:
    """The usual wheel: an __init__.py and one extension module holding `image`."""
    return make_wheel([init_py(), ext(bytes(image))], **options)  # type: ignore[arg-type]


def patched(change: Callable[[ElfImage], object], **elf_options: object) -> Built:
    """A wheel whose extension is a valid ELF image built then changed in place by `change`."""
    elf = ElfImage(**elf_options)  # type: ignore[arg-type]
    elf.build()
    result = change(elf)
    image = result if isinstance(result, (bytes, bytearray)) else elf.image
    return elf_wheel(image)


def with_run(elf: ElfImage, value: int, count: int) -> list[bytes | tuple[int, int]]:
    """Deflate pieces of `elf` with `count` bytes of `value` inserted before .shstrtab (which,
    like the section header table, moves up by `count`; loaded segments do not move)."""
    at = elf.section_offset[".shstrtab"]
    elf.set_shdr(".shstrtab", "sh_offset", at + count)
    elf.set_ehdr("e_shoff", elf.ehdr("e_shoff") + count)
    return [bytes(elf.image[:at]), (value, count), bytes(elf.image[at:])]


def big_member(name: str, pieces: list[bytes | tuple[int, int]], *, declared: int | None = None,
               honest_crc: bool = True, mode: int = MODE_EXEC) -> ZipEntry:
    payload, size = deflate_pieces(pieces)
    crc = crc_of_pieces(pieces) if honest_crc else 0
    return ZipEntry(name, b"", ZIP_DEFLATED, payload=payload, crc=crc,
                    file_size=size if declared is None else declared, external_attr=mode)


# --- ELF cases ---------------------------------------------------------------------------------


def _verneed_offset(elf: ElfImage) -> int:
    return elf.section_offset[".gnu.version_r"]


def elf_verneed_loop() -> Built:
    def change(elf: ElfImage) -> None:
        at = _verneed_offset(elf)
        elf.pack("HH", at, 1, 65535)  # vn_version 1, vn_cnt 65535
        elf.pack("I", at + 12, 0)  # vn_next 0: the same entry again
        elf.pack("I", at + 16 + 12, 0)  # vna_next 0: the same auxiliary again
        elf.set_shdr(".gnu.version_r", "sh_info", 65535)
    return patched(change)


def elf_verneed_shinfo_huge() -> Built:
    def change(elf: ElfImage) -> None:
        elf.set_shdr(".gnu.version_r", "sh_info", 0xFFFFFFFF)  # vn_next is 0 already: 4e9 re-reads
    return patched(change)


def elf_verneed_aux_oob() -> Built:
    return patched(lambda elf: elf.pack("I", _verneed_offset(elf) + 8, 0x7FFFFFF0))


def elf_verneed_file_oob() -> Built:
    return patched(lambda elf: elf.pack("I", _verneed_offset(elf) + 4, 0xFFFFFF00))


def elf_vna_name_oob() -> Built:
    def change(elf: ElfImage) -> None:
        size = elf.shdr(".dynstr", "sh_size")
        elf.pack("I", _verneed_offset(elf) + 16 + 8, size + 0x20)  # into .gnu.version_r/.text bytes
    return patched(change)


def elf_needed_oob() -> Built:
    def change(elf: ElfImage) -> None:
        elf.pack("Q", elf.section_offset[".dynamic"] + 8, 0xFFFFFFF0)  # DT_NEEDED d_val
    return patched(change)


def elf_shname_oob() -> Built:
    return patched(lambda elf: elf.set_shdr(".text", "sh_name", 0xFFFFFF00))


def elf_shstrndx_oob() -> Built:
    return patched(lambda elf: elf.set_ehdr("e_shstrndx", 4000))


def elf_shtable_truncated() -> Built:
    def change(elf: ElfImage) -> bytes:
        return bytes(elf.image[: elf.ehdr("e_shoff") + 64 * 3 + 20])
    return patched(change)


def elf_shoff_beyond_eof() -> Built:
    return patched(lambda elf: elf.set_ehdr("e_shoff", len(elf.image) + (1 << 20)))


def elf_shnum_65535() -> Built:
    return patched(lambda elf: elf.set_ehdr("e_shnum", 65535))


def elf_shnum_extended() -> Built:
    """e_shnum 0 (extended numbering): the count is section 0's sh_size, here 2**40, and a 72-byte
    e_shentsize sends readers down the per-header path over 48 MB of zeros (NULL sections)."""
    elf = ElfImage()
    elf.build()
    elf.set_shdr(0, "sh_size", 1 << 40)
    elf.set_ehdr("e_shnum", 0)
    elf.set_ehdr("e_shstrndx", 0)
    elf.set_ehdr("e_shentsize", 72)
    pieces: list[bytes | tuple[int, int]] = [bytes(elf.image), (0, 48 << 20)]
    return make_wheel([init_py(), big_member(EXT, pieces)])


def elf_phnum_xnum() -> Built:
    """e_phnum PN_XNUM: the count is section 0's sh_info (0xffffffff); the program header table
    runs into 48 MB of zeros (PT_NULL entries) before it reaches the end of the file."""
    elf = ElfImage()
    elf.build()
    elf.set_shdr(0, "sh_info", 0xFFFFFFFF)
    elf.set_ehdr("e_phnum", 0xFFFF)
    pieces = with_run(elf, 0, 48 << 20)
    elf.set_ehdr("e_phoff", elf.section_offset[".shstrtab"])  # the start of the zeros
    pieces[0] = bytes(elf.image[: elf.section_offset[".shstrtab"]])
    return make_wheel([init_py(), big_member(EXT, pieces)])


def elf_phnum_65534() -> Built:
    return patched(lambda elf: elf.set_ehdr("e_phnum", 65534))  # 65535 would be PN_XNUM


def elf_phoff_beyond_eof() -> Built:
    return patched(lambda elf: elf.set_ehdr("e_phoff", 0xFFFFFFFFFFFF))


def elf_dynamic_no_null() -> Built:
    return patched(lambda elf: None, dynamic_null=False)


def elf_dynamic_no_null_run(megabytes: int) -> Callable[[], Built]:
    """No DT_NULL, and `megabytes` MiB of 0x01 bytes after .dynamic: 65536 bogus tags per MiB."""
    def build() -> Built:
        elf = ElfImage(dynamic_null=False)
        elf.build()
        at = elf.section_offset[".dynamic"] + elf.shdr(".dynamic", "sh_size")
        shift = megabytes << 20
        elf.set_shdr(".shstrtab", "sh_offset", elf.section_offset[".shstrtab"] + shift)
        elf.set_ehdr("e_shoff", elf.ehdr("e_shoff") + shift)
        pieces: list[bytes | tuple[int, int]] = [bytes(elf.image[:at]), (1, shift), bytes(elf.image[at:])]
        return make_wheel([init_py(), big_member(EXT, pieces)])
    return build


def elf_dynamic_size_lies() -> Built:
    def change(elf: ElfImage) -> None:
        elf.set_shdr(".dynamic", "sh_size", 0xFFFFFFFFFFF0)
        elf.set_phdr(1, "p_filesz", 0xFFFFFFFFFFF0)
    return patched(change, dynamic_null=False)


def _note(namesz: int, descsz: int) -> Section:
    data = struct.pack("<III", namesz, descsz, 3) + b"GNU\0" + bytes(16)
    return Section(".note.gnu.build-id", SHT_NOTE, data, 0x2, align=4)


def elf_note_namesz() -> Built:
    return patched(lambda elf: None, extra_sections=(_note(0xFFFFFFFF, 16),), note_segment=True)


def elf_note_descsz() -> Built:
    return patched(lambda elf: None, extra_sections=(_note(4, 0xFFFFFFF0),), note_segment=True)


def _chdr(ch_size: int) -> bytes:
    return struct.pack("<IIQQ", 1, 0, ch_size, 1)  # Elf64_Chdr: ELFCOMPRESS_ZLIB


def elf_zdebug_chsize_lies() -> Built:
    payload = _chdr(1 << 40) + zlib.compress(b"\x01" * 256)
    section = Section(".debug_info", SHT_PROGBITS, payload, SHF_COMPRESSED, align=8)
    return patched(lambda elf: None, extra_sections=(section,))


def elf_zdebug_bomb() -> Built:
    """SHF_COMPRESSED .debug_line whose zlib stream (honest ch_size) inflates to 1 GiB."""
    raw, size = deflate_pieces([(0, 1 << 30)])
    stream = b"\x78\x9c" + raw + struct.pack(">I", 1)  # adler32 left wrong: nobody should get there
    section = Section(".debug_line", SHT_PROGBITS, _chdr(size) + stream, SHF_COMPRESSED, align=8)
    return patched(lambda elf: None, extra_sections=(section,))


def elf_dynstr_no_nul() -> Built:
    """The last string of .dynstr (the SONAME) has no terminating NUL: it runs into the next section."""
    def change(elf: ElfImage) -> None:
        start = elf.section_offset[".dynstr"]
        size = elf.shdr(".dynstr", "sh_size")
        end = start + size
        gap = elf.section_offset[".gnu.version_r"] - end
        elf.image[end - 1 : end + gap] = b"X" * (gap + 1)  # drop the NUL, fill the alignment gap
        elf.set_shdr(".dynstr", "sh_size", size + gap)
    return patched(change, needed=("libc.so.6",), soname="libhostile.so")


def elf_bad_class() -> Built:
    return patched(lambda elf: elf.image.__setitem__(4, 7))


def elf_verneed_link_oob() -> Built:
    return patched(lambda elf: elf.set_shdr(".gnu.version_r", "sh_link", 999))


def elf_dynamic_link_self() -> Built:
    return patched(lambda elf: elf.set_shdr(".dynamic", "sh_link", elf.section_index[".dynamic"]))


def elf_text_beyond_eof() -> Built:
    return patched(lambda elf: elf.set_shdr(".text", "sh_offset", 1 << 40))


def elf_header_only() -> Built:
    def change(elf: ElfImage) -> bytes:
        return bytes(elf.image[:64]) + bytes(36)
    return patched(change)


def elf_wrong_class(**options: object) -> Callable[[], Built]:
    return lambda: elf_wheel(elf_bytes(**options))


def elf_any_wheel_glibc_299() -> Built:
    image = elf_bytes(verneed=(("libc.so.6", ("GLIBC_2.2.5", "GLIBC_2.99")),))
    return make_wheel([init_py(), ext(image, "hostile/_native.so")], tag="py3-none-any", purelib=True)


def elf_manylinux_glibc_299() -> Built:
    return elf_wheel(elf_bytes(verneed=(("libc.so.6", ("GLIBC_2.2.5", "GLIBC_2.99")),)))


# --- compression cases -------------------------------------------------------------------------


def _elf_head() -> bytes:
    return elf_bytes()


def zip_deflate_size_lies() -> Built:
    """A 1 GiB deflate stream (~1 MB) declared as 4 KiB: a valid ELF first, then zeros."""
    member = big_member(EXT, [_elf_head(), (0, 1 << 30)], declared=4096, honest_crc=False)
    return make_wheel([init_py(), member])


def zip_deflate_size_lies_stream() -> Built:
    """Declared 16 MiB (large enough to be streamed), inflates to 2 GiB."""
    member = big_member(EXT, [_elf_head(), (0, 2 << 30)], declared=16 << 20, honest_crc=False)
    return make_wheel([init_py(), member])


def zip_metadata_bomb() -> Built:
    """dist-info/METADATA: 200 bytes declared, 1 GiB of spaces after the headers inflated."""
    payload, _ = deflate_pieces([metadata_text(DIST, VERSION), (0x20, 1 << 30)])
    info = dist_info(DIST, VERSION)
    bomb = ZipEntry(f"{info}/METADATA", b"", ZIP_DEFLATED, payload=payload, crc=0, file_size=200)
    entries = [init_py(), ext(_elf_head()), bomb, ZipEntry(f"{info}/WHEEL", wheel_text([TAG]))]
    rows = [(e.encoded_name().decode(), e.data if e.payload is None else None) for e in entries]
    entries.append(ZipEntry(f"{info}/RECORD", record_text(rows, f"{info}/RECORD")))
    return Built(wheel_name(), build_zip(entries))


def zip_record_huge_line() -> Built:
    """RECORD is one 64 MiB line (64 KB deflated)."""
    info = dist_info(DIST, VERSION)
    payload, size = deflate_pieces([b"hostile/__init__.py,sha256=", (0x41, 64 << 20), b",1\n"])
    record = ZipEntry(f"{info}/RECORD", b"", ZIP_DEFLATED, payload=payload, crc=0, file_size=size)
    return make_wheel([init_py(), ext(_elf_head())], record=False, trailer=[record])


def zip_bzip2_bomb() -> Built:
    stream, size = bzip2_bomb(50)  # ~1.8 KB -> 2.25 GB
    member = ZipEntry("hostile/libbomb.so", b"", ZIP_BZIP2, payload=stream, crc=0, file_size=size,
                      external_attr=MODE_EXEC, version_needed=46)
    return make_wheel([init_py(), ext(_elf_head()), member])


def zip_lzma_import_scan() -> Built:
    """xfer-engine-cpu (a variant of the repository's matrix): xfer/__init__.py is a ~222 KB LZMA
    member that decodes to ~1.46 GB, read whole by the import-package scan (variant-conflict)."""
    payload = lzma_bomb(222_000)
    size = 1 + 273 * ((222_000 - 5) * 8 // 4)  # an upper bound; the decoder never reaches it
    bomb = ZipEntry("xfer/__init__.py", b"", ZIP_LZMA, payload=payload, crc=0,
                    file_size=min(size, 0xFFFFFFFF), version_needed=63)
    native = ext(elf_bytes(soname=None), "xfer/_xfer.cpython-312-x86_64-linux-gnu.so")
    return make_wheel([bomb, native], dist="xfer-engine-cpu", version="0.1.0")


def zip_lzma_elf_candidate() -> Built:
    payload = lzma_bomb(222_000)
    member = ZipEntry("hostile/libbomb.so", b"", ZIP_LZMA, payload=payload, crc=0, file_size=4096,
                      external_attr=MODE_EXEC, version_needed=63)
    return make_wheel([init_py(), ext(_elf_head()), member])


def zip_overlap_bomb() -> Built:
    """2000 central directory entries share one local header: a 48 KB deflate stream of a valid ELF
    followed by 50 MB of zeros. ~190 KB on disk, 100 GB to inflate."""
    elf = ElfImage()
    elf.build()
    kernel = big_member("hostile/lib0000.so", with_run(elf, 0, 50 << 20))
    members = [kernel]
    members += [ZipEntry(f"hostile/lib{i:04d}.so", external_attr=MODE_EXEC,
                         share_local_of="hostile/lib0000.so") for i in range(1, 2000)]
    return make_wheel([init_py(), *members], record=False,
                      trailer=[ZipEntry(f"{dist_info(DIST, VERSION)}/RECORD", b"")])


def zip_overlap_small() -> Built:
    """Two names, one local header: hostile/a.py and hostile/b.py are the same bytes."""
    data = b"print('a')\n"
    members = [init_py(), ext(_elf_head()), ZipEntry("hostile/a.py", data),
               ZipEntry("hostile/b.py", data, share_local_of="hostile/a.py")]
    return make_wheel(members)


# --- zip structure cases -----------------------------------------------------------------------


def member_named(name: str | bytes, data: bytes = b"x = 1\n", **options: object) -> Callable[[], Built]:
    return lambda: make_wheel([init_py(), ext(_elf_head()), ZipEntry(name, data, **options)])  # type: ignore[arg-type]


def zip_symlink() -> Built:
    link = ZipEntry("hostile/libevil.so", b"/etc/passwd", ZIP_STORED, external_attr=MODE_SYMLINK)
    return make_wheel([init_py(), ext(_elf_head()), link])


def zip_duplicate_names() -> Built:
    return make_wheel([init_py(), init_py(b"import os\nos.system('true')\n"), ext(_elf_head())])


def record_variant(kind: str) -> Callable[[], Built]:
    def build() -> Built:
        info = dist_info(DIST, VERSION)
        members = [init_py(), ext(_elf_head())]
        meta = metadata_text(DIST, VERSION)
        wheel = wheel_text([TAG])
        rows = [(m.name, m.data) for m in members] + [(f"{info}/METADATA", meta), (f"{info}/WHEEL", wheel)]
        lines = [f"{n},{record_hash(d)},{len(d)}" for n, d in rows]  # type: ignore[arg-type]
        if kind == "missing-file":
            lines = [x for x in lines if not x.startswith(EXT)]
        elif kind == "wrong-sha256":
            lines = [x.replace(record_hash(members[1].data), record_hash(b"other")) for x in lines]
        elif kind == "bad-size":
            lines = [x.rsplit(",", 1)[0] + ",7" if x.startswith(EXT) else x for x in lines]
        elif kind == "dotdot":
            lines.append(f"../../etc/passwd,{record_hash(b'root')},4")
        elif kind == "md5":
            lines = [x.replace("sha256=", "md5=") for x in lines]
        lines.append(f"{info}/RECORD,,")
        return make_wheel(members, record=("\n".join(lines) + "\n").encode())
    return build


def zip_eocd_in_comment() -> Built:
    """A 64 KiB comment that ends with a second, fake end-of-central-directory record (its own
    comment length 0) pointing at a central directory that is not there: two readers, two views."""
    fake = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, 46, 0x7FFFFFF0, 0)
    comment = b"\0" * (65535 - len(fake)) + fake
    return make_wheel([init_py(), ext(_elf_head())], comment=comment)


def zip_local_name_differs() -> Built:
    member = ext(_elf_head(), local_name="../../evil.so")
    return make_wheel([init_py(), member])


def zip_local_offset_lies() -> Built:
    built = make_wheel([init_py(), ext(_elf_head())])
    data = bytearray(built.data)
    # the extension's central entry: point its local header offset 7 bytes into its data
    needle = EXT.encode()
    central = data.rfind(needle, 0, data.rfind(b"PK\x05\x06"))
    entry = central - 46
    offset = struct.unpack_from("<I", data, entry + 42)[0]
    struct.pack_into("<I", data, entry + 42, offset + 30 + len(needle) + 7)
    return Built(built.filename, bytes(data))


def zip_stored_size_lies() -> Built:
    image = _elf_head()
    member = ext(image, method=ZIP_STORED, file_size=len(image) + 512)
    return make_wheel([init_py(), member, ZipEntry("hostile/z.txt", b"z" * 1024, ZIP_STORED)])


def nested_zip() -> Built:
    inner = zip_bzip2_bomb().data
    return make_wheel([init_py(), ext(_elf_head()), ZipEntry("hostile/data/inner.whl", inner, ZIP_STORED)])


def deep_nesting() -> Built:
    name = "hostile/" + "d/" * 4000 + "leaf.py"
    return make_wheel([init_py(), ext(_elf_head()), ZipEntry(name, b"x = 1\n")])


def many_entries() -> Built:
    """100,000 empty stored members, written by a tight loop (build_zip takes ~5 s for this)."""
    info = dist_info(DIST, VERSION)
    head = [init_py(), ext(_elf_head()), ZipEntry(f"{info}/METADATA", metadata_text(DIST, VERSION)),
            ZipEntry(f"{info}/WHEEL", wheel_text([TAG]))]
    names = [f"hostile/m/{i:05x}.py".encode() for i in range(100_000)]
    empty = record_hash(b"")
    rows = [f"{e.encoded_name().decode()},{record_hash(e.data)},{len(e.data)}" for e in head]
    rows += [f"{n.decode()},{empty},0" for n in names]
    rows.append(f"{info}/RECORD,,")
    record = ZipEntry(f"{info}/RECORD", ("\n".join(rows) + "\n").encode())
    prefix = build_zip([*head, record])
    cd_start = struct.unpack_from("<I", prefix, len(prefix) - 6)[0]
    body, old_central = bytearray(prefix[:cd_start]), prefix[cd_start:-22]
    local = struct.Struct("<IHHHHHIIIHH")
    central_entry = struct.Struct("<IHHHHHHIIIHHHHHII")
    central = bytearray(old_central)
    for name in names:
        offset = len(body)
        body += local.pack(0x04034B50, 20, 0, 0, 0, 0x21, 0, 0, 0, len(name), 0) + name
        central += central_entry.pack(0x02014B50, (3 << 8) | 20, 20, 0, 0, 0, 0x21, 0, 0, 0, len(name),
                                      0, 0, 0, 0, MODE_FILE, offset) + name
    count = len(head) + 1 + len(names)
    start = len(body)
    body += central
    zip64_at = len(body)
    body += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, len(central), start)
    body += struct.pack("<IIQI", 0x07064B50, 0, zip64_at, 1)
    body += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, len(central), start, 0)
    return Built(wheel_name(), bytes(body))


def control_valid() -> Built:
    return elf_wheel(elf_bytes())


def report_symlink() -> Built:
    return elf_wheel(elf_bytes())


def not_a_zip() -> Built:
    return Built(wheel_name(), b"\x7fELF" + bytes(range(256)) * 16)


def empty_file() -> Built:
    return Built(wheel_name(), b"")


def bad_filename() -> Built:
    return control_valid().__class__("hostile.whl", control_valid().data)


def wheel_file_missing() -> Built:
    return make_wheel([init_py(), ext(_elf_head())], with_wheel_file=False)


def wheel_tags_inconsistent() -> Built:
    return make_wheel([init_py(), ext(_elf_head())], wheel_tags=["cp311-cp311-manylinux_2_17_aarch64"])


def zip_cd_offset_lies() -> Built:
    return make_wheel([init_py(), ext(_elf_head())], cd_offset=1 << 24)


def zip_cd_count_lies() -> Built:
    return make_wheel([init_py(), ext(_elf_head())], cd_count=65535)


# --- the list ----------------------------------------------------------------------------------

_M = frozenset({"matrix"})
CASES: tuple[Case, ...] = (
    Case("control-valid", "a valid manylinux_2_28 wheel with one small ELF extension", "ok", control_valid),
    Case("elf-verneed-vncnt-loop", ".gnu.version_r: vn_cnt=65535, vn_next=0, vna_next=0, sh_info=65535 "
         "(4e9 iterations in pyelftools iter_versions)", "error", elf_verneed_loop),
    Case("elf-verneed-shinfo-huge",
         ".gnu.version_r sh_info=0xffffffff with vn_next=0: one entry re-read 4e9 times",
         "error", elf_verneed_shinfo_huge),
    Case("elf-verneed-aux-oob", "vn_aux points 2 GB past the end of the file", "error", elf_verneed_aux_oob),
    Case("elf-verneed-file-strtab-oob", "vn_file is a .dynstr offset far outside the string table",
         "error", elf_verneed_file_oob),
    Case("elf-vna-name-oob", "vna_name points past the end of .dynstr (into other sections' bytes)",
         "error", elf_vna_name_oob),
    Case("elf-needed-strtab-oob", "DT_NEEDED value is a .dynstr offset of 0xfffffff0", "error",
         elf_needed_oob),
    Case("elf-shname-oob", "a section's sh_name is outside .shstrtab", "error", elf_shname_oob),
    Case("elf-shstrndx-oob", "e_shstrndx=4000 with 6 sections", "error", elf_shstrndx_oob),
    Case("elf-shtable-truncated", "the file ends 20 bytes into the 4th section header", "error",
         elf_shtable_truncated),
    Case("elf-shoff-beyond-eof", "e_shoff is 1 MiB past the end of the file", "error", elf_shoff_beyond_eof),
    Case("elf-shnum-65535", "e_shnum=65535 (a 4 MiB section table) in a 1 KB file", "error", elf_shnum_65535),
    Case("elf-shnum-extended-huge", "e_shnum=0 and section 0 sh_size=2**40 (extended numbering), "
         "e_shentsize=72, over 48 MiB of zeros", "error", elf_shnum_extended),
    Case("elf-phnum-xnum-huge", "e_phnum=PN_XNUM and section 0 sh_info=0xffffffff: the program header "
         "table runs over 48 MiB of zeros", "error", elf_phnum_xnum),
    Case("elf-phnum-65534", "e_phnum=65534 (the largest plain count) in a 1 KB file", "error",
         elf_phnum_65534),
    Case("elf-phoff-beyond-eof", "e_phoff=0xffffffffffff", "error", elf_phoff_beyond_eof),
    Case("elf-dynamic-no-null", ".dynamic without DT_NULL: tags run on into .shstrtab and the section table",
         "error", elf_dynamic_no_null),
    Case("elf-dynamic-no-null-24mb", ".dynamic without DT_NULL followed by 24 MiB of 0x01 bytes "
         "(1.5 million bogus tags; streamed, as members over 8 MiB are)", "error",
         elf_dynamic_no_null_run(24)),
    Case("elf-dynamic-no-null-7mb", ".dynamic without DT_NULL followed by 7 MiB of 0x01 bytes "
         "(460,000 bogus tags; read whole, as members under 8 MiB are)", "error",
         elf_dynamic_no_null_run(7)),
    Case("elf-dynamic-size-lies", ".dynamic sh_size and PT_DYNAMIC p_filesz 0xfffffffffff0, no DT_NULL",
         "error", elf_dynamic_size_lies),
    Case("elf-note-namesz-huge", "a .note section and PT_NOTE whose note has namesz=0xffffffff",
         "error", elf_note_namesz),
    Case("elf-note-descsz-huge", "a .note section and PT_NOTE whose note has descsz=0xfffffff0",
         "error", elf_note_descsz),
    Case("elf-zdebug-chsize-lies", "SHF_COMPRESSED .debug_info whose Elf64_Chdr ch_size says 1 TiB "
         "(256 bytes inside)", "rule:debug-info", elf_zdebug_chsize_lies),
    Case("elf-zdebug-bomb", "SHF_COMPRESSED .debug_line: 1 MB of zlib that inflates to 1 GiB",
         "rule:debug-info", elf_zdebug_bomb),
    Case("elf-dynstr-no-nul", ".dynstr's last string (the SONAME) has no terminating NUL",
         "error", elf_dynstr_no_nul),
    Case("elf-bad-class", "EI_CLASS=7", "error", elf_bad_class),
    Case("elf-verneed-link-oob", ".gnu.version_r sh_link=999 (no such string table)", "error",
         elf_verneed_link_oob),
    Case("elf-dynamic-link-self", ".dynamic sh_link names .dynamic itself as its string table",
         "error", elf_dynamic_link_self),
    Case("elf-text-beyond-eof", ".text sh_offset=2**40", "error", elf_text_beyond_eof),
    Case("elf-header-only", "a 100-byte file: an ELF header whose tables are not there", "error",
         elf_header_only),
    Case("elf32-in-x86_64-wheel", "an ELFCLASS32 i386 extension in a manylinux x86_64 wheel",
         "rule:wheel-integrity", elf_wrong_class(elfclass=32, machine=EM_386)),
    Case("elf-big-endian-in-x86_64-wheel", "a big-endian ppc64 extension in a manylinux x86_64 wheel",
         "rule:wheel-integrity", elf_wrong_class(big_endian=True, machine=EM_PPC64)),
    Case("elf-aarch64-in-x86_64-wheel", "an aarch64 extension in a manylinux x86_64 wheel",
         "rule:wheel-integrity", elf_wrong_class(machine=EM_AARCH64)),
    Case("elf-any-wheel-glibc-2.99", "a py3-none-any wheel holding an x86_64 ELF that needs GLIBC_2.99",
         "rule:wheel-integrity,platform-floor", elf_any_wheel_glibc_299),
    Case("elf-manylinux-glibc-2.99", "a manylinux_2_28 wheel whose extension needs GLIBC_2.99",
         "rule:platform-floor", elf_manylinux_glibc_299),
    Case("zip-deflate-size-lies", "ELF member declared 4 KiB, its ~1 MB deflate stream inflates to 1 GiB",
         "error", zip_deflate_size_lies),
    Case("zip-deflate-size-lies-streamed", "ELF member declared 16 MiB (streamed), inflates to 2 GiB",
         "error", zip_deflate_size_lies_stream),
    Case("zip-metadata-bomb", "dist-info/METADATA declared 200 bytes, inflates to 1 GiB", "error",
         zip_metadata_bomb),
    Case("zip-record-huge-line", "RECORD is a single 64 MiB line (64 KB deflated)", "error",
         zip_record_huge_line),
    Case("zip-bzip2-bomb", "a ~1.8 KB bzip2 member (.so) that expands to 2.25 GB", "error", zip_bzip2_bomb),
    Case("zip-lzma-import-scan", "xfer-engine-cpu wheel: xfer/__init__.py is ~222 KB of LZMA that expands "
         "to ~1.46 GB, read by the import-package scan", "error", zip_lzma_import_scan, _M),
    Case("zip-lzma-elf-candidate", "a ~222 KB LZMA member (.so, declared 4 KiB) that expands to ~1.46 GB",
         "error", zip_lzma_elf_candidate),
    Case("zip-overlap-bomb", "2000 entries share one local header: a 48 KB deflate of an ELF + 50 MiB of "
         "zeros (~190 KB wheel, 100 GB inflated)", "error", zip_overlap_bomb),
    Case("zip-overlap-small", "two names (a.py, b.py) point at one local header (overlapping entries are "
         "refused before anything is inflated, like the bomb above)", "error", zip_overlap_small),
    Case("zip-path-dotdot", "a member named ../../x", "rule:wheel-integrity", member_named("../../x")),
    Case("zip-path-absolute", "a member named /tmp/x", "rule:wheel-integrity", member_named("/tmp/x")),
    Case("zip-path-backslash", r"a member named ..\..\x (a Windows traversal)", "rule:wheel-integrity",
         member_named("..\\..\\x")),
    Case("zip-symlink-member", "hostile/libevil.so is a symlink (S_IFLNK external attributes) to /etc/passwd",
         "rule:wheel-integrity", zip_symlink),
    Case("zip-duplicate-names", "hostile/__init__.py twice, with different contents", "rule:wheel-integrity",
         zip_duplicate_names),
    Case("zip-name-nul", "a member named hostile/x.py<NUL>/../../evil.so (zipfile cuts names at NUL)",
         "rule:wheel-integrity", member_named(b"hostile/x.py\x00/../../evil.so")),
    Case("record-missing-file", "RECORD does not list the extension", "rule:wheel-integrity",
         record_variant("missing-file")),
    Case("record-wrong-sha256", "RECORD's sha256 of the extension is another file's", "rule:wheel-integrity",
         record_variant("wrong-sha256")),
    Case("record-bad-size", "RECORD's size of the extension is 7", "rule:wheel-integrity",
         record_variant("bad-size")),
    Case("record-dotdot-path", "RECORD lists ../../etc/passwd", "rule:wheel-integrity",
         record_variant("dotdot")),
    Case("record-md5", "RECORD uses md5= digests", "rule:wheel-integrity", record_variant("md5")),
    Case("record-absent", "no dist-info/RECORD", "rule:wheel-integrity",
         lambda: make_wheel([init_py(), ext(_elf_head())], record=False)),
    Case("wheel-file-missing", "no dist-info/WHEEL", "rule:wheel-integrity", wheel_file_missing),
    Case("wheel-tags-inconsistent", "WHEEL says cp311-cp311-manylinux_2_17_aarch64, the file name "
         "cp312-cp312-manylinux_2_28_x86_64", "rule:wheel-integrity", wheel_tags_inconsistent),
    Case("not-a-zip", "a .whl file that is 4 KB of bytes, no zip", "error", not_a_zip),
    Case("empty-file", "a 0-byte .whl file", "error", empty_file),
    Case("bad-filename", "a valid zip named hostile.whl (no version, no tags)", "error", bad_filename),
    Case("zip-comment-max", "a valid wheel with a 65535-byte archive comment", "ok",
         lambda: make_wheel([init_py(), ext(_elf_head())], comment=b"c" * 65535)),
    Case("zip-eocd-in-comment", "a 64 KiB comment ending in a second, fake end-of-central-directory record",
         "error", zip_eocd_in_comment),
    Case("zip-cd-offset-lies", "the end record's central directory offset is 16 MiB past the file",
         "error", zip_cd_offset_lies),
    Case("zip-cd-count-lies", "the end record says 65535 entries, the central directory holds 5",
         "error", zip_cd_count_lies),
    Case("zip-local-offset-lies", "the extension's central entry points 7 bytes into its own data",
         "error", zip_local_offset_lies),
    Case("zip-local-name-differs", "the extension's local header is named ../../evil.so", "error",
         zip_local_name_differs),
    Case("zip-stored-size-lies", "a stored ELF member declared 512 bytes longer than its data "
         "(reads into the next member)", "error", zip_stored_size_lies),
    Case("zip-encrypted-flag", "the extension has the encryption flag bit set", "error",
         lambda: make_wheel([init_py(), ext(_elf_head(), flag_bits=0x1)])),
    Case("zip-unknown-method", "the extension uses compression method 99 (AES)", "error",
         lambda: make_wheel([init_py(), ext(_elf_head(), method=99, payload=_elf_head())])),
    Case("nested-zip", "a wheel holding another wheel (with the bzip2 bomb) as data: not to be opened",
         "ok", nested_zip),
    Case("deep-nesting", "a member 4000 directories deep (an 8 KB name)", "ok", deep_nesting),
    Case("many-entries-100k", "100,000 empty stored members, all in RECORD", "ok", many_entries),
    Case("report-symlink", "valid wheel; <wheel>.verify.json is a symlink to a sentinel outside the "
         "wheel's directory: --write-reports must not follow it", "ok", report_symlink,
         frozenset({"report-symlink"})),
)


def case(case_id: str) -> Case:
    return next(c for c in CASES if c.id == case_id)


def generate(item: Case, directory: Path) -> Path:
    """Write one case's wheel into its own subdirectory of `directory` and return its path."""
    built = item.build()
    folder = directory / item.id
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / built.filename
    path.write_bytes(built.data)
    if "report-symlink" in item.flags:
        outside = directory / f"{item.id}.outside"
        outside.mkdir(exist_ok=True)
        sentinel = outside / "sentinel.json"
        sentinel.write_text(SENTINEL)
        link = path.with_name(path.name + ".verify.json")
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink(os.path.relpath(sentinel, folder), link)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="write the hostile wheel corpus")
    parser.add_argument("directory", type=Path)
    parser.add_argument("--only", nargs="*", default=())
    args = parser.parse_args(argv)
    for item in CASES:
        if args.only and item.id not in args.only:
            continue
        path = generate(item, args.directory)
        print(f"{path.stat().st_size:>10}  {item.expected:<40} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
