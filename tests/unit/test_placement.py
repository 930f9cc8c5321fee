"""Where each variant builds is frozen data decided before anything builds (`release.plan.placement`):
read here from the repository's matrix and given host facts, with no toolkit and no container."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from release.config.matrix import load
from release.plan.placement import HostToolkit, Placement, place
from release.plan.resolve import ResolvedVariant
from release.plan.steps import make_plan

ROOT = Path(__file__).resolve().parents[2]
MISMATCH = "rocm: the matrix declares toolkit 7.2, this host has 5.2: install it with `x`"
SETUP = "sudo scripts/setup-podman.sh"


@pytest.fixture(scope="module")
def variants() -> dict[str, ResolvedVariant]:
    plan = make_plan(load(ROOT / "matrix.yaml"), include_held_back=True)
    return {s.variant.name: s.variant for s in plan.builds}


def engine_asked(answer: str | None) -> tuple[list[int], Callable[[], str | None]]:
    asked: list[int] = []

    def probe() -> str | None:
        asked.append(1)
        return answer

    return asked, probe


def test_the_declared_toolkit_here_builds_on_the_host_and_asks_no_engine(
    variants: dict[str, ResolvedVariant],
) -> None:
    asked, probe = engine_asked("podman")
    placed = place(variants, dict.fromkeys(variants, HostToolkit(None)), engine=probe, setup_podman=SETUP)
    assert [p.where for p in placed] == ["host"] * len(variants)
    assert [p.variant for p in placed] == list(variants)
    assert placed[0] == Placement(placed[0].variant, "host", "the declared toolkit is here")
    assert asked == []


def test_an_allowed_mismatch_builds_on_the_host_and_is_recorded(variants: dict[str, ResolvedVariant]) -> None:
    toolkits = dict.fromkeys(variants, HostToolkit(None))
    toolkits["rocm"] = HostToolkit(None, override="declared 7.2, built with 5.2")
    (rocm,) = [p for p in place(variants, toolkits, engine=None) if p.variant == "rocm"]
    assert (rocm.where, rocm.override, rocm.why) == ("host", "declared 7.2, built with 5.2", rocm.override)


def test_a_mismatch_builds_in_the_local_image_through_the_engine_probed_once(
    variants: dict[str, ResolvedVariant],
) -> None:
    asked, probe = engine_asked("podman")
    toolkits = dict.fromkeys(variants, HostToolkit(MISMATCH))
    toolkits["cuda"] = HostToolkit(None)
    by = {p.variant: p for p in place(variants, toolkits, engine=probe, setup_podman=SETUP)}
    assert (by["rocm"].where, by["rocm"].engine) == ("image", "podman")
    assert by["rocm"].why == (
        "rocm: the matrix declares toolkit 7.2, this host has 5.2; building in the declared toolkit's "
        "local image localhost/xfer-build-rocm through podman (--allow-toolkit-mismatch builds on the host)"
    )
    assert by["cpu"].where == "image" and by["cuda"].where == "host"
    assert (by["musa"].where, by["musa"].why) == ("not here", MISMATCH)  # no local recipe
    assert asked == [1]


def test_no_engine_is_not_here_naming_how_to_get_one(variants: dict[str, ResolvedVariant]) -> None:
    asked, probe = engine_asked(None)
    toolkits = dict.fromkeys(variants, HostToolkit(MISMATCH))
    by = {p.variant: p for p in place(variants, toolkits, engine=probe, setup_podman=SETUP)}
    assert by["rocm"].where == "not here" and by["rocm"].engine is None
    assert by["rocm"].why.endswith(
        "or build in the declared toolkit's local image localhost/xfer-build-rocm, which needs podman "
        f"or docker: `{SETUP}`"
    )
    assert asked == [1]


def test_a_rebuild_never_falls_back_to_an_image(variants: dict[str, ResolvedVariant]) -> None:
    """`release reproduce` takes the recorded path: no engine, the toolkit problem is the error."""
    placed = place({"rocm": variants["rocm"]}, {"rocm": HostToolkit(MISMATCH)}, engine=None)
    assert placed == (Placement("rocm", "not here", MISMATCH),)


def test_a_placement_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Placement("cpu", "host", "here").where = "image"  # type: ignore[misc]
