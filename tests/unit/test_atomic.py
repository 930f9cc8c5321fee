"""Outputs appear whole under their final name or not at all (release.atomic)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from release import atomic


def _full_disk(_fd: int) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_write_replaces_a_symlink_instead_of_following_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("keep", encoding="utf-8")
    target = tmp_path / "a.verify.json"
    target.symlink_to(outside)
    atomic.write_text(target, "{}\n")
    assert not target.is_symlink()
    assert target.read_text(encoding="utf-8") == "{}\n"
    assert outside.read_text(encoding="utf-8") == "keep"


def test_a_failed_write_leaves_nothing_under_the_final_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(atomic.os, "fsync", _full_disk)
    with pytest.raises(OSError, match="No space"):
        atomic.write_bytes(tmp_path / "x.whl", b"PK" * 1000)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_keeps_the_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "x.whl"
    target.write_bytes(b"old")
    monkeypatch.setattr(atomic.os, "fsync", _full_disk)
    with pytest.raises(OSError):
        atomic.write_bytes(target, b"new")
    assert [p.name for p in tmp_path.iterdir()] == ["x.whl"]
    assert target.read_bytes() == b"old"


@pytest.mark.parametrize("same_filesystem", [True, False])
def test_move_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, same_filesystem: bool) -> None:
    source = tmp_path / "src" / "w.whl"
    source.parent.mkdir()
    source.write_bytes(b"wheel")
    source.chmod(0o640)
    dest = tmp_path / "dest"
    dest.mkdir()
    if not same_filesystem:
        real_stat = Path.stat

        def other_device(self: Path, **kwargs: bool) -> os.stat_result:
            result = real_stat(self, **kwargs)
            if self == source:
                fields = list(result)
                fields[2] += 1  # st_dev
                return os.stat_result(fields)
            return result

        monkeypatch.setattr(Path, "stat", other_device)
    moved = atomic.move_file(source, dest / "w.whl")
    assert moved.read_bytes() == b"wheel"
    assert not source.exists()
    assert [p.name for p in dest.iterdir()] == ["w.whl"]
    assert moved.stat().st_mode & 0o777 == 0o640


def test_a_failed_cross_filesystem_move_keeps_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "w.whl"
    source.write_bytes(b"wheel")
    dest = tmp_path / "dest"
    dest.mkdir()
    monkeypatch.setattr(atomic, "_scratch", _failing_scratch)
    with pytest.raises(OSError):
        atomic.copy_file(source, dest / "w.whl")
    assert source.read_bytes() == b"wheel"
    assert list(dest.iterdir()) == []


def _failing_scratch(target: Path) -> object:
    raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(target.parent))
