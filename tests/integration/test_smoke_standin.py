"""Serving images we cannot pull here (vLLM, SGLang) are smoked without `--pull` in stand-ins:
real podman containers made from Debian's HIP 7.2 runtime (trixie, experimental), laid out as the
images declare.

A small hand-written wheel of the rocm variant that loads libamdhip64.so.7 stands in for a real
build (building wheels is slow); the stand-in images are made by the fixture when absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.config.matrix import load
from release.machine.containers import ContainerEngine
from release.machine.images import ensure
from release.plan.steps import make_plan
from release.settings import in_ci

from .conftest import ROOT, toolkit, write_wheel

ENGINE = ContainerEngine.answering()
if ENGINE is None:
    if in_ci():
        pytest.fail("podman is not working here: .ci/run must install it (scripts/setup-podman.sh)")
    pytest.skip("no podman or docker answers (run scripts/setup-podman.sh)", allow_module_level=True)

VLLM = (
    "docker.io/vllm/vllm-openai-rocm:v0.21.0"
    "@sha256:98a77b20df03adeb1cfc0ced009b4df6dd52b0a994ab99a32421f30876a9ae0c"
)
SGLANG = (
    "docker.io/lmsysorg/sglang:v0.5.16-rocm720-mi30x"
    "@sha256:80d04638deb64fac000fa565cb46e5d2f692173dc125a32a956014a6383ecaee"
)

INIT = """
import ctypes
try:
    _hip = ctypes.CDLL("libamdhip64.so.7")
except OSError:
    raise ImportError("xfer (xfer-engine-rocm) needs libamdhip64.so.7 (ROCm 7.x or 10.x)") from None
"""
MAIN = """import json

def master():
    print("xfer-master 0.1.0 (test wheel)")

if __name__ == "__main__":
    print(json.dumps({"ok": True}))
"""


def _rocm_wheel(directory: Path, platform: str = "linux_x86_64", python: str = "cp312") -> Path:
    """`xfer_engine_rocm-0.1.0-<python>-<python>-<platform>.whl`: `import xfer` binds the HIP runtime."""
    info = "xfer_engine_rocm-0.1.0.dist-info"
    files = {
        "xfer/__init__.py": INIT,
        "xfer/__main__.py": MAIN,
        f"{info}/entry_points.txt": "[console_scripts]\nxfer-master = xfer.__main__:master\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: xfer-engine-rocm\nVersion: 0.1.0\n",
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
            f"Tag: {python}-{python}-{platform}\n"
        ),
    }
    return write_wheel(directory / f"xfer_engine_rocm-0.1.0-{python}-{python}-{platform}.whl", files)


@pytest.fixture(scope="module")
def standins() -> dict[str, str]:
    """The serving images' stand-ins of the real matrix, made (or reused) as the smoke run would."""
    assert ENGINE is not None
    rocm = make_plan(load(ROOT / "matrix.yaml")).variants["rocm"]
    made = {}
    for image in rocm.images:
        if image.standin is not None:
            ensure(ENGINE, image.standin, log=print)
            made[image.name] = image.standin.tag
    assert made == {
        "vllm-rocm": "localhost/xfer-standin-vllm-rocm",
        "sglang-rocm": "localhost/xfer-standin-sglang-rocm",
    }
    return made


@pytest.mark.slow
def test_serving_images_are_smoked_in_stand_ins_without_pull(
    standins: dict[str, str], tmp_path: Path
) -> None:
    wheelhouse = tmp_path / "wheelhouse"
    _rocm_wheel(wheelhouse / "rocm")  # vLLM's image is Python 3.12, SGLang's 3.10 (images.facts.json)
    _rocm_wheel(wheelhouse / "rocm", python="cp310")
    smoke = ["smoke", "--variant", "rocm", "--wheelhouse", str(wheelhouse)]
    proc = toolkit(*smoke, "--image", "vllm-rocm", "--image", "sglang-rocm", timeout=1800)
    out = proc.stdout
    table = out[out.index("\nwheel ") :]
    assert f"stand-in for {VLLM}: {ENGINE} container {standins['vllm-rocm']}" in table, out
    assert f"stand-in for {SGLANG}: {ENGINE} container {standins['sglang-rocm']}" in table, out
    assert "2/2 passed" in out, out
    # The runtime came from the layout each image declares, in the stand-in's own file system.
    assert "runtime location ... ok" in out
    # (the vLLM layout through ld.so.conf.d, the SGLang one through LD_LIBRARY_PATH: both /opt/rocm/lib)
    assert out.count("/opt/rocm/lib/libamdhip64.so.7") >= 2, out


@pytest.mark.slow
def test_with_pull_there_is_no_stand_in_and_a_failed_pull_fails_the_leg(
    standins: dict[str, str], tmp_path: Path
) -> None:
    wheelhouse = tmp_path / "wheelhouse"
    _rocm_wheel(wheelhouse / "rocm")
    smoke = ["smoke", "--variant", "rocm", "--python", "3.12", "--wheelhouse", str(wheelhouse)]
    proc = toolkit(*smoke, "--image", "vllm-rocm", "--pull", check=False, timeout=1800)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 7, output
    assert f"cannot pull {VLLM}" in output
    assert "stand-in" not in output
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_wheel_this_host_cannot_install_runs_its_host_leg_in_the_build_image(tmp_path: Path) -> None:
    """A manylinux_2_39 wheel on this glibc 2.36 host: the `host` leg runs in the variant's local
    build image (Debian trixie, glibc 2.41), which can install it, and the table says why."""
    assert ENGINE is not None
    from release.smoke.placement import host_libc

    libc = host_libc()
    if libc.startswith("glibc 2.") and int(libc.split(".")[1]) >= 39:
        pytest.fail(f"this host ({libc}) installs manylinux_2_39: the test needs an older glibc")
    rocm = make_plan(load(ROOT / "matrix.yaml")).variants["rocm"]
    build = rocm.build_image.local_recipe
    assert build is not None
    ensure(ENGINE, build, log=print)
    wheelhouse = tmp_path / "wheelhouse"
    _rocm_wheel(wheelhouse / "rocm", "manylinux_2_39_x86_64")
    smoke = ["smoke", "--variant", "rocm", "--python", "3.12", "--wheelhouse", str(wheelhouse)]
    proc = toolkit(*smoke, "--image", "host", timeout=1800)
    assert f"{ENGINE} container {build.tag} (host {libc} cannot install manylinux_2_39)" in proc.stdout
    assert "1/1 passed" in proc.stdout, proc.stdout
