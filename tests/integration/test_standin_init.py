"""`release init` on the two stand-ins shaped like issue 58's real engines, then only the `yours:`
lines filled (the smoke command), then build, verify and smoke, for real (cpu, one Python, on the
host: the cheap leg; the container leg is the same staged tree and matrix).

- tests/standins/meson_variable: meson-python whose import package is `'mesonvar_' + variant`
  through variables, whose `.gitignore` ignores `subprojects/` while the build needs the pre-placed
  `subprojects/adder`, with optional probes (`required: false`, a disabled feature) and a `test/`
  directory needing hwloc that a release build never configures.
- tests/standins/cmake_include: scikit-build-core whose backend switch `USE_CUDA` is in an
  included `engine-common/common.cmake`, whose own shared library is renamed by `OUTPUT_NAME`, and
  which links zlib by its bare name `z`.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT, toolkit
from .test_second_engine import PY, needs_cc

pytestmark = [pytest.mark.integration, needs_cc]
ENV = {"PYTHONPATH": str(ROOT)}
STANDINS = ROOT / "tests" / "standins"


def init_and_fill(tmp_path: Path, name: str, smoke: str) -> tuple[Path, Path, str]:
    """The stand-in copied out, `release init` run on it (cpu), its one `yours:` value line that
    a build needs filled (the smoke command); the project, the matrix and init's output text."""
    project = tmp_path / name
    shutil.copytree(STANDINS / name, project)
    output = project / "matrix.yaml"
    toolkit("init", str(project), "--variants", "cpu,cuda", "--output", str(output), cwd=tmp_path, env=ENV)
    written = output.read_text(encoding="utf-8")
    assert "yours: placeholder" not in written  # init made nothing up
    assert written.count("    commands: []") == 1
    filled = written.replace(
        "    commands: []", f"    commands:\n      - {json.dumps(['{python}', '-c', smoke])}"
    )
    output.write_text(filled, encoding="utf-8")
    plan = toolkit("--matrix", str(output), "plan", cwd=tmp_path, env=ENV)
    warned = [line for line in plan.stderr.splitlines() if "placeholder" in line]
    assert all(" images: {}" in w or " hardware: {}" in w for w in warned), warned  # optional ones
    return project, output, written


def build_verify_smoke(project: Path, output: Path) -> Path:
    build = toolkit(
        "--matrix", str(output), "build", "--variant", "cpu", "--python", PY, cwd=project, env=ENV
    )
    (wheel,) = sorted((project / "wheelhouse" / "cpu").glob("*.whl"))
    toolkit("--matrix", str(output), "verify", str(wheel), cwd=project, env=ENV)
    smoke = toolkit(
        "--matrix", str(output), "smoke", "--variant", "cpu", "--python", PY,
        "--wheelhouse", str(project / "wheelhouse"), cwd=project, env=ENV,
    )  # fmt: skip
    assert "1/1 passed" in smoke.stdout, smoke.stdout
    assert "Traceback" not in build.stderr + smoke.stderr
    return wheel


@pytest.mark.slow
def test_meson_standin_builds_from_init_s_matrix(tmp_path: Path) -> None:
    project, output, _ = init_and_fill(
        tmp_path, "meson_variable", "import mesonvar_cpu as m; assert m.add(2, 3) == 5"
    )
    data = yaml.safe_load(output.read_text(encoding="utf-8"))
    cpu = data["variants"]["cpu"]
    assert (cpu["import_name"], cpu["cmake_defines"]) == ("mesonvar_cpu", {"wheel_variant": "cpu"})
    assert data["variants"]["cuda"]["import_name"] == "mesonvar_cuda"
    assert not data["engine"].get("system_packages")  # no hwloc (test/), no optional probes
    assert "variant guard" not in (project / "src" / "__init__.py").read_text(encoding="utf-8")
    wheel = build_verify_smoke(project, output)
    with zipfile.ZipFile(wheel) as zf:
        assert any(n.startswith("mesonvar_cpu/_core.") for n in zf.namelist())


@pytest.mark.slow
def test_cmake_standin_builds_from_init_s_matrix(tmp_path: Path) -> None:
    smoke = (
        "import cmkinc, zlib; assert cmkinc.checksum(b'x') == zlib.crc32(b'x'); "
        "assert cmkinc.transport() == 'tcp'"
    )
    project, output, written = init_and_fill(tmp_path, "cmake_include", smoke)
    data = yaml.safe_load(output.read_text(encoding="utf-8"))
    assert data["variants"]["cpu"]["cmake_defines"] == {"USE_CUDA": "OFF", "USE_HIP": "OFF"}
    assert data["variants"]["cuda"]["cmake_defines"] == {"USE_CUDA": "ON", "USE_HIP": "OFF"}
    assert data["engine"]["own_libraries"] == ["libcmkinc_transfer*"]
    assert data["engine"]["system_packages"]["zlib"]["apt"] == ["zlib1g-dev"]
    assert "target_link_libraries(z) at CMakeLists.txt:13" in written
    assert data["variants"]["cpu"]["build_image"] == {"debian": {"suite": "trixie"}}
    wheel = build_verify_smoke(project, output)
    with zipfile.ZipFile(wheel) as zf:
        assert any(Path(n).name.startswith("libcmkinc_transfer") for n in zf.namelist())
