"""The local ROCm build image compiles like the release image: GCC 14 (manylinux_2_28's), with
which HIP's headers and libstdc++'s `<format>` compile together (HIP's `#define __noinline__`
breaks GCC 16's `<format>`, the only g++ Debian sid has by default).

The image is made by the toolkit from the real matrix.yaml recipe (`images.ensure`) when absent or
stale, as `release build --container` makes it; needs podman as root to make it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from release.inspect.elf import inspect_elf
from release.machine.containers import ContainerEngine
from release.plan.resolve import LocalImage
from release.settings import in_ci
from tests.integration.conftest import LocalImages

pytestmark = pytest.mark.integration

ENGINE = ContainerEngine.answering()
if ENGINE is None:
    if in_ci():
        pytest.fail("podman is not working here: .ci/run must install it (scripts/setup-podman.sh)")
    pytest.skip("no podman or docker answers (run scripts/setup-podman.sh)", allow_module_level=True)

SOURCE = r"""
#include <hip/hip_runtime.h>
#include <chrono>
#include <format>
#include <string>

std::string stamp(int device) {
    return std::format("device {} after {}", device, std::chrono::milliseconds(250));
}

int main() {
    int version = 0;
    (void)hipRuntimeGetVersion(&version);
    return stamp(version).empty() ? 1 : 0;
}
"""


@pytest.fixture(scope="session")
def rocm_build_image(local_images: LocalImages) -> LocalImage:
    """The rocm variant's local build image, made (or found up to date) from matrix.yaml, from the
    suite's one registry of local images."""
    recipe = local_images.build_recipe("rocm")
    local_images.make(recipe)
    return recipe


def _run(image: str, *command: str, mount: Path | None = None) -> subprocess.CompletedProcess[str]:
    assert ENGINE is not None
    volume = ["-v", f"{mount}:/src:Z"] if mount is not None else []
    return subprocess.run(
        [ENGINE.command, "run", "--rm", "--network=none", *volume, image, *command],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def test_the_rocm_build_image_compiles_with_gcc_14(rocm_build_image: LocalImage) -> None:
    assert rocm_build_image.gcc == "14", "the release image (manylinux_2_28) compiles with GCC 14"
    for compiler in ("cc", "c++", "gcc", "g++"):
        proc = _run(rocm_build_image.tag, compiler, "-dumpfullversion")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split(".")[0] == "14", f"{compiler}: {proc.stdout}"


@pytest.mark.slow
def test_hip_headers_and_format_compile_together(rocm_build_image: LocalImage, tmp_path: Path) -> None:
    (tmp_path / "stamp.cpp").write_text(SOURCE, encoding="utf-8")
    proc = _run(
        rocm_build_image.tag,
        "c++", "-std=c++20", "-D__HIP_PLATFORM_AMD__", "-c", "/src/stamp.cpp", "-o", "/src/stamp.o",
        mount=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    # What verify reports as the compiler, read from the object's .comment section.
    comment = inspect_elf("stamp.o", (tmp_path / "stamp.o").read_bytes()).comment
    assert [c for c in comment if c.startswith("GCC: ") and c.split()[-1].startswith("14.")], comment
