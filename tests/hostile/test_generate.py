"""The hostile corpus generator: deterministic, fast, small, and its bombs really are bombs.

No assertion about `release verify` here yet: tests/hostile/BASELINE.md records what it does today.
"""

from __future__ import annotations

import bz2
import hashlib
import io
import lzma
import re
import time
import zipfile
import zlib
from pathlib import Path

import pytest

from tests.hostile import builders
from tests.hostile.cases import CASES, case, generate

DESIGN_RULES = {
    "vendored-runtime", "missing-runtime-needed", "duplicate-library", "debug-info", "build-path-rpath",
    "platform-floor", "external-dependency", "device-code", "wheel-name", "non-executable-script",
    "variant-conflict", "runtime-abi", "wheel-integrity", "size-limit", "padding", "consistency",
    "stable-abi",
}  # fmt: skip


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Path], float]:
    directory = tmp_path_factory.mktemp("hostile")
    started = time.monotonic()
    paths = {c.id: generate(c, directory) for c in CASES}
    return paths, time.monotonic() - started


def test_case_list_shape() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) >= 45
    assert len(set(ids)) == len(ids)
    for c in CASES:
        assert re.fullmatch(r"[a-z0-9][a-z0-9.\-_]*", c.id), c.id
        assert c.description and "\n" not in c.description
        assert c.expected in ("error", "ok") or c.expected.startswith("rule:"), c.expected
        assert set(c.expected_rules) <= DESIGN_RULES, c.expected
        assert c.flags <= {"matrix", "report-symlink"}


def test_generation_is_fast_and_small(generated: tuple[dict[str, Path], float]) -> None:
    paths, seconds = generated
    sizes = {cid: p.stat().st_size for cid, p in paths.items()}
    assert sum(sizes.values()) < 50_000_000
    assert max(sizes.values()) < 16_000_000
    # 5 s on an idle machine; leave room for a loaded CI runner.
    assert seconds < 20, f"generating every case took {seconds:.1f} s"


def test_generation_is_deterministic(generated: tuple[dict[str, Path], float], tmp_path: Path) -> None:
    paths, _ = generated
    for c in CASES:
        again = generate(c, tmp_path)
        assert again.name == paths[c.id].name
        first = hashlib.sha256(paths[c.id].read_bytes()).hexdigest()
        assert hashlib.sha256(again.read_bytes()).hexdigest() == first, c.id


def test_report_symlink_case_points_outside(generated: tuple[dict[str, Path], float]) -> None:
    paths, _ = generated
    wheel = paths["report-symlink"]
    link = wheel.with_name(wheel.name + ".verify.json")
    assert link.is_symlink()
    assert link.resolve().parent != wheel.parent


def test_control_wheels_are_valid_zips_with_matching_record(generated: tuple[dict[str, Path], float]) -> None:
    paths, _ = generated
    for cid in ("control-valid", "zip-comment-max", "many-entries-100k", "elf-manylinux-glibc-2.99"):
        with zipfile.ZipFile(paths[cid]) as zf:
            assert zf.testzip() is None
            record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
            rows = [line.split(",") for line in zf.read(record).decode().splitlines()]
            listed = {name for name, _, _ in rows}
            assert listed == set(zf.namelist()), cid
            for name, digest, size in rows[:200]:  # many-entries-100k: a sample is enough
                if name != record:
                    data = zf.read(name)
                    assert digest == builders.record_hash(data) and int(size) == len(data), (cid, name)


def test_deflate_pieces_round_trip() -> None:
    pieces: list[bytes | tuple[int, int]] = [b"\x7fELF", (0, 1000), (1, 258 * 7 + 3), b"tail", (2, 1)]
    stream, size = builders.deflate_pieces(pieces)
    data = zlib.decompress(stream, -15)
    assert data == b"\x7fELF" + bytes(1000) + b"\x01" * (258 * 7 + 3) + b"tail\x02"
    assert size == len(data)
    assert builders.crc_of_pieces(pieces) == zlib.crc32(data)


def test_deflate_bomb_ratio() -> None:
    stream, size = builders.deflate_pieces([(0, 1 << 30)])
    assert size == 1 << 30 and len(stream) < 1_100_000
    inflater = zlib.decompressobj(-15)
    assert inflater.decompress(stream, 8 << 20) == bytes(8 << 20)


def test_bzip2_block_constant_is_what_libbz2_writes() -> None:
    assert builders.derive_bzip2_block() == builders._bzip2_block()


def test_bzip2_bomb_decodes() -> None:
    stream, size = builders.bzip2_bomb(50)
    assert len(stream) < 2500 and size == 50 * builders.BZ2_BLOCK_INPUT
    assert bz2.BZ2Decompressor().decompress(stream, 64 << 20) == bytes(64 << 20)
    small, small_size = builders.bzip2_bomb(2)
    assert len(bz2.decompress(small)) == small_size  # both blocks and the combined CRC are right


def test_lzma_bomb_decodes_through_zipfile_format() -> None:
    payload = builders.lzma_bomb(20_000)
    props = payload[4:9]
    filters = [lzma._decode_filter_properties(lzma.FILTER_LZMA1, props)]  # type: ignore[attr-defined]
    out = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=filters).decompress(payload[9:], 64 << 20)
    assert len(out) == 64 << 20 and set(out) == {0xFF}
    assert len(payload) * builders.LZMA_RATIO > 100_000_000


def test_elf_images_parse_with_pyelftools() -> None:
    elftools = pytest.importorskip("elftools.elf.elffile")
    for options in ({}, {"elfclass": 32, "machine": builders.EM_386},
                    {"big_endian": True, "machine": builders.EM_PPC64}):
        image = builders.elf_bytes(verneed=(("libc.so.6", ("GLIBC_2.2.5", "GLIBC_2.17")),), **options)
        elf = elftools.ELFFile(io.BytesIO(image))
        dynamic = elf.get_section_by_name(".dynamic")
        assert [t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"] == ["libc.so.6"]
        verneed = elf.get_section_by_name(".gnu.version_r")
        names = [a.name for _, auxes in verneed.iter_versions() for a in auxes]
        assert names == ["GLIBC_2.2.5", "GLIBC_2.17"]


def test_overlap_bomb_shares_one_local_header(generated: tuple[dict[str, Path], float]) -> None:
    paths, _ = generated
    with zipfile.ZipFile(paths["zip-overlap-bomb"]) as zf:
        offsets = {i.header_offset for i in zf.infolist() if i.filename.startswith("hostile/lib")}
        declared = sum(i.file_size for i in zf.infolist())
    assert len(offsets) == 1
    assert declared > 100_000_000_000
    assert 150_000 < paths["zip-overlap-bomb"].stat().st_size < 250_000


def test_lzma_case_is_about_222_kb() -> None:
    built = case("zip-lzma-import-scan").build()
    assert 200_000 < len(built.data) < 260_000
    assert built.filename.startswith("xfer_engine_cpu-0.1.0-")
