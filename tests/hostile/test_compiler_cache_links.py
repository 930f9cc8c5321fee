"""Issue 57 cause 1 (and cause 6's log read): the compiler cache makes, writes and prunes only
inside the project, through no link. The image's ID and compilers are stand-ins (they need a
container engine, which the unit tier never starts)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from release.atomic import OutsideProject
from release.builder import compiler_cache
from release.machine.containers import ContainerEngine
from tests.unit.test_compiler_cache import _steps

PODMAN = ContainerEngine("podman")


def _home(tmp_path: Path) -> Path:
    """A directory outside the project, shaped like a home directory with 5 subdirectories."""
    home = tmp_path / "home"
    for n in range(5):
        (home / f"dir{n}").mkdir(parents=True)
        (home / f"dir{n}" / "keep.txt").write_text("mine", encoding="utf-8")
    return home


def test_a_ccache_link_to_a_home_directory_is_neither_pruned_nor_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: all but the 3 newest subdirectories of the home directory removed within 2 s, and
    release-key.json written there."""
    project = tmp_path / "project"
    project.mkdir()
    (variant,) = {s.variant.name: s.variant for s in _steps(project)}.values()
    home = _home(tmp_path)
    (project / "build" / "ccache").mkdir(parents=True)
    (project / "build" / "ccache" / "cpu").symlink_to(home)
    monkeypatch.setattr(compiler_cache, "compiler_identity", lambda engine, image: "cc gcc 14")
    monkeypatch.setattr(ContainerEngine, "image_id", lambda self, image: "sha256:1")
    with pytest.raises(OutsideProject, match="through a link"):
        compiler_cache.open_cache(variant, engine=PODMAN, image="localhost/x", options={}, shared=True)
    assert sorted(p.name for p in home.iterdir()) == [f"dir{n}" for n in range(5)]
    assert not list(home.rglob("release-key.json"))


def test_a_logs_link_is_neither_emptied_nor_made_outside(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (variant,) = {s.variant.name: s.variant for s in _steps(project)}.values()
    outside = tmp_path / "outside"
    (outside / "container-ccache").mkdir(parents=True)
    (outside / "container-ccache" / "precious").write_text("x", encoding="utf-8")
    (project / "build" / "cpu").mkdir(parents=True)
    (project / "build" / "cpu" / "logs").symlink_to(outside)
    with pytest.raises(OutsideProject):
        compiler_cache.open_cache(variant, engine=PODMAN, image="localhost/x", options={}, shared=False)
    assert (outside / "container-ccache" / "precious").read_text(encoding="utf-8") == "x"


def test_a_key_directory_that_is_a_link_is_not_pruned(tmp_path: Path) -> None:
    project = tmp_path / "project"
    parent = project / "build" / "ccache" / "cpu"
    parent.mkdir(parents=True)
    home = _home(tmp_path)
    for n in range(5):
        (parent / f"k{n}").symlink_to(home / f"dir{n}")
    compiler_cache.prune(parent, keep=0, root=project)
    assert all((home / f"dir{n}" / "keep.txt").exists() for n in range(5))


def test_a_fifo_among_the_statistics_logs_is_skipped(tmp_path: Path) -> None:
    """Cause 6: the logs are written in the container; a FIFO there hung the build's summary."""
    logs = tmp_path / "logs"
    logs.mkdir()
    os.mkfifo(logs / "run-1.log")
    (logs / "run-2.log").write_text("# release-python 3.12\ncache_miss\n", encoding="utf-8")
    cache = compiler_cache.ContainerCache(tmp_path / "d", logs, shared=True)
    assert {p: s.text for p, s in compiler_cache.stats_by_python(cache).items()} == {"3.12": "0/1 (0%)"}
