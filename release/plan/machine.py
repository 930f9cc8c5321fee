"""One resolved variant per machine: the facts that differ between x86_64 and aarch64 wheels of
the same variant (the floor, and with it cibuildwheel's architecture and repair's `--plat`).

`resolve_variant` decides the floor of every machine the variant is released for (the matrix's
`platform.architectures` that its backend's `machines` has); a build step carries the variant as
`for_machine` gives it for the step's machine, so every stage that reads `variant.floor` sees the
step's own machine, and no stage re-derives it.
"""

from __future__ import annotations

from dataclasses import replace

from release.config.machines import DEFAULT_MACHINE, machine_of_tag
from release.errors import UsageError
from release.plan.resolve import ResolvedVariant


def machine_of(variant: ResolvedVariant) -> str:
    """The machine a resolved variant's facts are for (its floor's)."""
    return machine_of_tag(variant.floor) or DEFAULT_MACHINE


def machines_of(variant: ResolvedVariant) -> tuple[str, ...]:
    """The machines the variant is released for, in the matrix's order."""
    return tuple(variant.floors)


def for_machine(variant: ResolvedVariant, machine: str) -> ResolvedVariant:
    """The variant's facts for one of its machines. The release image's name is the same for each
    (cibuildwheel picks the machine's image of `manylinux_2_28`); the local build image is the
    first machine's, which cross-compiles another machine's wheels (`release.builder.cross`)."""
    if machine == machine_of(variant):
        return variant
    if machine not in variant.floors:
        msg = (
            f"variant {variant.name!r} is not released for {machine} "
            f"(its machines: {', '.join(variant.floors)})"
        )
        raise UsageError(msg)
    return replace(variant, floor=variant.floors[machine])

