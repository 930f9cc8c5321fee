"""Where each variant builds, decided once before anything builds, as frozen data: on the host
(its toolkit is the declared one, or `--allow-toolkit-mismatch` records the difference), in the
declared toolkit's local build image through podman or docker, or not here (with why and what gets
it). `release build` and `release reproduce` probe the host, call `place`, and carry the result
out; a test reads it without a container or a toolkit."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from release.plan.resolve import ResolvedVariant

Where = Literal["host", "image", "not here"]
Engine = TypeVar("Engine")
"""The container engine value (`release.machine.containers.ContainerEngine`): the plan carries the
one the probe gave, never re-derives it."""


@dataclass(frozen=True)
class HostToolkit:
    """What probing this host found for one variant: `problem` is the one-line mismatch or absence
    of its declared toolkit (None: the declared one is here, or `override` allows another)."""

    problem: str | None
    override: str | None = None


@dataclass(frozen=True)
class Placement(Generic[Engine]):
    """One variant's build: `where`, `why` in one line (for `not here`: the error to show),
    the toolkit override a host build's verify report records, the engine of an image build."""

    variant: str
    where: Where
    why: str
    override: str | None = None
    engine: Engine | None = None


def place(
    variants: Mapping[str, ResolvedVariant],
    toolkits: Mapping[str, HostToolkit],
    *,
    engine: Callable[[], Engine | None] | None,
    setup_podman: str = "",
) -> tuple[Placement[Engine], ...]:
    """The placement of each variant, in order. A variant whose host toolkit is not the declared
    one builds in its local image when the image has a recipe and `engine()` (the probe of podman
    or docker, asked at most once and only when an image build needs it) names one; else it is not
    built here, naming `setup_podman` where no engine answered. `engine=None`: no image build (a
    rebuild takes the recorded path: `release reproduce`)."""
    known: list[Engine | None] = []

    def answering(probe: Callable[[], Engine | None]) -> Engine | None:
        if not known:
            known.append(probe())
        return known[0]

    placed: list[Placement[Engine]] = []
    for name, variant in variants.items():
        toolkit = toolkits[name]
        if toolkit.problem is None:
            why = "the declared toolkit is here" if toolkit.override is None else toolkit.override
            placed.append(Placement(name, "host", why, override=toolkit.override))
            continue
        if engine is None or variant.build_image.local_recipe is None:
            placed.append(Placement(name, "not here", toolkit.problem))
            continue
        local = variant.build_image.local
        chosen = answering(engine)
        if chosen is None:
            why = (
                f"{toolkit.problem}; or build in the declared toolkit's local image {local}, "
                f"which needs podman or docker: `{setup_podman}`"
            )
            placed.append(Placement(name, "not here", why))
            continue
        short = toolkit.problem.split(": install ")[0]  # what was found, without the remedies
        why = (
            f"{short}; building in the declared toolkit's local image {local} through {chosen} "
            "(--allow-toolkit-mismatch builds on the host)"
        )
        placed.append(Placement(name, "image", why, engine=chosen))
    return tuple(placed)
