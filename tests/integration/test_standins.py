"""Stand-ins for real engines' build shapes (tests/standins/, issue 30 item 6): each is built
through the toolkit in its default local build image (`release build --container`), repaired,
verified and smoke-tested, for one Python (3.12). Both name one image recipe, so it is made once.

- meson_pkgconfig: meson-python; zlib found through pkg-config only, so the image must carry the
  pkg-config program; the cpu variant ships its own import package, mesonstand_cpu.
- numpy_runtime: the wheel requires numpy; smoke installs it from the declared index (PyPI, which
  CI reaches; the smoke venvs use no pip cache) and the smoke command hands a numpy array to the
  extension. Without a declared source the install step fails in one line.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from release.machine.containers import ContainerEngine

from .conftest import ROOT, toolkit

pytestmark = pytest.mark.integration

STANDINS = ROOT / "tests" / "standins"
IMAGE = "localhost/standins-build-cpu"


@pytest.fixture(scope="module")
def engine() -> str:
    found = ContainerEngine.answering()
    if found is None:
        pytest.skip("no podman or docker answers (run scripts/setup-podman.sh)")
    return found


def _build(name: str, directory: Path) -> tuple[Path, Path, dict[str, object]]:
    """(matrix, wheel, verify report) of a stand-in built in its local image."""
    shutil.copytree(STANDINS / name, directory / name)
    matrix = directory / name / "matrix.yaml"
    wheelhouse = directory / "wheelhouse"
    proc = toolkit("--matrix", str(matrix), "build", "--variant", "cpu", "--container",
                   "--wheelhouse", str(wheelhouse), timeout=3000)  # fmt: skip
    assert f"cibuildwheel in {IMAGE}" in proc.stdout, proc.stdout
    wheels = sorted((wheelhouse / "cpu").glob("*.whl"))
    assert len(wheels) == 1, wheels
    report = json.loads(wheels[0].with_name(wheels[0].name + ".verify.json").read_text(encoding="utf-8"))
    failed = [r["id"] for r in report["rules"] if r["status"] == "fail"]
    assert failed == [], report
    return matrix, wheels[0], report


def _metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        return zf.read(name).decode()


@pytest.mark.slow
def test_meson_engine_with_a_pkg_config_dependency_and_its_own_import_package(
    engine: str, tmp_path: Path
) -> None:
    matrix, wheel, _ = _build("meson_pkgconfig", tmp_path)
    assert wheel.name.startswith("mesonstand_cpu-0.1.0-cp312-cp312-manylinux_2_28_x86_64"), wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert "mesonstand_cpu/__init__.py" in names
    assert any(n.startswith("mesonstand_cpu/_crc.cpython-312") for n in names), names
    assert not any(n.startswith("mesonstand/") for n in names)
    # What real builds find in the image: the pkg-config program and the CA bundle for every tool.
    probe = subprocess.run(
        [engine.command, "run", "--rm", "--network=none", IMAGE, "sh", "-c",
         "pkg-config --modversion zlib && echo $SSL_CERT_FILE $REQUESTS_CA_BUNDLE $PIP_CERT $UV_NATIVE_TLS"
         " && test -s $SSL_CERT_FILE"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    assert probe.stdout.splitlines()[-1] == f"{bundle} {bundle} {bundle} 1", probe.stdout
    wheelhouse = str(wheel.parent.parent)
    smoke = toolkit("--matrix", str(matrix), "smoke", "--variant", "cpu", "--wheelhouse", wheelhouse)
    assert "import mesonstand_cpu ... ok" in smoke.stdout, smoke.stdout


@pytest.mark.slow
def test_a_wheel_that_requires_numpy_is_smoked_with_numpy_from_the_declared_index(
    engine: str, tmp_path: Path
) -> None:
    matrix, wheel, _ = _build("numpy_runtime", tmp_path)
    assert "Requires-Dist: numpy>=1.26" in _metadata(wheel)
    wheelhouse = str(wheel.parent.parent)
    smoke = toolkit("--matrix", str(matrix), "smoke", "--variant", "cpu", "--wheelhouse", wheelhouse)
    assert "import numstand ... ok" in smoke.stdout, smoke.stdout
    assert "assert numstand.total(a) == 45.0 ... ok" in smoke.stdout, smoke.stdout
    # Without a declared source, the install step says why in one line.
    text = matrix.read_text(encoding="utf-8")
    matrix.write_text(text.replace("      index_url: https://pypi.org/simple", "      {}"), encoding="utf-8")
    argv = ("--matrix", str(matrix), "smoke", "--variant", "cpu", "--wheelhouse", wheelhouse)
    refused = toolkit(*argv, check=False)
    assert refused.returncode == 7, refused.stdout + refused.stderr
    assert (
        "the wheel requires numpy>=1.26 (Requires-Dist) and the matrix names no source: "
        "declare engine.smoke.requirements.index_url or .find_links"
    ) in refused.stdout + refused.stderr
