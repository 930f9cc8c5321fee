"""A real engine's build shape in CI (issue 30, items 1 and 6): an extension that calls the CUDA
driver API links CUDA::cuda_driver, which CMake's FindCUDAToolkit finds only where the toolkit has
the driver's link stub (lib64/stubs/libcuda.so, made by install-cuda.sh where NVIDIA's wheels have
none). The wheel then NEEDs libcuda.so.1: the driver's, bound at load time, never vendored,
declared in `Requires-External`; where no driver is (no GPU here), the import is refused in the
guard's words, saying that the driver is missing, and that is what smoke expects.

The stand-in (tests/standins/cuda_driver, its own matrix.yaml) is built through the toolkit in the
reference engine's local cuda image (CUDA 13.0 from NVIDIA's PyPI wheels), and on the host against
/usr/local/cuda-13.0 where the host has CUDA 13.0."""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from release.config.backends import load_backends
from release.config.resources import toolkit_backends
from release.errors import ToolchainError
from release.inspect.elf import inspect_elf, is_elf
from release.machine.toolchain import find_toolchain
from tests.integration.conftest import ROOT, LocalImages, toolkit

pytestmark = pytest.mark.integration

STANDIN = ROOT / "tests" / "standins" / "cuda_driver"
REFUSED = re.compile(
    r"^\[3\.12 host\] import cuda_driver_standin refused \.\.\. ok .*: ImportError: cuda_driver_standin: "
    r"cuda-driver-standin needs libcuda\.so\.1 \(the NVIDIA driver\).* the GPU driver is missing here, "
    r"not a toolkit\. To use cuda-driver-standin, install or update the NVIDIA GPU driver",
    re.M,
)


def _standin(directory: Path) -> Path:
    """A copy of the stand-in (its build/ and wheelhouse/ stay out of the checkout)."""
    copy = directory / "cuda_driver"
    shutil.copytree(STANDIN, copy, ignore=shutil.ignore_patterns("build", "wheelhouse", "__pycache__"))
    return copy / "matrix.yaml"


def _check_wheel(matrix: Path) -> Path:
    (wheel,) = sorted((matrix.parent / "wheelhouse" / "cuda").glob("*.whl"))
    assert wheel.name.startswith("cuda_driver_standin-0.1.0-cp312-cp312-manylinux_2_"), wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        elves = {n: inspect_elf(n, zf.read(n)) for n in names if is_elf(zf.read(n)[:4])}
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        lines = zf.read(meta).decode().splitlines()
    external = [line for line in lines if line.startswith("Requires-External:")]
    (extension,) = [e for n, e in elves.items() if "/_driver." in n]
    assert "libcuda.so.1" in extension.needed and "libcudart.so.13" in extension.needed, extension.needed
    assert not [n for n in names if "libcuda" in n], "the driver and the runtime are bound, never vendored"
    assert external == ["Requires-External: libcuda.so.1", "Requires-External: libcudart.so.13"]
    report = json.loads(Path(f"{wheel}.verify.json").read_text(encoding="utf-8"))
    assert report["ok"] is True, [r for r in report["rules"] if r["status"] == "fail"]
    assert report["runtime_bound"] == ["libcuda.so.1", "libcudart.so.13"]
    statuses = {r["id"]: r["status"] for r in report["rules"]}
    for rule in ("external-dependency", "vendored-runtime", "missing-runtime-needed", "runtime-abi"):
        assert statuses[rule] == "pass", (rule, report["rules"])
    return wheel


def _smoke(matrix: Path) -> None:
    proc = toolkit("--matrix", str(matrix), "smoke", "--variant", "cuda", "--python", "3.12")
    assert "GPU driver libcuda.so.1 absent" in proc.stdout, proc.stdout
    assert REFUSED.search(proc.stdout), proc.stdout
    assert "1/1 passed" in proc.stdout, proc.stdout


@pytest.mark.slow
def test_the_standin_builds_in_the_local_cuda_image(local_images: LocalImages, tmp_path: Path) -> None:
    image = local_images.make(local_images.build_recipe("cuda"))
    assert image == "localhost/xfer-build-cuda"
    matrix = _standin(tmp_path)
    proc = toolkit("--matrix", str(matrix), "build", "--variant", "cuda", "--container", timeout=3000)
    assert f"cibuildwheel in {image} through" in proc.stdout, proc.stdout
    _check_wheel(matrix)
    _smoke(matrix)


def _host_cuda() -> str | None:
    """Why the host cannot build the stand-in (None: it can): CUDA 13.0 with the driver's stub."""
    try:
        found = find_toolchain(load_backends(toolkit_backends())["cuda"])
    except ToolchainError as exc:
        return str(exc)
    prefix = Path(str(found.prefix))
    if not any((prefix / lib / "stubs" / "libcuda.so").exists() for lib in ("lib64", "lib")):
        return f"{prefix} has no stubs/libcuda.so: run `bash scripts/install-cuda.sh` (it makes it)"
    return None


@pytest.mark.skipif(_host_cuda() is not None, reason=f"{_host_cuda()}")
def test_the_standin_builds_on_the_host_against_its_cuda(tmp_path: Path) -> None:
    matrix = _standin(tmp_path)
    proc = toolkit("--matrix", str(matrix), "build", "--variant", "cuda", timeout=1800)
    assert "repairing (excluded: libcudart.so*, libcuda.so*)" in proc.stdout, proc.stdout
    _check_wheel(matrix)
    _smoke(matrix)
