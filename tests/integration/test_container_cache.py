"""The compiler cache of container builds, for real: cibuildwheel under podman in the reference
engine's local cpu image (made by the suite's fixture when absent), building the shared-core
stand-in (tests/standins/shared_core: a C++ core without Python.h, compiled again for every Python,
and a binding). The second Python takes the core's objects from the variant's cache; a wheel
rebuilt with the warm cache is the cold one byte for byte; a changed flag is another cache."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from release.builder import cibw, compiler_cache
from release.config.matrix import load
from release.machine.containers import ContainerEngine
from release.plan.steps import make_plan
from release.settings import in_ci
from tests.integration.conftest import ROOT, LocalImages, toolkit

pytestmark = pytest.mark.integration

ENGINE = ContainerEngine.answering()
if ENGINE is None:
    if in_ci():
        pytest.fail("podman is not working here: .ci/run must install it (scripts/setup-podman.sh)")
    pytest.skip("no podman or docker answers (run scripts/setup-podman.sh)", allow_module_level=True)

STANDIN = ROOT / "tests" / "standins" / "shared_core"


@pytest.fixture(scope="module")
def cpu_image(local_images: LocalImages) -> str:
    """The reference engine's local cpu build image, which the stand-in's matrix names."""
    return local_images.make(local_images.build_recipe("cpu"))


def _hits(stdout: str) -> dict[str, tuple[int, int]]:
    """python tag -> (hits, compiler calls), from the build's summary table."""
    return {
        m.group(1): (int(m.group(2)), int(m.group(3)))
        for m in re.finditer(
            r"^shared_core_standin-\S+-(cp3\d+)-\S+\.whl .*? (\d+)/(\d+) \(\d+%\)", stdout, re.M
        )
    }


@pytest.mark.slow
def test_pythons_share_the_core_and_a_warm_wheel_is_the_cold_one(cpu_image: str, tmp_path: Path) -> None:
    project = tmp_path / "shared_core"
    shutil.copytree(STANDIN, project)
    matrix = str(project / "matrix.yaml")
    cold = toolkit(
        "--matrix", matrix, "build", "--variant", "cpu", "--container", "--wheelhouse", str(tmp_path / "a")
    )
    assert f"[cpu] compiler cache {project / 'build' / 'ccache' / 'cpu'}" in cold.stdout, cold.stdout
    hits = _hits(cold.stdout)
    assert hits["cp312"][0] == 0, f"a new cache has nothing to hit: {hits}"
    # cp313: its three core units (and CMake's two compiler checks) from cp312's build; the binding
    # includes Python.h and compiles.
    assert hits["cp313"][0] >= 3 and hits["cp313"][1] - hits["cp313"][0] >= 1, hits
    shutil.rmtree(project / "build" / "cpu" / "stamps")  # compile again, not "up to date"
    warm = toolkit(
        "--matrix", matrix, "build", "--variant", "cpu", "--container", "--python", "3.12",
        "--wheelhouse", str(tmp_path / "b"),
    )  # fmt: skip
    again = _hits(warm.stdout)["cp312"]
    assert again[0] == again[1] > 0, warm.stdout
    (first,) = (tmp_path / "a" / "cpu").glob("*cp312*.whl")
    (second,) = (tmp_path / "b" / "cpu").glob("*cp312*.whl")
    assert second.read_bytes() == first.read_bytes()


def test_a_changed_flag_is_another_cache_and_the_image_is_read_for_the_key(
    cpu_image: str, tmp_path: Path
) -> None:
    """The key directory from the real image (its ID, its compilers' identity): the same inputs
    find the same directory, a changed compiler flag (the variant's `env`) another, empty one."""
    assert ENGINE is not None
    identity = compiler_cache.compiler_identity(ENGINE, cpu_image)
    assert identity is not None and re.search(r"^c\+\+ \S+ .*14\.\d+\.\d+ [0-9a-f]{64}$", identity, re.M), (
        identity
    )
    directories = []
    for flags in ("", '    env: {CXXFLAGS: "-O1"}\n', ""):
        shutil.rmtree(tmp_path / "p", ignore_errors=True)
        shutil.copytree(STANDIN, tmp_path / "p")
        path = tmp_path / "p" / "matrix.yaml"
        path.write_text(
            path.read_text(encoding="utf-8").replace("    backend: cpu\n", f"    backend: cpu\n{flags}")
        )
        steps = make_plan(load(path)).builds_of("cpu")
        options = cibw.cibuildwheel_env(steps, image=cpu_image, before_build="x")
        cache = compiler_cache.open_cache(
            steps[0].variant, engine=ENGINE, image=cpu_image, options=options, shared=True
        )
        assert cache is not None
        directories.append(cache.directory.name)
    assert directories[0] == directories[2] != directories[1]
