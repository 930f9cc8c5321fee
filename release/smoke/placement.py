"""Where one smoke leg runs: the declared serving image pulled (`--pull`), a local image of the
image's own recipe, a stand-in made in place of a registry image, this host (a fresh venv or a
namespace simulation), or, for a wheel this host cannot install, the variant's local build image.

Decided here from facts the caller gathers (the container engine, which local images can run,
the platforms this host installs), so the choice is testable without starting a process."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from release import settings
from release.config.matrix import Image, Simulation
from release.machine.containers import STANDINS_ENV, ContainerEngine, standins
from release.plan.resolve import LocalImage, ResolvedImage
from release.smoke.selection import HOST_IMAGE
from release.wheel.names import WheelName, parse_platform_tag, parse_wheel_name


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Where a leg runs. `container` unset: on this host (`Smoke` simulates the image's layout)."""

    image: Image
    """The image whose layout and expectation the checks apply (the build image's own for a
    host leg moved there)."""
    container: str | None = None
    """The image tag or reference a container runs."""
    recipe: LocalImage | None = None
    """The local image to make (or reuse) before the container starts."""
    pull: str | None = None
    """The reference to pull before the container starts."""
    runner: str | None = None
    """What the outcome's `runner` says (default: `<engine> container <tag>`)."""
    note: str = ""
    """A line for the log: why the leg is not where its image would put it."""
    install_hint: str = ""
    """Added to a failed install: why this host could not install the wheel."""


def host_libc() -> str:
    """`glibc 2.36` (the C library this host's loader is), or a plain word where unknown."""
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        found = None
    return found or "C library"


def host_platforms() -> frozenset[str]:
    """The platform tags this host installs (`manylinux_2_36_x86_64` down to `linux_x86_64`)."""
    from packaging.tags import platform_tags  # noqa: PLC0415 (reads the loader, not a process)

    return frozenset((*platform_tags(), "any"))


def uninstallable(wheel: WheelName, platforms: Collection[str], libc: str) -> str:
    """Why this host cannot install the wheel ('' when it can): `host glibc 2.36 cannot install
    manylinux_2_39`."""
    if any(p in platforms for p in wheel.platforms):
        return ""
    shown = sorted(wheel.platforms)[-1]
    family, _, rest = shown.partition("_")
    if family in ("manylinux", "musllinux") and rest.count("_") >= 2:
        shown = "_".join(shown.split("_")[:3])
    return f"host {libc} cannot install {shown}"


def build_image_leg(variant_has_runtime: bool) -> Image:
    """The `host` leg as the build image runs it: the declared toolkit's runtime is installed
    where the distribution puts it (the image compiles against it)."""
    return Image(
        description="a fresh venv in the variant's build image",
        simulate=Simulation(runtime="system" if variant_has_runtime else "absent"),
        expect="pass",
    )


def _layout_of_build_image(image: Image, variant_has_runtime: bool) -> bool:
    """Whether the build image presents this image's runtime layout (the distribution's place, or
    no runtime for a variant without one) on a plain root file system."""
    sim = image.simulate
    if sim is None or sim.rootfs != "host":
        return False
    if not variant_has_runtime:
        return image.expect == "pass"
    return sim.runtime == "system" and image.expect == "pass"


def place(
    image_name: str,
    image: Image,
    resolved: ResolvedImage | None,
    python: str,
    *,
    engine: ContainerEngine | None,
    pull: bool,
    usable: Callable[[LocalImage], bool],
    cannot_install: str = "",
    build_image: LocalImage | None = None,
    variant_has_runtime: bool = True,
) -> Placement:
    """Where the leg `image_name` x `python` runs (`resolved` is None for `host`).

    `usable`: whether a local image can run here (it exists, or root makes it);
    `cannot_install`: why this host cannot install the wheel ('' when it can). With `pull`, a
    reference RELEASE_IMAGE_STANDINS maps to a local tag (the rehearsal's) runs that image."""
    if resolved is not None and pull and resolved.local is None and image.container:
        return _declared_reference(image, image.container, engine)
    note = ""
    if resolved is not None and engine is not None:
        own = _own_image(image, resolved, python, engine=engine, pull=pull, usable=usable)
        if isinstance(own, Placement):
            return own
        note = own
    if not cannot_install:
        return Placement(image=image, note=note)
    return _in_build_image(
        image_name,
        image,
        python,
        note=note,
        engine=engine,
        usable=usable,
        cannot_install=cannot_install,
        build_image=build_image,
        variant_has_runtime=variant_has_runtime,
    )


def _declared_reference(image: Image, reference: str, engine: ContainerEngine | None) -> Placement:
    """The release: the declared reference itself; a stand-in only where the rehearsal names one."""
    standin = standins(settings.text(STANDINS_ENV)).get(reference)
    if standin is not None and engine is not None:
        named = f"stand-in for {reference}: {engine} container {standin} (no registry; {STANDINS_ENV})"
        return Placement(image=image, container=standin, runner=named)
    return Placement(image=image, container=reference, pull=reference)


def _own_image(
    image: Image,
    resolved: ResolvedImage,
    python: str,
    *,
    engine: ContainerEngine,
    pull: bool,
    usable: Callable[[LocalImage], bool],
) -> Placement | str:
    """The image's own local image (its recipe's, or without `pull` its stand-in) where it has
    the Python and can run here; else the note why the leg is simulated ('' when it has none)."""
    own = resolved.local if resolved.local is not None else None if pull else resolved.standin
    if own is None or python not in own.pythons:
        return ""
    if usable(own):
        runner = None
        if own is resolved.standin:
            runner = f"stand-in for {image.container}: {engine} container {own.tag}"
        return Placement(image=image, container=own.tag, recipe=own, runner=runner)
    # make-image.sh needs root (debootstrap, rootful podman)
    return f"{own.tag} is absent, only root makes it: simulated"


def _in_build_image(
    image_name: str,
    image: Image,
    python: str,
    *,
    note: str,
    engine: ContainerEngine | None,
    usable: Callable[[LocalImage], bool],
    cannot_install: str,
    build_image: LocalImage | None,
    variant_has_runtime: bool,
) -> Placement:
    """A leg this host cannot install the wheel for: its fresh venv (and a simulation on its root
    file system) moves into the variant's build image, which installs what it builds; where it
    cannot, the leg stays here with the reason as its install hint."""
    moved = image_name == HOST_IMAGE or _layout_of_build_image(image, variant_has_runtime)
    if engine is None:
        why = "no podman or docker answers to run it in the variant's build image"
    elif build_image is None:
        why = "the variant declares no local build image (build_image.debian) to run it in"
    elif python not in build_image.pythons:
        why = f"the build image {build_image.tag} has no Python {python}"
    elif not moved:
        layout = image.simulate.runtime if image.simulate else "no"
        why = f"the build image {build_image.tag} does not have this image's layout ({layout} runtime)"
    elif not usable(build_image):
        why = f"{build_image.tag} is absent, only root makes it"
    else:
        leg = build_image_leg(variant_has_runtime) if image_name == HOST_IMAGE else image
        runner = f"{engine} container {build_image.tag} ({cannot_install})"
        return Placement(image=leg, container=build_image.tag, recipe=build_image, runner=runner)
    hint = f"{cannot_install}, and {why}"
    return Placement(image=image, note=f"{note}; {hint}" if note else hint, install_hint=hint)


def emulated_platform(files: Sequence[Path]) -> str | None:
    """None when this host installs every wheel of the set; else the newest manylinux tag among
    them (a set built in newer images than this host, e.g. Debian trixie's on Debian 12), which
    the installs then resolve for."""
    platforms, libc = host_platforms(), host_libc()
    refused = [parse_wheel_name(p) for p in files if uninstallable(parse_wheel_name(p), platforms, libc)]
    tags = [parse_platform_tag(t) for w in refused for t in w.platforms]
    tags = [t for t in tags if t.family == "manylinux" and t.libc is not None]
    return max(tags, key=lambda t: t.libc or (0, 0)).text if tags else None
