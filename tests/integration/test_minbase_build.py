"""The minbase tree is built by one process at a time: parallel test workers (pytest-xdist) and two
smoke runs used to debootstrap into one `.partial` directory together, and all but one failed.

`debootstrap` here is a stand-in script (named so): it records each call, takes a while, and
makes the one file the tree is recognised by. The real debootstrap runs in test_images.py."""

from __future__ import annotations

import multiprocessing
import os
import stat
from pathlib import Path

import pytest

from release.errors import ToolchainError
from release.smoke import image

pytestmark = pytest.mark.integration

STANDIN = """#!/bin/sh
# stand-in for debootstrap: --variant=minbase SUITE TARGET MIRROR
echo "$$" >> "{calls}"
sleep 1
[ -n "$FAIL" ] && {{ echo "E: stand-in failure" >&2; exit 1; }}
mkdir -p "$3/usr/bin" && : > "$3/usr/bin/ldd"
"""


def _standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    calls = tmp_path / "calls"
    tool = tmp_path / "bin" / "debootstrap"
    tool.parent.mkdir()
    tool.write_text(STANDIN.format(calls=calls))
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(image, "sudo_problem", lambda: None)
    monkeypatch.setattr(image.os, "geteuid", lambda: 0)
    return calls


def _build(target: str) -> str:
    return str(image.ensure_minbase(Path(target), log=lambda _line: None))


def test_parallel_builders_run_debootstrap_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _standin(tmp_path, monkeypatch)
    target = tmp_path / "cache" / "minbase-bookworm"
    with multiprocessing.get_context("fork").Pool(4) as pool:
        results = pool.map(_build, [str(target)] * 4)
    assert results == [str(target)] * 4
    assert len(calls.read_text().split()) == 1, "debootstrap ran more than once"
    assert (target / "usr/bin/ldd").exists()
    assert stat.S_IMODE(target.stat().st_mode) == 0o755, "a non-root smoke user must be able to read it"
    assert sorted(p.name for p in target.parent.iterdir()) == [".minbase-bookworm.lock", "minbase-bookworm"]


def test_a_failed_build_leaves_no_partial_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _standin(tmp_path, monkeypatch)
    monkeypatch.setenv("FAIL", "1")
    target = tmp_path / "cache" / "minbase-bookworm"
    (target.parent / "minbase-bookworm.partial.old").mkdir(parents=True)  # an interrupted build's
    with pytest.raises(ToolchainError, match="stand-in failure"):
        image.ensure_minbase(target, log=lambda _line: None)
    assert [p.name for p in target.parent.iterdir()] == [".minbase-bookworm.lock"]
    monkeypatch.delenv("FAIL")
    assert image.ensure_minbase(target, log=lambda _line: None) == target
    assert len(calls.read_text().split()) == 2
