"""A smoke run's legs, planned before any of them runs: every wheel x Python x image, and where
each runs (`placement.place`), as frozen data. `runner.smoke_variant` gathers the facts (the
container engine, which local images can run, what this host installs), plans, then runs the legs
in order; a test can hold the plan against the matrix without starting a container."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from release.machine.containers import ContainerEngine
from release.plan.resolve import LocalImage, ResolvedVariant
from release.smoke.placement import Placement, place
from release.smoke.selection import declared_image, images_for, smoke_pythons


@dataclass(frozen=True, kw_only=True)
class Leg:
    """One wheel x Python x image, and where it runs."""

    wheel: Path
    python: str
    image: str
    where: Placement
    skipped: str = ""
    """Why the leg does not run here ('' when it runs): logged, never run."""

    @property
    def label(self) -> str:
        return f"[{self.python} {self.image}]"


def plan_legs(
    variant: ResolvedVariant,
    wheels: Sequence[Path],
    *,
    python: str | None,
    images: Sequence[str] | None,
    in_image: str | None,
    host_has_runtime: bool,
    engine: ContainerEngine | None,
    pull: bool,
    usable: Callable[[LocalImage], bool],
    refused: Mapping[Path, str],
) -> tuple[Leg, ...]:
    """The legs of `wheels` (for `python`, or each wheel's Pythons) in the chosen `images` (all
    the variant's and `host` when None), or all in `in_image` (the run is inside that image).
    `refused`: per wheel, why this host cannot install it ('' when it can)."""
    resolved = {i.name: i for i in variant.images}
    legs: list[Leg] = []
    for wheel in wheels:
        for version in smoke_pythons(wheel, variant, python):
            pairs = images_for(variant, images, host_has_runtime=host_has_runtime)
            if in_image is not None:
                pairs = [(in_image, declared_image(variant, in_image))]
            for name, declared in pairs:
                if declared.python and version not in declared.python:
                    continue  # the image has its own Pythons, and not this one
                if in_image is not None:
                    where = Placement(image=declared)
                else:
                    where = place(
                        name, declared, resolved.get(name), version,
                        engine=engine, pull=pull, usable=usable, cannot_install=refused.get(wheel, ""),
                        build_image=variant.build_image.local_recipe,
                        variant_has_runtime=bool(variant.runtime_globs),
                    )  # fmt: skip
                skipped = ""
                if where.container is None and declared.simulate is None and in_image is None:
                    skipped = "no simulation and no container engine here"
                legs.append(Leg(wheel=wheel, python=version, image=name, where=where, skipped=skipped))
    return tuple(legs)
