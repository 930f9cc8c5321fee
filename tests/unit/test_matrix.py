"""The committed matrix.yaml loads into the model with the values the release depends on."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.config import matrix
from release.errors import UsageError
from release.plan.resolve import resolve_variant

ROOT = Path(__file__).resolve().parents[2]
MATRIX_FILE = ROOT / "matrix.yaml"


@pytest.fixture(scope="module")
def loaded() -> matrix.LoadedMatrix:
    return matrix.load(MATRIX_FILE)


def test_first_line_points_editors_at_the_schema() -> None:
    first = MATRIX_FILE.read_text(encoding="utf-8").splitlines()[0]
    assert first == "# yaml-language-server: $schema=release/config/matrix.schema.json"
    assert (ROOT / "release" / "config" / "matrix.schema.json").is_file()


def test_variants_and_distributions(loaded: matrix.LoadedMatrix) -> None:
    distributions = {name: v.distribution for name, v in loaded.matrix.variants.items()}
    assert distributions == {
        "cpu": "xfer-engine-cpu",
        "cuda": "xfer-engine",
        "rocm": "xfer-engine-rocm",
        "musa": "xfer-engine-musa",
    }
    assert {name: v.backend for name, v in loaded.matrix.variants.items()} == {
        "cpu": "cpu",
        "cuda": "cuda",
        "rocm": "rocm",
        "musa": "musa",
    }


def test_pythons_and_floor(loaded: matrix.LoadedMatrix) -> None:
    assert loaded.matrix.python == ("3.10", "3.11", "3.12", "3.13", "3.14", "3.15", "3.14t", "3.15t")
    assert loaded.matrix.platform.floor == "manylinux_2_28"  # a policy: each machine its own tag
    assert loaded.matrix.platform.machines == ("x86_64", "aarch64")
    assert loaded.matrix.schema_version == 1


def test_rocm_binds_its_runtime_and_serves_both_architectures(loaded: matrix.LoadedMatrix) -> None:
    rocm = loaded.variant("rocm")
    assert rocm.exclude == ("libamdhip64.so*", "libhsa-runtime64.so*")
    assert rocm.architectures == ("gfx942", "gfx950")
    assert rocm.device_code is False
    assert loaded.backends[rocm.backend].name == "rocm"
    assert resolve_variant(loaded, "rocm").runtime_needed == ("libamdhip64.so",)


def test_gpu_variants_exclude_their_runtime(loaded: matrix.LoadedMatrix) -> None:
    assert loaded.variant("cuda").exclude == ()  # the backend's data: the runtime and the driver
    assert resolve_variant(loaded, "cuda").excludes == ("libcudart.so*", "libcuda.so*")
    assert loaded.variant("musa").exclude == ("libmusart.so*", "libmusa.so*")
    assert loaded.variant("cpu").exclude == ()


def test_images_and_hardware_are_defined_and_referenced(loaded: matrix.LoadedMatrix) -> None:
    m = loaded.matrix
    assert {"clean-minbase", "rocm-distro", "rocm-opt-prefix", "rocm-ld-library-path", "rocm-absent",
            "vllm-rocm", "sglang-rocm"} <= set(m.images)
    assert set(m.hardware) == {"mi300x", "mi355x", "mi350x-pd", "gh200", "gb200-pd"}
    for variant in m.variants.values():
        assert set(variant.images) <= set(m.images)
        assert set(variant.hardware) <= set(m.hardware)
    assert m.variants["rocm"].hardware == ("mi300x", "mi355x", "mi350x-pd")
    assert m.hardware["mi355x"].architecture == "gfx950"
    assert m.hardware["mi350x-pd"].nodes == 2
    pd = m.hardware["mi350x-pd"]
    assert (pd.gpu, pd.architecture) == ("AMD Instinct MI350X", "gfx950")
    assert m.images["rocm-absent"].expect == "runtime-missing"
    sim = m.images["rocm-ld-library-path"].simulate
    assert sim is not None
    assert (sim.runtime, sim.prefix, sim.via) == ("prefix", "/opt/rocm/lib", "LD_LIBRARY_PATH")
    assert m.images["vllm-rocm"].container is not None
    assert m.images["vllm-rocm"].python == ("3.12",)


def test_engine_and_publish(loaded: matrix.LoadedMatrix) -> None:
    engine = loaded.matrix.engine
    assert engine.import_name == "xfer"
    assert engine.scripts == ("xfer-master",)
    assert engine.own_libraries == ("libxfer*",)
    assert engine.prebuild is not None
    assert loaded.engine_dir == (ROOT / engine.source).resolve()
    assert loaded.root == ROOT
    assert loaded.matrix.publish.prerelease == "separate-index"


def test_unknown_variant_is_a_usage_error_with_a_suggestion(loaded: matrix.LoadedMatrix) -> None:
    with pytest.raises(UsageError, match=r"no variant 'rcom'; did you mean 'rocm'\?"):
        loaded.variant("rcom")


def test_x_keys_are_free_for_anchors() -> None:
    text = MATRIX_FILE.read_text(encoding="utf-8")
    text = text.replace("schema_version: 1\n", "schema_version: 1\nx-pythons: &py [\"3.12\"]\n", 1)
    text = text.replace('    python: ["3.12"]\n', "    python: *py\n")
    loaded = matrix.loads(text, path=MATRIX_FILE)
    assert loaded.matrix.images["vllm-rocm"].python == ("3.12",)


def test_load_reports_an_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(matrix.MatrixError, match="cannot read"):
        matrix.load(tmp_path / "matrix.yaml")
