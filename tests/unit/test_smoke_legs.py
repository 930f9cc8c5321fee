"""A smoke run's legs are planned as frozen data before any runs: every image of the variant (and
`host`) for each wheel's Python, and where each leg runs, read without starting a container."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from pathlib import Path
from typing import Any

import pytest

from release.config.matrix import load
from release.errors import UsageError
from release.plan.resolve import LocalImage, ResolvedVariant
from release.plan.steps import make_plan
from release.smoke.legs import Leg, plan_legs
from release.smoke.selection import HOST_IMAGE

ROOT = Path(__file__).resolve().parents[2]
CP312 = Path("xfer_engine_rocm-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl")
CP310 = Path("xfer_engine_rocm-0.1.0-cp310-cp310-manylinux_2_28_x86_64.whl")


def _rocm() -> ResolvedVariant:
    return make_plan(load(ROOT / "matrix.yaml")).variant("rocm")


def _legs(engine: str | None, **kw: Any) -> tuple[tuple[Leg, ...], list[str]]:
    made: list[str] = []

    def usable(recipe: LocalImage) -> bool:
        made.append(recipe.tag)
        return True

    options: dict[str, Any] = {
        "python": None, "images": None, "in_image": None, "host_has_runtime": False,
        "engine": engine, "pull": False, "usable": usable, "refused": {},
    }  # fmt: skip
    options.update(kw)
    return plan_legs(_rocm(), [CP310, CP312], **options), made


def test_every_image_and_python_is_planned_with_its_place_before_anything_runs() -> None:
    legs, _ = _legs("podman")
    seen = {(leg.python, leg.image) for leg in legs}
    # Each image with Pythons of its own gets only those: SGLang's 7.2.0 image is 3.10, vLLM's 3.12.
    assert ("3.10", "sglang-rocm") in seen and ("3.12", "sglang-rocm") not in seen
    assert ("3.12", "vllm-rocm") in seen and ("3.10", "vllm-rocm") not in seen
    assert {("3.10", HOST_IMAGE), ("3.12", HOST_IMAGE)} <= seen
    by = {(leg.python, leg.image): leg for leg in legs}
    # Local recipes and stand-ins run in their containers; the host leg runs here.
    therock = by[("3.12", "therock-pip")].where
    assert therock.recipe is not None and therock.container == therock.recipe.tag
    assert str(by[("3.12", "vllm-rocm")].where.container).startswith("localhost/")
    assert by[("3.12", HOST_IMAGE)].where.container is None
    assert not [leg for leg in legs if leg.skipped]
    # Images awaiting their digest (pin: probe) have no leg at all.
    assert not [leg for leg in legs if leg.image in ("sglang-rocm10", "vllm-rocm-v033")]
    with pytest.raises(FrozenInstanceError):
        legs[0].python = "3.13"  # type: ignore[misc]


def test_without_a_container_engine_the_simulations_run_and_the_rest_is_skipped_with_why() -> None:
    legs, made = _legs(None)
    assert made == [], "no engine: no local image is asked about"
    assert {leg.where.container for leg in legs} == {None}
    skipped = {leg.image for leg in legs if leg.skipped}
    simulated = {leg.image for leg in legs if not leg.skipped}
    assert "rocm-distro" in simulated and HOST_IMAGE in simulated
    assert not skipped & simulated
    assert all(leg.skipped == "no simulation and no container engine here" for leg in legs if leg.skipped)


def test_one_python_one_image_and_in_image_narrow_the_plan() -> None:
    legs, _ = _legs("podman", python="3.12", images=["rocm-distro"])
    assert [(leg.wheel, leg.python, leg.image) for leg in legs] == [
        (CP310, "3.12", "rocm-distro"),
        (CP312, "3.12", "rocm-distro"),
    ]
    inside, _ = _legs("podman", python="3.12", in_image="rocm-distro")
    assert {(leg.image, leg.where.container) for leg in inside} == {("rocm-distro", None)}
    with pytest.raises(UsageError, match="'nope' is not an image of this variant"):
        _legs("podman", images=["nope"])


def test_a_wheel_this_host_cannot_install_moves_its_host_leg_into_the_build_image() -> None:
    legs, _ = _legs("podman", python="3.12", images=[HOST_IMAGE], refused={CP312: "needs glibc 2.39"})
    by = {leg.wheel: leg for leg in legs}
    assert by[CP310].where.container is None
    moved = by[CP312].where
    recipe = _rocm().build_image.local_recipe
    assert recipe is not None and moved.container == recipe.tag
    assert moved.runner == f"podman container {moved.container} (needs glibc 2.39)"
