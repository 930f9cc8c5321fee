"""The toolkit's wheel of a container build from a source tree: built once per change of the
toolkit's files, reused by a run that changed nothing (no build at all), and skipped without uv."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from release.builder import toolkit_wheel


def _parts(root: Path) -> list[Path]:
    (root / "release").mkdir(parents=True)
    (root / "release" / "__init__.py").write_text("__version__ = '0.1.0'\n", encoding="utf-8")
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    return [root / "pyproject.toml", root / "release", root / "scripts"]  # scripts: absent, left out


def test_the_wheel_is_built_once_per_change_of_the_toolkit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    builds: list[list[str]] = []

    def fake_build(uv: str, parts: list[Path]) -> Path:  # stands in for `uv build --wheel`
        builds.append([p.name for p in parts])
        out = tmp_path / f"tmp{len(builds)}" / "out"
        out.mkdir(parents=True)
        (out / "gpu_wheel_release-0.1.0-py3-none-any.whl").write_bytes(b"wheel %d" % len(builds))
        return out / "gpu_wheel_release-0.1.0-py3-none-any.whl"

    monkeypatch.setattr(toolkit_wheel, "_build", fake_build)
    monkeypatch.setattr(toolkit_wheel.shutil, "which", lambda name: "/usr/bin/uv")
    parts = _parts(tmp_path / "build" / "cpu" / "container")
    first = toolkit_wheel.build_toolkit_wheel(parts, tmp_path / "project-a")
    again = toolkit_wheel.build_toolkit_wheel(parts, tmp_path / "project-b")
    assert builds == [["pyproject.toml", "release"]]
    assert first is not None and again is not None and again.read_bytes() == first.read_bytes() == b"wheel 1"
    (parts[1] / "__init__.py").write_text("__version__ = '0.1.1'\n", encoding="utf-8")
    changed = toolkit_wheel.build_toolkit_wheel(parts, tmp_path / "project-c")
    assert len(builds) == 2 and changed is not None and changed.read_bytes() == b"wheel 2"
    kept = tmp_path / "build" / "cpu" / "toolkit-wheels"
    assert len(list(kept.glob("*/*.whl"))) == 1  # the older toolkit's wheel is gone


def test_without_uv_each_python_installs_from_the_tree(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setattr(toolkit_wheel.shutil, "which", lambda name: None)
    assert toolkit_wheel.build_toolkit_wheel(_parts(tmp_path / "c"), tmp_path / "out") is None
