"""Which wheels, Pythons and images one smoke run covers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from release.config.machines import host_machine, machines_of_tags
from release.config.matrix import Image, Simulation
from release.config.pythons import newer_pythons
from release.errors import SmokeError, UsageError
from release.machine.interpreters import find_interpreter
from release.plan.resolve import ResolvedVariant
from release.wheel.names import InvalidWheelName, WheelName, parse_wheel_name

HOST_IMAGE = "host"


def wheels_for(
    wheelhouse: Path, variant: ResolvedVariant, python: str | None, *, other_machines: bool = False
) -> list[Path]:
    """The variant's wheels in `wheelhouse` (already `wheelhouse/<variant>`), for one Python or all:
    those this machine runs, or with `other_machines` those it does not (`release.smoke.emulated`)."""
    found = []
    for wheel in sorted(wheelhouse.glob("*.whl")):
        try:
            name = parse_wheel_name(wheel)
        except InvalidWheelName:
            continue
        if name.matches(variant.distribution) and (python is None or name.serves(python)):
            found += [wheel] if _runs_here(name) != other_machines else []
    return found


def _runs_here(name: WheelName) -> bool:
    """Whether this machine runs the wheel: its tag names this machine, or no machine at all
    (the aarch64 wheels of a wheelhouse are smoke-tested on an aarch64 machine)."""
    machines = machines_of_tags(name.platforms)
    return not machines or host_machine() in machines


def smoke_pythons(wheel: Path, variant: ResolvedVariant, python: str | None) -> list[str]:
    """The Pythons one wheel is smoke-tested with: its own, or for an abi3 wheel every matrix Python it
    serves (GIL builds from its version on; abi3t: free-threaded ones) plus any newer CPython found
    here (or just `python` when one is asked for)."""
    if python is not None:
        return [python]
    own = wheel_python(wheel)
    name = parse_wheel_name(wheel)
    if not {"abi3", "abi3t"} & set(name.abis):
        return [own]
    found = [p for p in newer_pythons() if p not in variant.pythons and find_interpreter(p) is not None]
    return [p for p in (*variant.pythons, *found) if name.serves(p)]


def wheel_python(wheel: Path) -> str:
    """`engine_cpu-0.1.0-cp312-cp312-….whl` -> `3.12`; `…-cp314-cp314t-….whl` -> `3.14t`."""
    try:
        name = parse_wheel_name(wheel)
    except InvalidWheelName as exc:
        msg = f"{wheel.name}: not a wheel file name ({exc})"
        raise SmokeError(msg) from None
    version = name.python_version()
    if version is None:
        msg = f"{wheel.name}: not a CPython wheel (tags {', '.join(name.tags)})"
        raise SmokeError(msg)
    return version


def images_for(
    variant: ResolvedVariant, chosen: Sequence[str] | None, *, host_has_runtime: bool
) -> list[tuple[str, Image]]:
    """`host` plus the variant's images, restricted to `chosen` names when given.

    `host` is a fresh venv on this machine: it expects the runtime only where the host has it.
    """
    host = Image(
        description="a fresh venv on this machine",
        simulate=Simulation(runtime="system" if host_has_runtime else "absent"),
        expect="pass" if host_has_runtime else "runtime-missing",
    )
    pairs: list[tuple[str, Image]] = [(HOST_IMAGE, host)]
    pairs += [(i.name, i.image) for i in variant.images]
    if chosen:
        known = {name for name, _ in pairs}
        unknown = [c for c in chosen if c not in known]
        if unknown:
            names = ", ".join(sorted(known))
            msg = f"--image {unknown[0]!r} is not an image of this variant (images: {names})"
            raise UsageError(msg)
        pairs = [(n, i) for n, i in pairs if n in chosen]
    return pairs


def declared_image(variant: ResolvedVariant, name: str) -> Image:
    for image in variant.images:
        if image.name == name:
            return image.image
    known = ", ".join(i.name for i in variant.images) or "none"
    msg = f"--in-image {name!r} is not an image of variant {variant.distribution} (images: {known})"
    raise UsageError(msg)
