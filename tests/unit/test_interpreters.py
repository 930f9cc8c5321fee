"""Interpreters are found on PATH or in pyenv's version directories; pyenv shims are skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.errors import ToolchainError
from release.machine import interpreters

# A version no system ships, so /usr/bin and /usr/local/bin never answer for it.
VERSION = "3.97"


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n", encoding="utf-8")
    path.chmod(0o755)
    return path


@pytest.fixture
def pyenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake PYENV_ROOT whose shims directory is the only thing on PATH."""
    root = tmp_path / "pyenv"
    _executable(root / "shims" / f"python{VERSION}")
    monkeypatch.setenv("PYENV_ROOT", str(root))
    monkeypatch.setenv("PATH", str(root / "shims"))
    return root


def test_shims_are_skipped_and_versions_found(pyenv: Path) -> None:
    exe = _executable(pyenv / "versions" / f"{VERSION}.1" / "bin" / f"python{VERSION}")
    assert interpreters.find_interpreter(VERSION) == exe


def test_newest_patch_wins_numerically(pyenv: Path) -> None:
    for patch in ("2", "10", "9"):
        _executable(pyenv / "versions" / f"{VERSION}.{patch}" / "bin" / f"python{VERSION}")
    _executable(pyenv / "versions" / f"{VERSION}-dev" / "bin" / f"python{VERSION}")
    _executable(pyenv / "versions" / f"{VERSION}.11t" / "bin" / f"python{VERSION}")
    found = interpreters.find_interpreter(VERSION)
    assert found == pyenv / "versions" / f"{VERSION}.10" / "bin" / f"python{VERSION}"


def test_a_version_directory_without_the_binary_is_passed_over(pyenv: Path) -> None:
    (pyenv / "versions" / f"{VERSION}.5" / "bin").mkdir(parents=True)
    older = _executable(pyenv / "versions" / f"{VERSION}.4" / "bin" / f"python{VERSION}")
    assert interpreters.find_interpreter(VERSION) == older


def test_other_minor_versions_do_not_match(pyenv: Path) -> None:
    _executable(pyenv / "versions" / f"{VERSION}1.0" / "bin" / f"python{VERSION}")
    assert interpreters.find_interpreter(VERSION) is None


def test_path_wins_over_pyenv(pyenv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _executable(pyenv / "versions" / f"{VERSION}.1" / "bin" / f"python{VERSION}")
    on_path = _executable(tmp_path / "bin" / f"python{VERSION}")
    monkeypatch.setenv("PATH", f"{pyenv / 'shims'}:{tmp_path / 'empty'}::{tmp_path / 'bin'}")
    assert interpreters.find_interpreter(VERSION) == on_path


def test_shims_with_a_trailing_slash_are_skipped_too(pyenv: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{pyenv / 'shims'}/")
    assert interpreters.find_interpreter(VERSION) is None


def test_nothing_found_is_a_toolchain_error(pyenv: Path) -> None:
    assert interpreters.find_interpreter(VERSION) is None
    with pytest.raises(ToolchainError) as info:
        interpreters.require_interpreter(VERSION)
    assert f"no Python {VERSION} interpreter found" in str(info.value)
    assert f"pyenv install {VERSION}" in str(info.value)
    assert info.value.exit_code == 4


def test_interpreter_dirs_are_deduplicated(
    pyenv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    _executable(bin_dir / "python3.98")
    _executable(bin_dir / "python3.99")
    pyenv_exe = _executable(pyenv / "versions" / f"{VERSION}.3" / "bin" / f"python{VERSION}")
    monkeypatch.setenv("PATH", f"{pyenv / 'shims'}:{bin_dir}")
    dirs = interpreters.interpreter_dirs(("3.98", "3.99", VERSION, "3.96"))
    assert dirs == [str(bin_dir), str(pyenv_exe.parent)]


def test_require_returns_the_found_path(pyenv: Path) -> None:
    exe = _executable(pyenv / "versions" / f"{VERSION}.0" / "bin" / f"python{VERSION}")
    assert interpreters.require_interpreter(VERSION) == exe


def test_a_virtual_environment_on_path_is_passed_over(
    pyenv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A nox session puts its venv first on PATH; the base interpreter is what a chroot needs."""
    venv = tmp_path / ".nox" / "smoke_cpu-3-97"
    (venv / "pyvenv.cfg").parent.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /somewhere\n", encoding="utf-8")
    _executable(venv / "bin" / f"python{VERSION}")
    base = _executable(pyenv / "versions" / f"{VERSION}.1" / "bin" / f"python{VERSION}")
    monkeypatch.setenv("PATH", f"{venv / 'bin'}:{pyenv / 'shims'}")
    assert interpreters.find_interpreter(VERSION) == base
