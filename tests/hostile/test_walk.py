"""The one walk of a tree the toolkit did not make (`release.wheel.files.walk`): iterative, bounded
in entries and depth, and never through a link (out of the tree, or in a loop)."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.commands.verify import _collect
from release.errors import UsageError
from release.wheel import files


def test_a_link_out_or_a_loop_is_never_entered(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.whl").write_bytes(b"x")
    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    (tree / "a" / "out").symlink_to(outside)
    (tree / "a" / "loop").symlink_to(tree)
    (tree / "a" / "mine.whl").write_bytes(b"x")
    assert files.walk_files(tree, ".whl") == [tree / "a" / "mine.whl"]
    assert {p.name for p in files.walk(tree)} == {"a", "out", "loop", "mine.whl"}


def test_a_deep_tree_is_bounded_and_no_recursion_error(tmp_path: Path) -> None:
    levels = [tmp_path / ("d/" * n) for n in range(1, files.MAX_WALK_DEPTH + 8)]
    levels[-1].mkdir(parents=True)
    (levels[-1] / "x.whl").write_bytes(b"x")
    try:
        assert files.walk_files(tmp_path, ".whl") == []  # below MAX_WALK_DEPTH levels: not entered
        assert files.walk_files(tmp_path, ".whl", max_depth=100) == [levels[-1] / "x.whl"]
    finally:  # removed here, bottom up: a deep tree left in the shared temporary root breaks rmtree
        (levels[-1] / "x.whl").unlink()
        for level in reversed(levels):
            level.rmdir()


def test_too_many_entries_is_one_line(tmp_path: Path) -> None:
    for n in range(50):
        (tmp_path / f"{n}.whl").write_bytes(b"x")
    with pytest.raises(files.TooManyEntries):
        files.walk_files(tmp_path, ".whl", max_entries=10)


def test_verify_of_a_directory_walks_it_without_following_links_out(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "elsewhere").symlink_to(Path.home())
    with pytest.raises(UsageError, match="no wheels"):
        _collect([str(tmp_path / "empty")])
