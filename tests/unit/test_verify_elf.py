"""The ELF layer (`release.inspect.elf`, `elfformat`, `devicecode`) on images built in memory."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import pytest

from release.inspect import devicecode
from release.inspect.devicecode import NV_MAGIC, DeviceScanner, architecture_names
from release.inspect.elf import (
    HEAD_KEEP,
    MAX_COMMENT_LENGTH,
    MAX_COMMENT_STRINGS,
    ElfReadError,
    comment_strings,
    dynamic_keep,
    inspect_elf,
    plan_reading,
    read_elf_file,
    tables_needed,
)
from release.inspect.elfformat import Image, MissingRange
from release.smoke.image import runtime_files
from tests.hostile.builders import (
    EM_386,
    EM_AARCH64,
    EM_PPC64,
    SHF_ALLOC,
    SHT_PROGBITS,
    ElfImage,
    Section,
    elf_bytes,
)


def test_facts_of_a_shared_library() -> None:
    info = inspect_elf(
        "lib/libx.so",
        elf_bytes(
            needed=("libc.so.6", "libamdhip64.so.6"),
            soname="libx.so.1",
            runpath="$ORIGIN:$ORIGIN/../lib",
            verneed=(("libc.so.6", ("GLIBC_2.2.5", "GLIBC_2.34")),),
        ),
    )
    assert info.needed == ("libc.so.6", "libamdhip64.so.6")
    assert info.soname == "libx.so.1"
    assert info.runpath == ("$ORIGIN", "$ORIGIN/../lib") and info.rpath == ()
    assert info.max_version("GLIBC") == "2.34"
    assert (info.machine, info.executable, info.debug_sections) == ("x86_64", False, ())
    assert info.padding < 64


@pytest.mark.parametrize(
    ("options", "machine"),
    [
        ({"machine": EM_386, "elfclass": 32}, "i686"),
        ({"machine": EM_AARCH64}, "aarch64"),
        ({"machine": EM_PPC64, "big_endian": True}, "ppc64"),
        ({"machine": EM_PPC64}, "ppc64le"),
    ],
)
def test_the_machine_as_tags_spell_it(options: dict[str, object], machine: str) -> None:
    assert inspect_elf("x.so", elf_bytes(**options)).machine == machine


def test_an_executable_and_debug_sections() -> None:
    image = elf_bytes(interp=b"/lib64/ld-linux-x86-64.so.2\0",
                      extra_sections=[Section(".debug_info", SHT_PROGBITS, b"\1" * 64)])
    info = inspect_elf("bin/tool", image)
    assert info.executable and info.debug_sections == (".debug_info",)


def test_a_renamed_copy_keeps_its_code_identity() -> None:
    one = inspect_elf("a.so", elf_bytes(soname="liba.so.1"))
    other = inspect_elf("b.so", elf_bytes(soname="libb-0a1b2c3d.so.1"))
    different = inspect_elf("c.so", elf_bytes(text=b"\x90" * 64))
    assert one.code_sha256 == other.code_sha256 != different.code_sha256


GPU_NAMES = architecture_names(["gfx[0-9]{3,4}[a-z]?", "sm_[0-9]{2,3}[a-z]?"])

COMPILERS = ("GCC: (GNU) 8.5.0 20210514 (Red Hat 8.5.0-26)", "GCC: (Debian 14.2.0-19) 14.2.0")
COMMENT = b"\0".join(c.encode() for c in (*COMPILERS, "Linker: LLD 19.1.7")) + b"\0"


def test_the_compilers_from_the_comment_section() -> None:
    section = Section(".comment", SHT_PROGBITS, b"\0" + COMMENT)
    info = inspect_elf("libx.so", elf_bytes(extra_sections=[section]))
    assert info.comment == (*COMPILERS, "Linker: LLD 19.1.7")
    assert inspect_elf("liby.so", elf_bytes()).comment == ()


def test_comment_strings_are_bounded() -> None:
    many = b"\0".join(b"GCC: %d" % i for i in range(1000))
    assert len(comment_strings(many)) == MAX_COMMENT_STRINGS
    assert comment_strings(b"GCC: 1\0GCC: 1\0\x01\x02\0  \0") == ("GCC: 1",)
    (long,) = comment_strings(b"x" * 100_000)
    assert len(long) == MAX_COMMENT_LENGTH


def test_a_comment_out_of_the_streamed_ranges_is_read_again(tmp_path: Path) -> None:
    """Past the kept head and far before the section table: the reader fetches it again."""
    from release.inspect.reader import read_wheel

    data = elf_bytes(extra_sections=[
        Section(".big", SHT_PROGBITS, bytes(HEAD_KEEP + (1 << 20))),
        Section(".comment", SHT_PROGBITS, COMMENT),
        Section(".pad", SHT_PROGBITS, bytes(256 << 10)),
    ])  # fmt: skip
    comment = inspect_elf("x.so", data).comment
    at = data.find(COMMENT)
    kept = Image(len(data), [(0, data[:HEAD_KEEP]), (len(data) - (64 << 10), data[-(64 << 10) :])])
    assert comment and not kept.holds(at, len(COMMENT))
    assert (at, at + len(COMMENT)) in tables_needed("x.so", kept)
    wheel = tmp_path / "x-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("x/libx.so", data)
        zf.writestr("x-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: x\nVersion: 1.0\n")
        zf.writestr("x-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        zf.writestr("x-1.0.dist-info/RECORD", "")
    (elf,) = read_wheel(wheel, ()).elf_files
    assert elf.comment == comment


def _patched(change: object) -> bytes:
    elf = ElfImage()
    elf.build()
    change(elf)  # type: ignore[operator]
    return bytes(elf.image)


MALFORMED = {
    "version chain that loops": (
        lambda e: (e.pack("HH", e.section_offset[".gnu.version_r"], 1, 65535),
                   e.set_shdr(".gnu.version_r", "sh_info", 65535)),
        "version-needed",
    ),
    "section names outside .shstrtab": (lambda e: e.set_shdr(".text", "sh_name", 0xFFFFFF00), "section name"),
    "e_shstrndx past the sections": (lambda e: e.set_ehdr("e_shstrndx", 4000), "e_shstrndx=4000"),
    "program headers past the end": (lambda e: e.set_ehdr("e_phoff", 0xFFFFFFFF), "program headers"),
    "NEEDED outside the string table": (
        lambda e: e.pack("Q", e.section_offset[".dynamic"] + 8, 0xFFFFFFF0), "dynamic tag 1"
    ),
    "a section past the end of the file": (
        lambda e: e.set_shdr(".text", "sh_offset", 1 << 40), "runs past the end of the file"
    ),
    "EI_CLASS 7": (lambda e: e.image.__setitem__(4, 7), "EI_CLASS=07"),
}


@pytest.mark.parametrize(("change", "says"), list(MALFORMED.values()), ids=list(MALFORMED))
def test_a_malformed_file_is_one_error(change: object, says: str) -> None:
    with pytest.raises(ElfReadError, match=says) as error:
        inspect_elf("hostile.so", _patched(change))
    assert str(error.value).startswith("hostile.so: not a readable ELF file (")


def test_a_dynamic_section_without_dt_null() -> None:
    with pytest.raises(ElfReadError, match="no DT_NULL"):
        inspect_elf("x.so", elf_bytes(dynamic_null=False))


def test_tables_needed_name_what_the_kept_pieces_lack() -> None:
    data = elf_bytes()
    header_and_tail = Image(len(data), [(0, data[:64 + 2 * 56]), (len(data) - 400, data[-400:])])
    with pytest.raises(MissingRange):
        header_and_tail.read(200, 8)
    wanted = tables_needed("x.so", Image.whole(data))
    assert wanted and all(0 < lo < hi <= len(data) for lo, hi in wanted)


def _fat_binary(*archs: int) -> bytes:
    entries = b"".join(
        struct.pack("<HHIQ", 2, 0x101, 64, 100) + bytes(12) + struct.pack("<I", a) + bytes(32) + b"\xee" * 100
        for a in archs
    )
    return NV_MAGIC + struct.pack("<Q", len(entries)) + entries


def _bundle(*targets: str) -> bytes:
    ids = [t.encode() for t in targets]
    body = b"".join(struct.pack("<QQQ", 4096, 0, len(i)) + i for i in ids)
    return b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", len(ids)) + body


def test_device_code_containers_by_their_headers() -> None:
    blob = b"\0" * 100 + _fat_binary(90, 80, 100) + b"\0" * 50 + _bundle("hipv4-amdgcn-amd-amdhsa--gfx942")
    for step in (1 << 20, 97, 5):  # one piece; pieces cutting headers and magics
        scanner = DeviceScanner(len(blob), GPU_NAMES)
        for at in range(0, len(blob), step):
            scanner.feed(at, blob[at : at + step])
        assert scanner.architectures([(0, len(blob))]) == ("gfx942", "sm_100", "sm_80", "sm_90")
        assert scanner.architectures([(0, 100)]) == ()


def test_a_payload_that_looks_like_a_container_is_not_read_inside_one() -> None:
    inner = _fat_binary(70)
    outer = NV_MAGIC + struct.pack("<Q", 64 + len(inner)) + struct.pack("<HHIQ", 2, 0x101, 64, len(inner))
    outer += bytes(12) + struct.pack("<I", 90) + bytes(32) + inner
    scanner = DeviceScanner(len(outer), GPU_NAMES)
    scanner.feed(0, outer)
    assert scanner.architectures([(0, len(outer))]) == ("sm_90",)


def test_a_container_format_is_one_class_behind_the_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    """What must stay code (a container's file format) sits behind `ContainerFormat`: a made-up
    format, added to `CONTAINERS`, is found and read by the same scanner, its names by the data."""

    class ToyContainer:
        magic = b"TOYCODE\0"

        def open(self, scan: devicecode.DeviceScanner, start: int) -> None:
            def header(at: int, raw: bytes) -> None:  # the magic, then the length of the target ids
                scan.want(at + 9, raw[8], lambda _at, ids: targets(at, raw[8], ids))

            def targets(at: int, length: int, ids: bytes) -> None:
                scan.record(at, devicecode.find_architectures(ids, scan.names))
                scan.cover(at + 9 + length)

            scan.want(start, 9, header)

    monkeypatch.setattr(devicecode, "CONTAINERS", (*devicecode.CONTAINERS, ToyContainer()))
    targets = b"npu--ascend910b\0npu--ascend310p"
    blob = b"\0" * 64 + b"TOYCODE\0" + bytes([len(targets)]) + targets + b"\0" * 64
    names = architecture_names(["ascend[0-9]{3}[a-z]?"])
    for step in (1 << 20, 7):
        scanner = devicecode.DeviceScanner(len(blob), names)
        for at in range(0, len(blob), step):
            scanner.feed(at, blob[at : at + step])
        assert scanner.architectures([(0, len(blob))]) == ("ascend310p", "ascend910b")
        assert scanner.architectures([(0, 64)]) == ()


def test_an_elf_file_on_disk_is_read_by_its_tables_only(tmp_path: Path) -> None:
    """Smoke's runtime layout reads the NEEDED of every library in a runtime directory: the same
    reader as verify, from the file's headers and tables (not its code, which runs to GBs)."""
    data = elf_bytes(needed=("libhsa-runtime64.so.1", "libc.so.6"), soname="libamdhip64.so.7")
    path = tmp_path / "libamdhip64.so.7"
    path.write_bytes(data + bytes(4 << 20))  # a large tail nothing points into
    info = read_elf_file(path)
    assert info.needed == inspect_elf("x", data).needed == ("libhsa-runtime64.so.1", "libc.so.6")
    assert info.soname == "libamdhip64.so.7"
    (tmp_path / "not-elf.so").write_bytes(b"\x7fELF" + b"\xff" * 60)
    with pytest.raises(ElfReadError):
        read_elf_file(tmp_path / "not-elf.so")


def test_runtime_files_follow_needed_through_our_reader(tmp_path: Path) -> None:
    libdir = tmp_path / "lib"
    libdir.mkdir()
    (libdir / "libamdhip64.so.7").write_bytes(elf_bytes(needed=("libhsakmt.so.1", "libnuma.so.1")))
    (libdir / "libhsakmt.so.1").write_bytes(elf_bytes(needed=("libc.so.6",)))
    (libdir / "libnuma.so.1").write_bytes(elf_bytes(needed=("libc.so.6",)))
    (libdir / "libother.so.1").write_bytes(elf_bytes(needed=("libnuma.so.1",)))
    assert runtime_files(libdir, ("libamdhip64.so*",)) == ("libamdhip64.so.7", "libhsakmt.so.1")


def test_the_tables_the_dynamic_segment_names_are_kept_as_the_file_streams() -> None:
    """A library whose string table or hash table lies past its first bytes (patchelf moves them
    to a segment at the end) is not inflated a second time: once the dynamic segment has passed,
    the ranges it names are kept (issue 49)."""
    built = ElfImage(text=b"\x90" * (1 << 20))
    data = bytes(built.build())
    plan = plan_reading("big.so", data[: 1 << 20], len(data))
    assert plan.dynamic is not None
    held = Image(len(data), [(lo, data[lo:hi]) for lo, hi in plan.keep])
    ranges = dynamic_keep(held)
    strtab = built.section_offset[".dynstr"]
    verneed = built.section_offset[".gnu.version_r"]
    assert any(lo == strtab and hi > strtab for lo, hi in ranges)
    assert any(lo == verneed for lo, _hi in ranges)
    assert dynamic_keep(Image(len(data), [(0, data[:64])])) == []  # no dynamic segment at hand: nothing
    loaded_end = max(hi for _lo, hi in plan.loaded)
    if loaded_end < len(data):  # the bytes after a loadable segment (`.comment`) are kept
        assert any(lo == loaded_end for lo, _hi in plan.keep)


def test_a_magic_is_found_by_its_prefix_and_checked_whole() -> None:
    """The fat binary magic is searched by its first five bytes (faster), and a prefix followed by
    other bytes is no container."""
    decoy = NV_MAGIC[:5] + b"\x07" * 11
    window = b"\0" * 100 + decoy + b"\0" * 7 + NV_MAGIC + b"\0" * 8
    at = window.index(NV_MAGIC)
    assert devicecode._find(window, NV_MAGIC, 0, len(window)) == at
    assert devicecode._find(window, NV_MAGIC, at + 1, len(window)) == -1


def test_the_fat_binary_magic_by_its_rare_byte_finds_what_the_needle_finds() -> None:
    """`_find` looks for the fat binary magic by its rarest byte in code (memchr); where that byte
    is dense (compressed data: a hostile file full of it) it falls back to the needle search, so
    the answers are the same and the cost stays bounded (issue 49)."""
    import random

    rng = random.Random(49)
    dense = bytes(rng.choice(b"\xed\x50\x55\xba\x01\x00") for _ in range(200_000))
    code = bytes(rng.randrange(256) for _ in range(200_000))
    for body in (dense, code, b"\xed" * 100_000):
        for at in (0, 7, len(body) // 2, len(body)):
            window = body[:at] + NV_MAGIC + body[at:]
            for start in (0, 1, at, at + 1):
                want = devicecode._find_needle(window, NV_MAGIC, start, len(window))
                got = devicecode._find(window, NV_MAGIC, start, len(window))
                assert (got if 0 <= got < len(window) else -1) == (want if 0 <= want < len(window) else -1)
    window = b"\0" * 64 + NV_MAGIC
    assert devicecode._find(window, NV_MAGIC, 0, 64) == -1  # starts at `end`: not before it


def test_the_reader_finds_the_gpu_code_of_a_library_kept_whole_and_of_a_streamed_one(tmp_path: Path) -> None:
    """A library of at most `HEAD_KEEP` bytes is kept whole as it streams and searched for GPU
    code once it has passed (only when it has device sections); a larger one is searched as it
    passes. Both give what `inspect_elf` gives on the whole file (issue 49)."""
    from release.inspect.reader import read_wheel

    device = [
        Section(".nv_fatbin", SHT_PROGBITS, bytes(16) + _fat_binary(80, 90), SHF_ALLOC),
        Section(".hip_fatbin", SHT_PROGBITS, _bundle("hipv4-amdgcn-amd-amdhsa--gfx942"), SHF_ALLOC),
    ]
    libraries = {
        "x/libsmall.so": elf_bytes(extra_sections=device),
        "x/liblarge.so": elf_bytes(extra_sections=[Section(".big", SHT_PROGBITS, bytes(HEAD_KEEP)), *device]),
    }
    assert len(libraries["x/libsmall.so"]) <= HEAD_KEEP < len(libraries["x/liblarge.so"])
    wheel = tmp_path / "x-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in libraries.items():
            zf.writestr(name, data)
        zf.writestr("x-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: x\nVersion: 1.0\n")
        zf.writestr("x-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        zf.writestr("x-1.0.dist-info/RECORD", "")
    sections = (".nv_fatbin", ".hip_fatbin")
    read = {e.path: e for e in read_wheel(wheel, sections, GPU_NAMES).elf_files}
    for name, data in libraries.items():
        whole = inspect_elf(name, data, device_sections=sections, architecture_names=GPU_NAMES)
        assert whole.architectures == ("gfx942", "sm_80", "sm_90")
        assert read[name] == whole
    assert [e.architectures for e in read_wheel(wheel, (), GPU_NAMES).elf_files] == [(), ()]


def test_an_object_file_without_program_headers_is_read_by_its_sections() -> None:
    # What a compiler writes for `-c`: ET_REL, no program headers, and e_phentsize 0 (GCC and Clang both).
    section = Section(".comment", SHT_PROGBITS, b"\0" + COMMENT)

    elf = ElfImage(extra_sections=[section], e_type=1)
    elf.build()
    for name in ("e_phnum", "e_phentsize", "e_phoff"):
        elf.set_ehdr(name, 0)
    info = inspect_elf("stamp.o", bytes(elf.image))
    assert info.comment == (*COMPILERS, "Linker: LLD 19.1.7")
