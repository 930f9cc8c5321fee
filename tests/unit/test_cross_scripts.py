"""What a cross build runs in its image, planned without a container (release/builder/cross.py):
the cross layer's setup re-runs the build image's toolkit install for the target machine, and each
wheel's build gets the variant's settings and repair excludes, as host and container builds do."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from release.builder.cross import setup_script, wheel_script
from release.config import matrix
from release.plan import steps as plan

ROOT = Path(__file__).resolve().parents[2]
MATRIX_FILE = ROOT / "matrix.yaml"


@pytest.fixture(scope="module")
def aarch64_steps() -> dict[str, plan.BuildStep]:
    built = plan.make_plan(matrix.load(MATRIX_FILE)).builds  # matrix.yaml: x86_64 and aarch64
    return {
        s.variant.name: s for s in built if s.identifier.startswith("cp313-") and "aarch64" in s.identifier
    }


def _words(script: str) -> list[str]:
    return shlex.split(script)


def _env(words: list[str]) -> dict[str, str]:
    assert words[0] == "env"
    pairs = [w for w in words[1 : words.index("bash")]]
    return dict(p.split("=", 1) for p in pairs)


def test_the_cuda_wheel_binds_its_runtime_and_names_it(aarch64_steps: dict[str, plan.BuildStep]) -> None:
    """auditwheel excludes libcudart/libcuda (bound, not vendored), CMake selects the cuda backend,
    and the build records the runtime requirements the import-time message names."""
    step = aarch64_steps["cuda"]
    words = _words(wheel_script(step, "aarch64", epoch="1700000000"))
    tail = words[words.index("wheel") :]
    assert tail[:5] == ["wheel", "aarch64-linux-gnu", "3.13", "/src", "/out"]
    options = list(zip(tail[5::2], tail[6::2], strict=True))
    assert ("-C", "cmake.define.XFER_BACKEND=cuda") in options
    assert [v for k, v in options if k == "--exclude"] == list(step.variant.excludes)
    assert {"libcudart.so*", "libcuda.so*"} <= set(step.variant.excludes)
    env = _env(words)
    assert env["SOURCE_DATE_EPOCH"] == "1700000000"
    requirements = json.loads(env["RELEASE_RUNTIME_REQUIREMENTS"])
    assert "libcudart.so.13" in requirements and "libcuda.so.1" in requirements


def test_the_cpu_wheel_excludes_nothing(aarch64_steps: dict[str, plan.BuildStep]) -> None:
    words = _words(wheel_script(aarch64_steps["cpu"], "aarch64", epoch="1"))
    assert "--exclude" not in words
    assert "cmake.define.XFER_BACKEND=cpu" in words
    assert "RELEASE_RUNTIME_REQUIREMENTS" not in " ".join(words)


def test_the_cross_layer_installs_the_toolkit_again_for_the_target(
    aarch64_steps: dict[str, plan.BuildStep],
) -> None:
    """The cuda build image's toolkit command (install-cuda.sh 13.0 --from-pypi) is the setup's last
    argument: cross-build.sh runs it with --target=aarch64 and the cross compiler; cpu has none."""
    recipe = aarch64_steps["cuda"].variant.build_image.local_recipe
    assert recipe is not None and recipe.toolkit_install == "bash scripts/install-cuda.sh 13.0 --from-pypi"
    words = _words(setup_script("aarch64", ("libfoo-dev:arm64",), recipe.toolkit_install))
    assert words[2:] == [
        "setup",
        "aarch64-linux-gnu",
        "arm64",
        "3.13",
        "libfoo-dev:arm64",
        recipe.toolkit_install,
    ]
    assert _words(setup_script("aarch64", (), None))[2:] == [
        "setup",
        "aarch64-linux-gnu",
        "arm64",
        "3.13",
        "",
    ]
