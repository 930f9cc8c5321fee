"""Hostile build files and trees for `release init`, staging's `.gitignore` and `release plan`
(issue 57, causes 6, 7, 8 and 15), in-process (no process starts). Each ran forever, read a
device, tracebacked or took tens of seconds before its fix:

- 6: a FIFO, a link to `/dev/zero` or a huge file named like a build file (a `meson.build` below
  the root, a `*.cmake`, the CMakeLists.txt of a non-default `cmake.source-dir`, a `.gitignore`);
- 7: `[z-a]` in a `.gitignore` (re.error) and `*a*a*a*a*a*a*a*a*a*a*a*a*b` against a long name
  (a backtracking regex that never ends);
- 8: a megabyte of meson `option(`, a megabyte of CMake requests (line numbers counted from the
  start per match), 20,000 `# yours:` lines;
- 15: a tree 1,900 directories deep (`rglob`'s RecursionError).

Each case runs in a thread with a deadline: a hang fails the test instead of stopping the run.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from release import cli
from release.builder.gitignore import GitIgnore
from release.config.placeholders import unfilled
from release.init import meson, scan, sysdeps

T = TypeVar("T")
MESON_PYPROJECT = (
    '[build-system]\nbuild-backend = "mesonpy"\nrequires = ["meson-python"]\n'
    '[project]\nname = "ringlet"\nversion = "0.1"\n'
)
SKBUILD_PYPROJECT = (
    '[build-system]\nbuild-backend = "scikit_build_core.build"\nrequires = ["scikit-build-core"]\n'
    '[project]\nname = "ringlet"\nversion = "0.1"\n[tool.scikit-build.cmake]\nsource-dir = "native"\n'
)


def within(seconds: float, work: Callable[[], T]) -> T:
    """`work()`'s result, failing the test if it has not returned within `seconds`."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    assert time.monotonic() - started < seconds
    return box["value"]  # type: ignore[return-value]


def plant(path: Path, kind: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:  # huge: more than any cap, mostly comment
        with path.open("wb") as handle:
            handle.write(b"#" * (6 << 20) + b"\ndependency('huge')\nfind_package(huge)\n")


def meson_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(MESON_PYPROJECT, encoding="utf-8")
    (root / "meson.build").write_text(
        "project('ringlet', 'c')\ndependency('zlib')\nsubdir('src')\n", encoding="utf-8"
    )
    return root


# -- cause 6: build files read by the one reader ---------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge"])
def test_a_meson_build_below_the_root_is_read_regular_only_and_capped(tmp_path: Path, kind: str) -> None:
    root = meson_project(tmp_path / "repo")
    plant(root / "src" / "meson.build", kind)
    found = within(30, lambda: meson.dependencies(root))
    assert found == [("dependency", "zlib", "meson.build:2")]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge"])
def test_a_cmake_file_below_the_root_is_read_regular_only_and_capped(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "repo"
    (root / "cmake").mkdir(parents=True)
    (root / "CMakeLists.txt").write_text("find_package(glog REQUIRED)\n", encoding="utf-8")
    plant(root / "cmake" / "deps.cmake", kind)
    requests = within(30, lambda: sysdeps.requests(root))
    assert [(r.kind, r.name) for r in requests] == [("find_package", "glog")]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge"])
def test_a_non_default_cmake_source_dir_is_read_regular_only(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "repo"
    (root / "native").mkdir(parents=True)
    (root / "pyproject.toml").write_text(SKBUILD_PYPROJECT, encoding="utf-8")
    (root / "native" / "CMakeLists.txt").write_text(
        'include(backend.cmake)\noption(USE_CUDA "cuda" OFF)\n', encoding="utf-8"
    )
    plant(root / "native" / "backend.cmake", kind)
    project = within(30, lambda: scan.read_project(root))
    assert [o.name for o in project.cmake_options] == ["USE_CUDA"]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge"])
def test_a_gitignore_that_is_no_regular_file_ignores_nothing(tmp_path: Path, kind: str) -> None:
    plant(tmp_path / "src" / ".gitignore", kind)
    (tmp_path / ".gitignore").write_text("*.o\n", encoding="utf-8")
    gitignore = GitIgnore(tmp_path)
    assert within(30, lambda: gitignore.ignored("src/x.o", is_dir=False))
    assert not within(30, lambda: gitignore.ignored("src/x.c", is_dir=False))


# -- cause 7: the .gitignore matcher ---------------------------------------------------------------


def test_a_reversed_range_reads_as_git_reads_it_and_spoils_no_other_rule(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("[z-a]\n*.o\n", encoding="utf-8")
    gitignore = GitIgnore(tmp_path)
    assert not gitignore.ignored("m", is_dir=False)
    assert gitignore.ignored("z", is_dir=False)  # git's wildmatch: the first character, literally
    assert gitignore.ignored("x.o", is_dir=False)


def test_a_backtracking_pattern_on_a_long_name_is_linear(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*a*a*a*a*a*a*a*a*a*a*a*a*b\n", encoding="utf-8")
    gitignore = GitIgnore(tmp_path)
    assert not within(5, lambda: gitignore.ignored("a" * 250, is_dir=False))
    assert within(5, lambda: gitignore.ignored("a" * 249 + "b", is_dir=False))


# -- cause 8: linear scans, line numbers counted once ----------------------------------------------


def test_a_megabyte_of_meson_option_calls_scans_in_seconds() -> None:
    text = "option('a', description: 'x' " * ((1 << 20) // 30)
    assert within(30, lambda: meson.parse_options(text[: 1 << 20])) == ()


def test_a_megabyte_of_unclosed_meson_strings_scans_in_seconds() -> None:
    text = ("'x\\'" * 250_000)[: 1 << 20]
    within(30, lambda: meson.parse_options(text))


def test_a_megabyte_cmake_file_numbers_its_lines_once(tmp_path: Path) -> None:
    lines = [f"find_package(pkg{n})" for n in range(60_000)]
    (tmp_path / "CMakeLists.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    requests = within(30, lambda: sysdeps.requests(tmp_path))
    assert len(requests) == 60_000
    assert requests[-1].where == "CMakeLists.txt:60000"


def test_unclosed_pkg_check_modules_calls_scan_in_seconds(tmp_path: Path) -> None:
    (tmp_path / "CMakeLists.txt").write_text("pkg_check_modules(A b " * 50_000, encoding="utf-8")
    within(30, lambda: sysdeps.requests(tmp_path))


def test_twenty_thousand_yours_lines_are_checked_in_seconds(tmp_path: Path) -> None:
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text("# yours: x\n" * 19_999 + "images: {}\n", encoding="utf-8")
    found = within(30, lambda: unfilled(matrix))
    assert found == [
        "matrix.yaml:20000: images: {} is init's placeholder (a `yours:` line left for you to fill in)"
    ]


# -- cause 15: a deep tree --------------------------------------------------------------------------


def test_init_on_a_tree_1900_directories_deep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = meson_project(tmp_path / "repo")
    (root / "meson.options").write_text("option('variant', type: 'string', value: 'cpu')\n", encoding="utf-8")
    deep = root
    for _ in range(1900):  # os.makedirs recurses too
        deep = deep / "d"
        deep.mkdir()
    (deep / "meson.build").write_text("dependency('deep')\n", encoding="utf-8")
    (deep / "CMakeLists.txt").write_text("find_package(deep)\n", encoding="utf-8")
    argv = ["init", str(root), "--variants", "cpu", "--output", str(root / "matrix.yaml")]
    try:
        assert within(60, lambda: cli.main(argv)) == 0
        assert "Traceback" not in capsys.readouterr().err
        assert within(30, lambda: sysdeps.cmake_files(root)) == []  # below the walk's depth bound
    finally:  # pytest's own cleanup (shutil.rmtree) recurses as deep as the tree
        for name in ("meson.build", "CMakeLists.txt"):
            (deep / name).unlink()
        while deep != root:
            deep.rmdir()
            deep = deep.parent
