"""What the TheRock stand-ins rest on, found on Mooncake's rocm wheel (issue 44): the pip layout keeps
the image interpreter's own sitecustomize (a Debian-built 3.14's puts its site-packages, and pip,
on the path), and smoke counts every runtime library the loader cannot find as the runtime's, off
the loader's path in TheRock's layouts, not only the one the import binds."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from release.config.matrix import loads
from release.machine.therock import sitecustomize
from release.plan.resolve import resolve_variant
from release.smoke.refusal import absent_drivers, absent_runtime

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "matrix.yaml"


def _sys_path(monkeypatch: pytest.MonkeyPatch, text: str) -> list[str]:
    """sys.path once the sitecustomize `text` has run (as site runs it), this process's own restored."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    exec(compile(text, "sitecustomize.py", "exec"), {})  # the text under test
    return list(sys.path)


def test_the_pip_layout_keeps_the_interpreters_own_sitecustomize(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own_site, venv_site = tmp_path / "own-site-packages", tmp_path / "venv-site-packages"
    own_site.mkdir()
    venv_site.mkdir()
    own = f"import site\nsite.addsitedir({str(own_site)!r})  # python-debian.sh's\n"
    path = _sys_path(monkeypatch, sitecustomize(own, str(venv_site)))
    assert str(own_site) in path and str(venv_site) in path
    assert path.index(str(own_site)) < path.index(str(venv_site))  # the interpreter's own first
    # an interpreter without one (pyenv's) gets the venv's site directory alone
    alone = sitecustomize(None, str(venv_site))
    assert alone == f"import site\nsite.addsitedir({str(venv_site)!r})\n"
    assert str(venv_site) in _sys_path(monkeypatch, alone)


def test_every_missing_runtime_library_is_the_runtimes_and_the_rest_the_systems() -> None:
    matrix = loads(MATRIX.read_text(encoding="utf-8"), path=MATRIX)
    rocm = resolve_variant(matrix, "rocm")
    # Mooncake's rocm wheel in the TheRock pip stand-in: HIP and HSA off the loader's path, ibverbs
    # absent from the image
    missing = ["libamdhip64.so.7", "libhsa-runtime64.so.1", "libibverbs.so.1"]
    runtime = absent_runtime(missing, ("libamdhip64.so.7",), rocm)
    assert runtime == ["libamdhip64.so.7", "libhsa-runtime64.so.1"]
    assert [m for m in missing if m not in runtime] == ["libibverbs.so.1"]
    # with no soname the import binds, the variant's runtime globs still name HIP's libraries
    assert absent_runtime(["libhsa-runtime64.so.1", "libnuma.so.1"], (), rocm) == ["libhsa-runtime64.so.1"]
    # the driver's library is the driver's, never the runtime's
    cuda = resolve_variant(matrix, "cuda")
    missing = ["libcuda.so.1", "libcudart.so.13", "libfoo.so.2"]
    assert absent_drivers(missing, cuda) == ["libcuda.so.1"]
    assert absent_runtime(missing, ("libcudart.so.13",), cuda) == ["libcudart.so.13"]
