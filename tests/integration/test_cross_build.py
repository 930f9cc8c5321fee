"""aarch64 wheels on this x86_64 machine: `release build --arch aarch64` cross-compiles the cpu
variant in its local Debian image (docs/machines.md), every ELF file of the wheel is AArch64 and
verify passes; the matrix's smoke commands then run the wheel under emulation (binfmt_misc's
qemu-user, registered by scripts/bootstrap.sh) with Debian's own aarch64 Python. One Python of one
variant, as the issue allows: every other aarch64 leg runs natively on GitHub's arm64 runners."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
import yaml

from release.builder.cross import DIST_PYTHON, emulated_smoke
from release.config.matrix import load
from release.inspect.elf import inspect_elf, is_elf
from release.machine.containers import container_engine
from release.plan.steps import make_plan
from release.settings import in_ci
from tests.integration.conftest import ROOT, toolkit

ENGINE = container_engine()
if ENGINE is None:
    if in_ci():
        pytest.fail("podman is not working here: .ci/run must install it (scripts/setup-podman.sh)")
    pytest.skip("no podman or docker answers (run scripts/setup-podman.sh)", allow_module_level=True)

pytestmark = pytest.mark.slow


def _matrix(directory: Path) -> Path:
    """The real matrix, cpu only, released for x86_64 and aarch64, pointing at the real engine."""
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"]["source"] = str(ROOT / "engine")
    data["platform"]["floor"] = "manylinux_2_28"
    data["platform"]["architectures"] = ["x86_64", "aarch64"]
    data["variants"] = {"cpu": data["variants"]["cpu"]}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    shutil.copytree(ROOT / "packaging", directory / "packaging", dirs_exist_ok=True)
    return directory / "matrix.yaml"


def test_an_aarch64_wheel_is_cross_compiled_verified_and_runs_under_emulation(tmp_path: Path) -> None:
    assert ENGINE is not None
    matrix = _matrix(tmp_path / "project")
    wheelhouse = tmp_path / "wheelhouse"
    proc = toolkit(
        "--matrix", str(matrix), "build", "--variant", "cpu", "--arch", "aarch64", "--python", DIST_PYTHON,
        "--wheelhouse", str(wheelhouse), timeout=1800,
    )  # fmt: skip
    assert "(cross, aarch64)" in proc.stdout, proc.stdout
    (wheel,) = (wheelhouse / "cpu").glob("*.whl")
    assert wheel.name.startswith("xfer_engine_cpu-0.1.0-cp313-cp313-manylinux_") and wheel.name.endswith(
        "_aarch64.whl"
    ), wheel.name
    machines = {}
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            data = zf.read(info)
            if is_elf(data[:4]):
                machines[info.filename] = inspect_elf(info.filename, data).machine
    assert any(name.endswith("-aarch64-linux-gnu.so") for name in machines), machines
    assert any(name.endswith("scripts/xfer-master") for name in machines), machines
    assert set(machines.values()) == {"aarch64"}, machines  # EM_AARCH64, every one
    report = json.loads(wheel.with_name(wheel.name + ".verify.json").read_text(encoding="utf-8"))
    assert report["ok"] is True
    assert {r["id"]: r["status"] for r in report["rules"]}["elf-machine"] == "pass"
    # The matrix's smoke commands, under emulation.
    (step,) = (s for s in make_plan(load(matrix)).builds if s.identifier == "cp313-cpu-manylinux_aarch64")
    version, selftest = emulated_smoke(wheel, step.variant, "aarch64", engine=ENGINE)
    assert "0.1.0" in version and "backend cpu" in version, version
    assert json.loads(selftest[selftest.index("{") :])["ok"] is True, selftest
