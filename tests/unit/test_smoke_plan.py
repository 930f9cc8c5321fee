"""The smoke cross product: serving images x hardware tiers x the images' Pythons."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from release.commands import plan as plan_command
from release.config.matrix import load
from release.plan import steps as plan

ROOT = Path(__file__).resolve().parents[2]


def test_rocm_serving_images_cross_the_hardware_tiers_of_their_kernels() -> None:
    """vLLM's image is built for every AMD tier; SGLang's `-mi30x` image for gfx942 alone
    (`gpu_architectures`), so it never reaches an MI35x runner."""
    steps = plan.make_plan(load(ROOT / "matrix.yaml")).smokes
    seen = {(s.image, s.hardware, s.python) for s in steps if s.variant.name == "rocm"}
    for tier in ("mi300x", "mi355x", "mi350x-pd"):
        assert ("vllm-rocm", tier, "3.12") in seen  # each image's own Python
    assert {(h, py) for image, h, py in seen if image == "sglang-rocm"} == {("mi300x", "3.10")}
    by_id = {s.identifier: s for s in steps}
    assert by_id["cp312-rocm-vllm-rocm-mi355x"].architecture == "gfx950"
    assert by_id["cp310-rocm-sglang-rocm-mi300x"].architecture == "gfx942"
    assert by_id["cp312-rocm-vllm-rocm-mi350x-pd"].nodes == 2
    assert by_id["cp312-rocm-vllm-rocm-mi300x"].container.startswith("docker.io/vllm/vllm-openai-rocm:")
    assert all(s.architecture == "gfx950" for s in steps if s.image in ("sglang-rocm10", "sglang-rocm724"))
    # simulated-only images (no container reference) never reach the hardware runners
    simulated_only = ("rocm-distro", "rocm-absent", "rocm6-only", "clean-minbase")
    assert not [s for s in steps if s.image.startswith(simulated_only)]


def test_plan_smoke_json_lists_the_cross_product(capsys: pytest.CaptureFixture[str]) -> None:
    loaded = load(ROOT / "matrix.yaml")
    args = argparse.Namespace(smoke=True, json=True, select="cp312-rocm-*", github=None, variant=None)
    assert plan_command.run(args, loaded) == 0
    include = json.loads(capsys.readouterr().out)["include"]
    pairs = {(row["image"], row["hardware"]) for row in include}
    assert pairs == {("vllm-rocm", t) for t in ("mi300x", "mi355x", "mi350x-pd")}  # SGLang's image is 3.10
    assert {row["python"] for row in include} == {"3.12"}


ABI3_MATRIX = """\
schema_version: 1
engine: {source: engine, import_name: xfer, version: "0.1.0", stable_abi: "3.12"}
python: ["3.11", "3.12", "3.13", "3.14", "3.14t"]
platform: {floor: manylinux_2_28_x86_64}
variants:
  cpu: {distribution: xfer-engine-cpu, backend: cpu}
"""


@pytest.mark.parametrize(
    ("here", "expected"),
    [
        ((), ["3.12", "3.13", "3.14"]),  # never 3.14t: a free-threaded build does not load abi3
        (("3.16",), ["3.12", "3.13", "3.14", "3.16"]),
        (("3.14", "3.16"), ["3.12", "3.13", "3.14", "3.16"]),
    ],
)
def test_an_abi3_wheel_is_smoked_in_every_python_it_serves(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, here: tuple[str, ...], expected: list[str]
) -> None:
    from release.config.matrix import loads
    from release.smoke import selection

    monkeypatch.setattr(selection, "find_interpreter", lambda v: Path(f"/py/{v}") if v in here else None)
    monkeypatch.setattr(selection, "newer_pythons", lambda: ("3.16",))  # a `newer` row of pythons.json
    loaded = loads(ABI3_MATRIX, path=tmp_path / "matrix.yaml", backends_dir=ROOT / "packaging" / "backends")
    variant = plan.make_plan(loaded).variants["cpu"]
    wheelhouse = tmp_path / "cpu"
    wheelhouse.mkdir()
    for name in ("xfer_engine_cpu-0.1.0-cp311-cp311-manylinux_2_28_x86_64.whl",
                 "xfer_engine_cpu-0.1.0-cp312-abi3-manylinux_2_28_x86_64.whl"):  # fmt: skip
        (wheelhouse / name).write_bytes(b"")
    per_python, abi3 = selection.wheels_for(wheelhouse, variant, None)
    assert selection.smoke_pythons(per_python, variant, None) == ["3.11"]
    assert selection.smoke_pythons(abi3, variant, None) == expected
    # One Python asked for: the wheel that serves it, in that Python only.
    assert selection.wheels_for(wheelhouse, variant, "3.13") == [abi3]
    assert selection.smoke_pythons(abi3, variant, "3.13") == ["3.13"]
    assert selection.wheels_for(wheelhouse, variant, "3.11") == [per_python]


def test_an_image_s_gpu_architecture_no_tier_has_is_one_line() -> None:
    from release.config.matrix import loads
    from release.errors import MatrixError

    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    text = text.replace("gpu_architectures: [gfx942]", "gpu_architectures: [gfx1100]", 1)
    with pytest.raises(MatrixError) as raised:
        loads(text, path=ROOT / "matrix.yaml", backends_dir=ROOT / "packaging" / "backends")
    message = str(raised.value)
    assert "images.sglang-rocm.gpu_architectures[0]" in message and "'gfx1100'" in message, message
    assert "declared: gfx942, gfx950" in message, message
