"""`hipcc` in the default local ROCm build image, and the CI stand-in for engines that call it.

Real ROCm engines compile host-only files with `hipcc` by name (Mooncake's nvlink allocator). The
local ROCm image (the toolkit's matrix.yaml recipe, localhost/xfer-build-rocm) gets the toolkit's
host-only hipcc from `install-rocm.sh 7.2` (docs/records/rocm-hipcc.md). The stand-in engine
(tests/standins/hipcc_host: CMake, scikit-build-core, a TEST STAND-IN, not a real engine) compiles
one such file with it, links it into its extension, and goes through build, repair, verify and
smoke in real podman containers, one Python (3.12)."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from release.inspect.elf import inspect_elf, is_elf
from release.machine.containers import ContainerEngine
from release.settings import in_ci
from tests.integration.conftest import ROOT, LocalImages, toolkit

ENGINE = ContainerEngine.answering()
if ENGINE is None:
    if in_ci():
        pytest.fail("podman is not working here: .ci/run must install it (scripts/setup-podman.sh)")
    pytest.skip("no podman or docker answers (run scripts/setup-podman.sh)", allow_module_level=True)

STANDIN = ROOT / "tests" / "standins" / "hipcc_host"

HOST_ONLY = """\
#include <hip/hip_runtime.h>
// __global__ in a comment is no kernel
extern "C" int probe(void) { int n = 0; return (int)hipGetDeviceCount(&n); }
"""
KERNEL = """\
#include <hip/hip_runtime.h>
__global__ void fill(int *x) { *x = 1; }
"""


@pytest.fixture(scope="module")
def rocm_image(local_images: LocalImages) -> str:
    """The default local ROCm build image, made from the toolkit's own matrix.yaml when absent."""
    return local_images.make(local_images.build_recipe("rocm"))


def _in_image(image: str, directory: Path, script: str) -> subprocess.CompletedProcess[str]:
    assert ENGINE is not None
    argv = [ENGINE.command, "run", "--rm", "--network=none", "-v", f"{directory}:/src:Z", "-w", "/src", image,
            "bash", "-c", script]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)


def test_the_rocm_image_has_a_hipcc_for_host_code(rocm_image: str, tmp_path: Path) -> None:
    (tmp_path / "host.cpp").write_text(HOST_ONLY, encoding="utf-8")
    proc = _in_image(rocm_image, tmp_path, (
        "command -v hipcc && hipcc --version && "
        "hipcc host.cpp -o libprobe.so -shared -fPIC -lamdhip64 -I/opt/rocm/include && "
        "readelf -d libprobe.so | grep NEEDED && getconf GNU_LIBC_VERSION"
    ))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "/usr/bin/hipcc"
    assert lines[1].startswith("HIP version: 7.2."), lines
    assert "Shared library: [libamdhip64.so.7]" in proc.stdout
    assert "glibc 2.41" in proc.stdout, "the image's C library stays trixie's"


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("hipcc -x hip -c kernel.cpp -o k.o", "kernel.cpp defines or launches a kernel"),
        ("hipcc --offload-arch=gfx942 -c host.cpp -o h.o", "--offload-arch=gfx942 asks for device code"),
    ],
)
def test_the_host_only_hipcc_refuses_device_code_in_one_line(
    rocm_image: str, tmp_path: Path, command: str, says: str
) -> None:
    (tmp_path / "host.cpp").write_text(HOST_ONLY, encoding="utf-8")
    (tmp_path / "kernel.cpp").write_text(KERNEL, encoding="utf-8")
    proc = _in_image(rocm_image, tmp_path, command)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert says in proc.stderr and "this hipcc compiles host code only" in proc.stderr
    assert "build_image.local" in proc.stderr
    assert not any(tmp_path.glob("*.o")), "nothing is compiled"


def _needed(wheel: Path) -> dict[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = {}
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            data = zf.read(info)
            if is_elf(data[:4]):
                found[info.filename] = tuple(inspect_elf(info.filename, data).needed)
    return found


@pytest.mark.slow
def test_standin_engine_compiles_with_hipcc_and_binds_the_runtime(rocm_image: str, tmp_path: Path) -> None:
    project = tmp_path / "hipcc_host"
    shutil.copytree(STANDIN, project)
    matrix = project / "matrix.yaml"
    wheelhouse = tmp_path / "wheelhouse"
    build = toolkit("--matrix", str(matrix), "build", "--variant", "rocm", "--python", "3.12", "--container",
                    "--wheelhouse", str(wheelhouse), timeout=3000)  # fmt: skip
    assert rocm_image in build.stdout, build.stdout
    (wheel,) = sorted((wheelhouse / "rocm").glob("*.whl"))
    assert wheel.name.startswith("hipcc_host_standin_rocm-0.1.0-cp312-cp312-manylinux_2_"), wheel.name
    needed = _needed(wheel)
    (native,) = [n for n in needed if n.startswith("hipcc_host/_native")]
    assert "libamdhip64.so.7" in needed[native], needed
    assert not [n for n in needed if "libamdhip64" in n], "the runtime is bound, not vendored"
    report = json.loads(wheel.with_name(wheel.name + ".verify.json").read_text(encoding="utf-8"))
    assert report["ok"] is True, [r for r in report["rules"] if r["status"] == "fail"]
    assert report["runtime_bound"] == ["libamdhip64.so.7"]
    tag = report["platform_tags"][0]  # repaired to a manylinux tag within trixie's glibc 2.41
    assert tag.startswith("manylinux_2_") and int(tag.split("_")[2]) <= 41, tag

    smoke = toolkit("--matrix", str(matrix), "smoke", "--variant", "rocm", "--python", "3.12",
                    "--wheelhouse", str(wheelhouse), "--json", timeout=3000)  # fmt: skip
    results = {r["image"]: r for r in json.loads(smoke.stdout)["results"]}
    if results.get("host", {}).get("expect") == "runtime-missing":
        # A host without HIP 7.2's runtime: the import guard's sentence, not a bare loader error.
        refused = next(s for s in results["host"]["steps"] if s["name"] == "import hipcc_host refused")
        assert results["host"]["ok"] and "libamdhip64.so.7" in refused["detail"], results["host"]
    result = results["rocm-distro"]
    assert result["ok"], result
    assert result["runner"].startswith(f"{ENGINE} container "), result
    steps = {s["name"]: s for s in result["steps"]}
    # hipGetDeviceCount and hipMalloc answered through the hipcc-compiled file: hipErrorNoDevice
    # (100) without a GPU, the JSON's `ok` checks it.
    command = steps["python -m hipcc_host"]
    assert command["ok"] and command["detail"] == "ok: true", steps
    location = steps["runtime location"]["detail"]
    assert location.startswith("/usr/lib/x86_64-linux-gnu/libamdhip64.so.7"), location
