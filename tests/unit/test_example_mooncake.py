"""examples/mooncake/matrix.yaml, the standing example of a real third-party engine, stays a valid
matrix as the model changes, and keeps the switches that make Mooncake build (docs/records/real-engines.md).
The Mooncake checkout itself is not here (no network in CI): examples/mooncake/build.sh builds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.config import matrix

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mooncake" / "matrix.yaml"


@pytest.fixture(scope="module")
def loaded() -> matrix.LoadedMatrix:
    return matrix.load(EXAMPLE)


def test_first_line_points_editors_at_the_toolkit_schema() -> None:
    first = EXAMPLE.read_text(encoding="utf-8").splitlines()[0]
    schema = first.removeprefix("# yaml-language-server: $schema=")
    assert (EXAMPLE.parent / schema).resolve() == ROOT / "release" / "config" / "matrix.schema.json"


def test_three_variants_for_cp312_each_in_a_local_image(loaded: matrix.LoadedMatrix) -> None:
    variants = loaded.matrix.variants
    assert sorted(variants) == ["cpu", "cuda", "rocm"]
    assert "3.12" in loaded.matrix.python
    assert {name: v.backend for name, v in variants.items()} == {"cpu": "cpu", "cuda": "cuda", "rocm": "rocm"}
    assert all(v.build_image is not None and v.build_image.debian is not None for v in variants.values())
    assert variants["cuda"].distribution == "mooncake-transfer-engine"


def test_runtime_switches_are_mooncakes_own_options(loaded: matrix.LoadedMatrix) -> None:
    """init proposed MOONCAKE_BACKEND, which Mooncake does not read: USE_CUDA / USE_HIP select it."""
    defines = {name: dict(v.cmake_defines) for name, v in loaded.matrix.variants.items()}
    assert defines["cuda"]["USE_CUDA"] == "ON"
    assert defines["rocm"]["USE_HIP"] == "ON"
    assert "USE_CUDA" not in defines["cpu"] and "USE_HIP" not in defines["cpu"]
    for d in defines.values():
        assert "MOONCAKE_BACKEND" not in d
        assert d["WITH_STORE"] == "OFF"


def test_system_packages_cover_what_the_transfer_engine_links(loaded: matrix.LoadedMatrix) -> None:
    packages = loaded.matrix.engine.system_packages
    for name in ("glog", "gflags", "jsoncpp", "yaml-cpp", "curl", "ibverbs", "numa", "asio"):
        assert name in packages, name
        assert packages[name].apt, name


def test_the_driver_stub_path_is_the_toolkits_not_the_example_s(loaded: matrix.LoadedMatrix) -> None:
    """Mooncake's nvlink allocator links a bare `-lcuda`; the toolkit's cuda data puts the stub
    directory on LIBRARY_PATH (tests/unit/test_cibw.py), so the example sets none of its own."""
    assert "LIBRARY_PATH" not in loaded.matrix.variants["cuda"].env
    probe = loaded.backends["cuda"].toolkit
    assert probe is not None and probe.link_dirs == ("lib64/stubs",)


def test_the_rocm_image_has_hipify_perl(loaded: matrix.LoadedMatrix) -> None:
    """Mooncake's configure stops without hipify-perl (mooncake-common/common.cmake:440) once
    USE_HIP is on; experimental's matches HIP 7.2 and needs only perl."""
    image = loaded.matrix.variants["rocm"].build_image
    assert image is not None and image.debian is not None
    assert "hipify-perl/experimental" in image.debian.packages
