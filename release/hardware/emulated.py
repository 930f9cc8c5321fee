"""A hardware leg of another machine's wheel on this one (an aarch64 leg of a Grace tier, rehearsed
on an x86_64 host): in a container of the variant's cross image (what `release build --arch` made),
its programs run by binfmt_misc's qemu-user, with Debian's Python of that machine. The leg's steps
are the same: `pip install --target` (pip from the build Python of the same version: pure Python),
every console script's `--version`, the device selftest (a skip: no GPU under emulation)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from release.config.devices import ContainerDevices
from release.config.machines import MACHINES, host_machine
from release.config.resources import toolkit_scripts
from release.errors import SmokeError
from release.hardware import container as containers
from release.hardware.leg import Check, Where, in_container
from release.machine.containers import ContainerEngine
from release.machine.emulation import DIST_PYTHON, cross_image_present, cross_image_tag, emulation_missing
from release.plan.resolve import ResolvedVariant

PYTHON = "{python}"
"""The leg's interpreter as its commands name it: `cross-build.sh exec` puts the target's in."""


def _refusal(variant: ResolvedVariant, machine: str, version: str, engine: ContainerEngine | None) -> str:
    """Why this machine cannot run `machine`'s leg, or ''."""
    here = host_machine()
    if version != DIST_PYTHON:
        return (
            f"--machine {machine}: emulation here has Debian's Python {DIST_PYTHON} of {machine} only, "
            f"not {version} (the leg runs natively on a {machine} runner)"
        )
    missing = emulation_missing(machine)
    if missing:
        return f"--machine {machine}: this {here} machine runs no {machine} programs: {missing}"
    if engine is None:
        return f"--machine {machine}: no container engine (docker or podman) answers here to emulate it in"
    if not cross_image_present(engine, variant, machine):
        image = cross_image_tag(variant.build_image.local, machine)
        return (
            f"--machine {machine}: no cross image {image} here "
            f"(`release build --variant {variant.name} --arch {machine}` makes it)"
        )
    return ""


@contextlib.contextmanager
def emulated_leg(
    variant: ResolvedVariant, machine: str, version: str, *, wheel: Path, target: Path, exchange: Path | None
) -> Iterator[tuple[Where, str, list[Check]]]:
    """(where, the python the leg names, the check that says how it runs) for `machine`'s leg here;
    `exchange` is the pair's address folder. One-line `SmokeError` when it cannot run."""
    engine = ContainerEngine.answering()
    refused = _refusal(variant, machine, version, engine)
    if refused or engine is None:
        raise SmokeError(refused)
    image = cross_image_tag(variant.build_image.local, machine)
    target.mkdir(parents=True, exist_ok=True)
    scripts = toolkit_scripts().resolve()
    mounts = [(wheel.parent.resolve(), False), (target, True), (scripts, False)]
    mounts += [(exchange, True)] if exchange is not None else []
    box = containers.Container(engine, image, mounts=mounts, devices=ContainerDevices())  # no GPU here
    run = ("bash", str(scripts / "cross-build.sh"), "exec", MACHINES[machine].gnu_triplet, DIST_PYTHON)
    here = host_machine()
    detail = f"{machine} wheel on this {here} machine: qemu-user in {image}, Debian's Python {DIST_PYTHON}"
    check = Check("machine", "pass", detail, {"machine": machine, "emulated": True, "image": image})
    try:
        yield in_container(target, lambda env: [*box.prefix(env), *run]), PYTHON, [check]
    finally:
        box.close()
