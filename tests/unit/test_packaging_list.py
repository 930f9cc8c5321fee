"""The toolkit's wheel ships every package of the source tree (a missed one broke `pip install .`), and
every script a build or an image runs, which an installed toolkit puts where they run."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
from pathlib import Path

import pytest
import tomlkit

from release import __version__
from release.builder import container
from release.builder.cibw import cibuildwheel_options
from release.config import resources
from release.config.matrix import load
from release.errors import ToolchainError
from release.plan.steps import make_plan

ROOT = Path(__file__).resolve().parents[2]


def test_every_release_package_is_listed_in_pyproject() -> None:
    pyproject = tomlkit.parse((ROOT / "pyproject.toml").read_text()).unwrap()
    listed = set(pyproject["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "release").rglob("__init__.py")
    }
    missing = sorted(on_disk - listed)
    assert not missing, f"pyproject.toml [tool.setuptools] packages lacks {missing}"


SCRIPTS = ROOT / "scripts"
_BESIDE = re.compile(r'\$\(dirname "\$0"\)/([A-Za-z0-9_.-]+)')


def _shipped_scripts() -> set[str]:
    """The files of scripts/ the toolkit's wheel carries as release/scripts_data (package-data globs)."""
    pyproject = tomlkit.parse((ROOT / "pyproject.toml").read_text()).unwrap()
    globs = pyproject["tool"]["setuptools"]["package-data"]["release.scripts_data"]
    return {p.name for p in SCRIPTS.iterdir() if any(fnmatch.fnmatch(p.name, g) for g in globs)}


def test_the_wheel_carries_every_script_a_build_or_an_image_runs_and_what_each_reads_beside_it() -> None:
    """An installed toolkit runs the backends' install commands (cibuildwheel's before-all, a build
    image's toolkit layer) and make-image.sh from release/scripts_data: each of them, and every file
    they read beside themselves (_common.sh, runtimes.tsv, hipcc-host.sh), ships in the wheel."""
    shipped = _shipped_scripts()
    wanted = {"make-image.sh", "setup-podman.sh", "free-disk.sh"}
    for backend in (ROOT / "packaging" / "backends").glob("*.json"):
        install = (json.loads(backend.read_text()).get("toolkit") or {}).get("install", "")
        wanted |= set(container._SCRIPT.findall(install))
    seen: set[str] = set()
    while wanted - seen:
        name = sorted(wanted - seen)[0]
        seen.add(name)
        assert (SCRIPTS / name).is_file(), f"scripts/{name} is named but absent"
        wanted |= set(_BESIDE.findall((SCRIPTS / name).read_text(encoding="utf-8")))
    assert {
        "install-cuda.sh",
        "install-rocm.sh",
        "install-musa.sh",
        "_common.sh",
        "runtimes.tsv",
        "toolkits.tsv",
    } <= seen
    missing = sorted(seen - shipped)
    assert not missing, f"pyproject.toml package-data release.scripts_data lacks {missing}"


def _installed_toolkit(monkeypatch: pytest.MonkeyPatch, scripts: Path) -> None:
    """The container project as an installed toolkit makes it: no source tree, its scripts in
    `scripts` (release/scripts_data), no wheel to copy; the engine's staging is not under test."""
    monkeypatch.setattr(container, "toolkit_source", lambda: None)
    monkeypatch.setattr(container, "toolkit_wheel", lambda: None)
    monkeypatch.setattr(container, "toolkit_scripts", lambda: scripts)
    monkeypatch.setattr(resources, "toolkit_scripts", lambda: scripts)
    monkeypatch.setattr(container, "stage_project", lambda variant, version, dest: (dest.mkdir(), dest)[1])


def test_an_installed_toolkit_puts_its_scripts_in_the_container_project(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """before-all runs `bash scripts/install-rocm.sh 7.2` in the container project: from an installed
    toolkit (no source tree to copy) its scripts are there too (issue 43: they were not)."""
    installed = tmp_path / "site-packages" / "release" / "scripts_data"
    shutil.copytree(SCRIPTS, installed)
    _installed_toolkit(monkeypatch, installed)
    steps = tuple(s for s in make_plan(load(ROOT / "matrix.yaml")).builds if s.variant.name == "rocm")
    work = tmp_path / "project"
    project, toolkit = container.container_project(steps, "0.1.0", work)
    assert "bash scripts/install-rocm.sh 7.2" in cibuildwheel_options(steps)["before-all"]
    for name in ("install-rocm.sh", "_common.sh", "runtimes.tsv", "toolkits.tsv", "hipcc-host.sh"):
        assert (project / "scripts" / name).read_bytes() == (SCRIPTS / name).read_bytes()
    assert "gpu-wheel-release==" in toolkit


def test_a_script_the_toolkit_lacks_stops_the_container_build_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    installed = tmp_path / "site-packages" / "release" / "scripts_data"
    shutil.copytree(SCRIPTS, installed)
    (installed / "install-cuda.sh").unlink()
    _installed_toolkit(monkeypatch, installed)
    steps = tuple(s for s in make_plan(load(ROOT / "matrix.yaml")).builds if s.variant.name == "cuda")
    with pytest.raises(ToolchainError) as caught:
        container.container_project(steps, "0.1.0", tmp_path / "project")
    said = str(caught.value)
    assert "\n" not in said
    assert "cuda's before-all (`bash scripts/install-cuda.sh 13.0`) needs install-cuda.sh" in said, said
    assert f"the toolkit gpu-wheel-release {__version__} does not carry" in said, said
    assert str(installed / "install-cuda.sh") in said, said
    assert said.endswith(f"(`pip install --force-reinstall gpu-wheel-release=={__version__}`)"), said
