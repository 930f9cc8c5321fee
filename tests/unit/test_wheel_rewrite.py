"""The one wheel writer (`release.wheel.rewrite`), in both the shapes it serves: repair's in-place
replacement of members, and a variant wheel's renamed, edited and added members."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import pytest

from release.wheel.archive import WheelReadError, parse_record
from release.wheel.rewrite import rewrite_wheel

INFO = "pkg_cuda-1.0.dist-info"
SOURCE_TIME = (2023, 11, 14, 22, 13, 20)
DEFLATED, STORED = zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED
MEMBERS = [
    # name, data, unix mode, compression
    ("pkg/", b"", 0o40755, STORED),
    ("pkg/__init__.py", b"x = 1\n", 0o100644, DEFLATED),
    ("pkg/_native.so", b"\x7fELF" + bytes(5000), 0o100755, DEFLATED),
    ("pkg/blob.bin", b"stored" * 100, 0o100644, STORED),
    (f"{INFO}/METADATA", b"Metadata-Version: 2.1\nName: pkg-cuda\nVersion: 1.0\n\nbody\n", 0o100644, 8),
    (f"{INFO}/WHEEL", b"Wheel-Version: 1.0\nTag: py3-none-any\n", 0o100644, DEFLATED),
]


def _wheel(path: Path) -> Path:
    rows = [f"{n},sha256={_digest(d)},{len(d)}" for n, d, _m, _c in MEMBERS if not n.endswith("/")]
    record = ("\n".join(rows) + f"\n{INFO}/RECORD,,\n").encode()
    files = [*MEMBERS, (f"{INFO}/RECORD", record, 0o100644, DEFLATED)]
    files.insert(3, (f"{INFO}/RECORD.jws", b"{}", 0o100644, DEFLATED))
    with zipfile.ZipFile(path, "w") as archive:
        for name, data, mode, compression in files:
            info = zipfile.ZipInfo(name, date_time=SOURCE_TIME)
            info.external_attr = mode << 16
            info.compress_type = compression
            archive.writestr(info, data)
    return path


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _record_matches(archive: zipfile.ZipFile) -> list[str]:
    """The files RECORD lists, checked against the bytes in the archive (hash and size)."""
    record = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
    listed = []
    for row in parse_record(archive.read(record).decode()):
        listed.append(row.path)
        if row.path == record:
            assert (row.digest, row.size) == (None, None)
            continue
        data = archive.read(row.path)
        assert (row.algorithm, row.digest, row.size) == ("sha256", _digest(data), len(data)), row.path
    return listed


def test_replacing_members_in_place_keeps_order_times_modes_and_compression(tmp_path: Path) -> None:
    source = _wheel(tmp_path / "pkg_cuda-1.0-py3-none-any.whl")
    new_elf = b"\x7fELF" + bytes(100)
    copy = rewrite_wheel(source, tmp_path / "out.whl", replace={"pkg/_native.so": new_elf})
    with zipfile.ZipFile(copy) as archive:
        infos = archive.infolist()
        files = [n for n, _d, _m, _c in MEMBERS if not n.endswith("/")]
        assert [i.filename for i in infos] == [n for n, *_ in MEMBERS] + [f"{INFO}/RECORD"]
        assert archive.read("pkg/_native.so") == new_elf
        assert _record_matches(archive) == [*files, f"{INFO}/RECORD"]
        assert archive.testzip() is None
    by_name = {i.filename: i for i in infos}
    for name, _data, mode, compression in MEMBERS:
        info = by_name[name]
        kept = (info.date_time, info.external_attr >> 16, info.compress_type)
        assert kept == (SOURCE_TIME, mode, compression), name
    assert by_name[f"{INFO}/RECORD"].date_time == SOURCE_TIME
    again = rewrite_wheel(source, tmp_path / "again.whl", replace={"pkg/_native.so": new_elf})
    assert again.read_bytes() == copy.read_bytes()


def test_a_wheel_is_rewritten_in_place_atomically(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "pkg_cuda-1.0-py3-none-any.whl")
    metadata = b"Metadata-Version: 2.1\nName: pkg-cuda\nRequires-External: libcudart.so.13\n"
    rewrite_wheel(wheel, wheel, replace={f"{INFO}/METADATA": metadata})
    assert sorted(p.name for p in tmp_path.iterdir()) == [wheel.name]
    assert wheel.stat().st_mode & 0o777 == 0o644
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read(f"{INFO}/METADATA") == metadata
        _record_matches(archive)


def test_a_variant_copy_renames_edits_and_adds_members(tmp_path: Path) -> None:
    source = _wheel(tmp_path / "pkg_cuda-1.0-py3-none-any.whl")
    shared = "pkg-1.0.dist-info"
    copy = rewrite_wheel(
        source,
        tmp_path / "pkg-1.0-py3-none-any-cu13.whl",
        rename=lambda name: name.replace(INFO, shared),
        edit={f"{shared}/METADATA": lambda data: data.replace(b"Name: pkg-cuda", b"Name: pkg")},
        add={f"{shared}/variant.json": b"{}\n"},
    )
    with zipfile.ZipFile(copy) as archive:
        names = archive.namelist()
        assert names[-2:] == [f"{shared}/variant.json", f"{shared}/RECORD"]
        assert not [n for n in names if INFO in n or n.endswith(".jws")]
        assert b"Name: pkg\n" in archive.read(f"{shared}/METADATA")
        assert f"{shared}/variant.json" in _record_matches(archive)
        assert archive.getinfo(f"{shared}/variant.json").date_time == (2020, 1, 1, 0, 0, 0)
        assert archive.getinfo(f"{shared}/METADATA").date_time == SOURCE_TIME


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"replace": {"pkg/missing.so": b""}}, "no member pkg/missing.so to replace"),
        ({"edit": {"pkg/missing.txt": bytes}}, "no member pkg/missing.txt to edit"),
        ({"rename": lambda name: "pkg/__init__.py" if name == "pkg/_native.so" else name}, "written twice"),
    ],
)
def test_what_cannot_be_written_is_named_and_leaves_no_file(
    tmp_path: Path, changes: dict[str, object], says: str
) -> None:
    source = _wheel(tmp_path / "pkg_cuda-1.0-py3-none-any.whl")
    with pytest.raises(WheelReadError, match=says):
        rewrite_wheel(source, tmp_path / "out.whl", **changes)  # type: ignore[arg-type]
    assert sorted(p.name for p in tmp_path.iterdir()) == [source.name]
