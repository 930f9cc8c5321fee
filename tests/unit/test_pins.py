"""The toolkit's lower bounds and pins, held against what it uses from each tool.

Each row names a feature the toolkit relies on and the first release that has it (from the
tool's own changelog). Lowering a bound below the newest feature's release fails here; so does
an unpinned cibuildwheel, whose options `release/builder/cibw.py` generates.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomlkit
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from release.config import pins
from release.machine.images import recipe_of
from release.plan.resolve import LocalImage

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomlkit.parse((ROOT / "pyproject.toml").read_text(encoding="utf-8")).unwrap()

FEATURES: dict[str, list[tuple[str, str]]] = {
    "auditwheel": [
        ("repair --exclude (auditwheel CHANGELOG 5.2.0)", "5.2.0"),
        ("the manylinux_2_28 policy (5.1.0)", "5.1.0"),
        ("wildcard sonames in --exclude: libamdhip64.so* (6.2.0, pypa/auditwheel#508)", "6.2.0"),
        # Found by the rehearsal at the lowest pins: 6.2.0 refused `--plat auto`, which repair
        # falls back to when a local build cannot meet the floor (checked: `repair --help` of 6.3.0
        # has no 'auto', 6.4.0 has).
        ("repair --plat auto, the fallback below the floor (6.4.0)", "6.4.0"),
        # Found by the real-matrix rehearsal at the lowest pins: 6.4.x's newest policy is
        # manylinux_2_39, so nothing built in the local Debian trixie images (glibc 2.41) can be
        # repaired; 6.5.0's manylinux-policy.json ends at manylinux_2_41 (checked in both wheels).
        ("the manylinux_2_41 policy: wheels from the trixie build images (6.5.0)", "6.5.0"),
    ],
    "setuptools": [
        ("[project] license = 'Apache-2.0', an SPDX expression (PEP 639; NEWS v77.0.0, #4706)", "77.0.0"),
    ],
    "cibuildwheel": [
        ("build-frontend = build[uv]: uv makes the build and test environments (v2.19.0, #1856)", "2.19.0"),
        ("environment-pass: SOURCE_DATE_EPOCH, MUSA_INSTALLER (v2.3.0, #914)", "2.3.0"),
        ("manylinux_2_28 images (v2.8.0, #1026)", "2.8.0"),
        ("config-settings (v2.10.0, #1244)", "2.10.0"),
        ("CIBW_CONTAINER_ENGINE 'podman; create_args: ...' (v2.13.0, #1499)", "2.13.0"),
        ("CPython 3.13 built without the prerelease flag (v2.20.0, #1950)", "2.20.0"),
    ],
}
RUNS_ON_3_10_UNTIL = Version("3.0.0")  # cibuildwheel 3.0 needs Python 3.11+ to run (#1912)


def _requirements(name: str) -> list[Requirement]:
    texts = [*PYPROJECT["project"]["dependencies"], *PYPROJECT["build-system"]["requires"]]
    found = [Requirement(t) for t in texts if Requirement(t).name == name]
    assert found, f"pyproject.toml does not require {name}"
    return found


def _lower_bound(spec: SpecifierSet) -> Version:
    bounds = [Version(s.version) for s in spec if s.operator in (">=", "==")]
    assert bounds, f"{spec} has no lower bound"
    return max(bounds)


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_each_bound_covers_every_feature_used(name: str) -> None:
    needed = max(Version(v) for _, v in FEATURES[name])
    for req in _requirements(name):
        bound = _lower_bound(req.specifier)
        newest = max(FEATURES[name], key=lambda row: Version(row[1]))
        assert bound >= needed, f"{req}: {newest[0]} needs {name} {needed}"


def test_cibuildwheel_is_pinned_exactly_for_every_supported_python() -> None:
    reqs = _requirements("cibuildwheel")
    assert all(len(r.specifier) == 1 and next(iter(r.specifier)).operator == "==" for r in reqs)
    python_floor = Version(re.sub(r"^>=", "", PYPROJECT["project"]["requires-python"]))
    for minor in range(python_floor.minor, 14):
        env = {"python_version": f"3.{minor}", "python_full_version": f"3.{minor}.0"}
        chosen = [r for r in reqs if r.marker is None or r.marker.evaluate(env)]
        assert len(chosen) == 1, f"Python 3.{minor} gets {len(chosen)} cibuildwheel pins"
        version = _lower_bound(chosen[0].specifier)
        if minor < 11:
            assert version < RUNS_ON_3_10_UNTIL, f"cibuildwheel {version} does not run on Python 3.{minor}"


def test_the_image_script_installs_the_toolkits_auditwheel_bound(fake_interpreters: object) -> None:
    (declared,) = (f"{r.name}{r.specifier}" for r in _requirements("auditwheel"))
    assert pins.requirement("auditwheel") == declared
    build = LocalImage(tag="localhost/b", suite="sid", packages=(), pythons=("3.12",), toolchain=True)
    assert recipe_of(build).auditwheel == declared
    smoke = LocalImage(tag="localhost/s", suite="sid", packages=(), pythons=("3.12",), toolchain=False)
    assert recipe_of(smoke).auditwheel == ""


def test_every_toolkit_package_is_shipped() -> None:
    """`pip install .` (every workflow job) installs only the listed packages: a missing one is an
    ImportError on the runner, never seen from a source checkout."""
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "release").rglob("__init__.py")
    }
    assert found - listed == set()
