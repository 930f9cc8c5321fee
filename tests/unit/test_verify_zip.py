"""The bounded zip reader (`release.wheel.zip`, `release.wheel.inflate`) on archives built in memory."""

from __future__ import annotations

import os
import stat
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from release.wheel import inflate
from release.wheel.archive import parse_record
from release.wheel.zip import Archive, ZipError, read_directory
from tests.hostile.builders import (
    MODE_SYMLINK,
    ZIP_BZIP2,
    ZIP_DEFLATED,
    ZIP_STORED,
    ZipEntry,
    build_zip,
    deflate_pieces,
)


@contextmanager
def opened(data: bytes, tmp_path: Path) -> Iterator[Archive]:
    path = tmp_path / "archive.whl"
    path.write_bytes(data)
    with path.open("rb") as fh:
        yield Archive(fh.fileno(), os.fstat(fh.fileno()).st_size)


def entries(data: bytes, tmp_path: Path) -> list[str]:
    with opened(data, tmp_path) as archive:
        return [e.name for e in read_directory(archive)]


def test_a_valid_archive(tmp_path: Path) -> None:
    data = build_zip([
        ZipEntry("pkg/__init__.py", b"x = 1\n"),
        ZipEntry("pkg/stored.bin", b"\0" * 100, ZIP_STORED),
        ZipEntry("pkg/", b""),
        ZipEntry("pkg/link", b"target", external_attr=MODE_SYMLINK),
    ])
    with opened(data, tmp_path) as archive:
        found = {e.name: e for e in read_directory(archive)}
        budget = inflate.Budget(1 << 20)
        assert inflate.read_member(archive, found["pkg/__init__.py"], budget, most=100) == b"x = 1\n"
        assert inflate.read_member(archive, found["pkg/stored.bin"], budget, most=100) == b"\0" * 100
        assert found["pkg/"].is_dir and not found["pkg/__init__.py"].is_dir
        assert found["pkg/link"].is_symlink and stat.S_ISLNK(found["pkg/link"].unix_mode)
        assert found["pkg/__init__.py"].unix_mode & 0o777 == 0o644


def test_bytes_after_the_end_record_are_allowed_as_by_zipfile(tmp_path: Path) -> None:
    assert entries(build_zip([ZipEntry("a.py", b"a")]) + b"\0", tmp_path) == ["a.py"]


def _swap_local_name(entry: str, name: str) -> list[ZipEntry]:
    return [ZipEntry(entry, b"data", local_name=name)]


BROKEN = {
    "not a zip": (b"\0" * 4096, "not a zip archive"),
    "empty": (b"", "not a zip archive"),
    "fake end record in the comment": (
        build_zip([ZipEntry("a.py", b"a")], comment=b"x" * 100 + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0,
                                                                          0, 0, 0, 0, 0)),
        "ambiguous",
    ),
    "directory offset past the end": (build_zip([ZipEntry("a.py", b"a")], cd_offset=1 << 24), "runs past"),
    "count the directory cannot hold": (build_zip([ZipEntry("a.py", b"a")], cd_count=65535), "more than"),
    "count smaller than the directory": (
        build_zip([ZipEntry("a.py", b"a"), ZipEntry("b.py", b"b")], cd_count=1), "more than the 1 entries"
    ),
    "local header names another file": (build_zip(_swap_local_name("a.py", "../evil.py")), "another file"),
    "stored member with two sizes": (
        build_zip([ZipEntry("a.so", b"x" * 10, ZIP_STORED, file_size=20)]), "stored, but declares"
    ),
    "encrypted": (build_zip([ZipEntry("a.py", b"a", flag_bits=1)]), "encrypted"),
    "bzip2": (build_zip([ZipEntry("a.so", b"a" * 100, ZIP_BZIP2)]), "bzip2"),
    "a second name for one local header": (
        build_zip([ZipEntry("a.py", b"a" * 50), ZipEntry("b.py", b"", share_local_of="a.py")]),
        "b.py: its local header names another file",
    ),
    "overlapping entries": (
        build_zip([ZipEntry("a.py", b"a" * 50, compress_size=40), ZipEntry("b.py", b"b")]),
        "a.py and b.py: entries overlap",
    ),
}


@pytest.mark.parametrize(("data", "says"), list(BROKEN.values()), ids=list(BROKEN))
def test_a_broken_archive_is_one_error(data: bytes, says: str, tmp_path: Path) -> None:
    with pytest.raises(ZipError, match=says):
        entries(data, tmp_path)


def _member(entry: ZipEntry, tmp_path: Path, budget: int = 1 << 30, **kw: int) -> bytes:
    with opened(build_zip([entry]), tmp_path) as archive:
        (found,) = read_directory(archive)
        return b"".join(inflate.pieces(archive, found, inflate.Budget(budget), chunk=1 << 16, **kw))


def test_inflation_stops_at_the_declared_size(tmp_path: Path) -> None:
    payload, size = deflate_pieces([b"\x7fELF", (0, 200 << 20)])
    lie = ZipEntry("x.so", b"", ZIP_DEFLATED, payload=payload, file_size=4096, crc=0)
    with pytest.raises(ZipError, match=r"x\.so: inflates past its declared size of 4096"):
        _member(lie, tmp_path)
    assert size > 4096


def test_a_short_stream_and_a_wrong_crc_are_errors(tmp_path: Path) -> None:
    short = ZipEntry("x.py", b"abc", file_size=10)
    with pytest.raises(ZipError, match="inflates to 3 bytes, its declared size is 10"):
        _member(short, tmp_path)
    with pytest.raises(ZipError, match="CRC-32"):
        _member(ZipEntry("x.py", b"abc", crc=zlib.crc32(b"abd")), tmp_path)


def test_the_budget_is_shared_by_every_read(tmp_path: Path) -> None:
    with pytest.raises(ZipError, match="the budget"):
        _member(ZipEntry("x.bin", b"y" * 5000), tmp_path, budget=4000)
    assert inflate.budget_for(10) == inflate.BUDGET_FLOOR + 320


def test_a_limited_read_gives_the_first_bytes(tmp_path: Path) -> None:
    data = bytes(range(256)) * 1000
    assert _member(ZipEntry("x.bin", data), tmp_path, limit=1000) == data[:1000]
    assert _member(ZipEntry("x.bin", data, ZIP_STORED), tmp_path, limit=1000) == data[:1000]


def test_read_member_refuses_a_large_member(tmp_path: Path) -> None:
    with opened(build_zip([ZipEntry("big.txt", b"z" * 100)]), tmp_path) as archive:
        (found,) = read_directory(archive)
        with pytest.raises(ZipError, match="more than the 10"):
            inflate.read_member(archive, found, inflate.Budget(1 << 20), most=10)


def test_record_lines() -> None:
    rows = parse_record('a.py,sha256=abc,3\n"b,c.py",sha256=def,4\nx.dist-info/RECORD,,\n')
    assert [(r.path, r.algorithm, r.digest, r.size) for r in rows] == [
        ("a.py", "sha256", "abc", 3),
        ("b,c.py", "sha256", "def", 4),
        ("x.dist-info/RECORD", None, None, None),
    ]
