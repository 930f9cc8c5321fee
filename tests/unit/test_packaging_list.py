"""The toolkit's wheel ships every package of the source tree (a missed one broke `pip install .`)."""

from __future__ import annotations

from pathlib import Path

import tomlkit

ROOT = Path(__file__).resolve().parents[2]


def test_every_release_package_is_listed_in_pyproject() -> None:
    pyproject = tomlkit.parse((ROOT / "pyproject.toml").read_text()).unwrap()
    listed = set(pyproject["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "release").rglob("__init__.py")
    }
    missing = sorted(on_disk - listed)
    assert not missing, f"pyproject.toml [tool.setuptools] packages lacks {missing}"
