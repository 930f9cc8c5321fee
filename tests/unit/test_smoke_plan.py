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


def test_rocm_serving_images_cross_every_hardware_tier() -> None:
    steps = plan.make_plan(load(ROOT / "matrix.yaml")).smokes
    seen = {(s.image, s.hardware, s.python) for s in steps if s.variant.name == "rocm"}
    for image in ("vllm-rocm", "sglang-rocm"):
        for tier in ("mi300x", "mi355x", "mi300x-pd"):
            assert (image, tier, "3.12") in seen
    by_id = {s.identifier: s for s in steps}
    assert by_id["cp312-rocm-vllm-rocm-mi355x"].architecture == "gfx950"
    assert by_id["cp312-rocm-sglang-rocm-mi300x"].architecture == "gfx942"
    assert by_id["cp312-rocm-vllm-rocm-mi300x-pd"].nodes == 2
    assert by_id["cp312-rocm-vllm-rocm-mi300x"].container.startswith("docker.io/rocm/vllm:")
    # simulated-only images (no container reference) never reach the hardware runners
    assert not [s for s in steps if s.image.startswith(("rocm-distro", "rocm-absent", "clean-minbase"))]


def test_plan_smoke_json_lists_the_cross_product(capsys: pytest.CaptureFixture[str]) -> None:
    loaded = load(ROOT / "matrix.yaml")
    args = argparse.Namespace(smoke=True, json=True, select="cp312-rocm-*", github=None, variant=None)
    assert plan_command.run(args, loaded) == 0
    include = json.loads(capsys.readouterr().out)["include"]
    pairs = {(row["image"], row["hardware"]) for row in include}
    assert pairs == {(i, t) for i in ("vllm-rocm", "sglang-rocm") for t in ("mi300x", "mi355x", "mi300x-pd")}
    assert {row["python"] for row in include} == {"3.12"}
