"""Plan, then execute: the matrix resolved once and expanded into frozen steps with identifiers.

Identifiers look like `cp312-rocm-manylinux_x86_64` and are selected with shell-style patterns
that may use braces (`cp31{2,3}-rocm-*`). Planning is pure: no compiler, no network, no process.
Every step carries its `ResolvedVariant`; executors take steps, never a matrix and a name.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import bracex

from release.config.machines import MACHINES
from release.config.matrix import LoadedMatrix
from release.config.pythons import Python, newest, python
from release.errors import UsageError
from release.plan.machine import for_machine, machine_of
from release.plan.resolve import (
    ResolvedImage,
    ResolvedVariant,
    read_build_backend,
    require_variant,
    resolve_variant,
)
from release.wheel.names import parse_platform_tag, python_tag

T = TypeVar("T", "BuildStep", "SmokeStep", "ImageStep")
MAX_PATTERNS = 4096
"""Brace expansion of `--select` stops here: `{1..100000}` is a usage error, not a hang."""


@dataclass(frozen=True, kw_only=True)
class BuildStep:
    """One wheel to build: a resolved variant for one Python."""

    identifier: str
    variant: ResolvedVariant
    python: str
    python_tag: str
    abi3: bool = False
    """One wheel of Python's limited API (`cp312-abi3`) that serves every GIL Python from `python` on."""
    serves: tuple[str, ...] = ()
    """The matrix's Pythons this wheel is for (one, or all from `python` on for abi3)."""

    @property
    def interpreter(self) -> Python:
        """The record of the Python it is built with (its tags, paths, free-threaded or not)."""
        return python(self.python)

    @property
    def free_threaded(self) -> bool:
        return self.interpreter.free_threaded

    @property
    def wheel_tags(self) -> tuple[str, str]:
        """(interpreter, ABI) of the wheel it makes: (cp314, cp314t), (cp312, abi3)."""
        return self.interpreter.interpreter_tag, "abi3" if self.abi3 else self.interpreter.abi_tag

    def to_json(self) -> dict[str, object]:
        return {
            "identifier": self.identifier,
            "variant": self.variant.name,
            "python": self.python,
            "python_tag": self.python_tag,
            "abi": "abi3" if self.abi3 else self.interpreter.abi_tag,
            "free_threaded": self.free_threaded,
            "serves": list(self.serves),
            "backend": self.variant.backend_name,
            "distribution": self.variant.distribution,
            "platform": self.variant.floor,
            "machine": machine_of(self.variant),
            "runner": MACHINES[machine_of(self.variant)].github_runner,
        }


@dataclass(frozen=True, kw_only=True)
class SmokeStep:
    """One image on one hardware tier with one Python: what a self-hosted GPU job runs."""

    identifier: str
    variant: ResolvedVariant
    python: str
    image: str
    container: str
    hardware: str
    gpu: str
    architecture: str
    runner: tuple[str, ...]
    nodes: int

    def to_json(self) -> dict[str, object]:
        return {
            "identifier": self.identifier,
            "variant": self.variant.name,
            "distribution": self.variant.distribution,
            "python": self.python,
            "image": self.image,
            "container": self.container,
            "hardware": self.hardware,
            "gpu": self.gpu,
            "architecture": self.architecture,
            "runner": list(self.runner),
            "nodes": self.nodes,
            "machine": machine_of(self.variant),
        }


@dataclass(frozen=True, kw_only=True)
class ImageStep:
    """One wheel (variant x Python) smoke-tested inside one serving image's container."""

    identifier: str
    build: BuildStep
    image: ResolvedImage

    def to_json(self) -> dict[str, object]:
        return {
            "identifier": self.identifier,
            "artifact": self.build.identifier,
            "variant": self.build.variant.name,
            "python": self.build.python,
            "image": self.image.name,
            "container": self.image.image.container,
        }


@dataclass(frozen=True)
class Plan:
    """The matrix resolved: every variant once, and the steps that carry them."""

    loaded: LoadedMatrix
    variants: Mapping[str, ResolvedVariant]
    builds: tuple[BuildStep, ...]
    smokes: tuple[SmokeStep, ...]
    images: tuple[ImageStep, ...]
    held_back: Mapping[str, str] = field(default_factory=dict)
    """Variants of the matrix left out of this plan on purpose (`held_back`), with their reasons."""
    awaiting: Mapping[str, str] = field(default_factory=dict)
    """Serving images of the plan's variants declared `pin: probe` whose digest no probe has
    recorded yet: image name -> its tag. No job runs in them until one is (`awaiting_line`)."""

    def variant(self, name: str) -> ResolvedVariant:
        if name in self.held_back and name not in self.variants:
            raise UsageError(held_back_line(self.loaded, name))
        return require_variant(self.variants, name, self.loaded.path.name)

    def builds_of(self, variant: str, machine: str | None = None) -> tuple[BuildStep, ...]:
        """The variant's build steps, of every machine it is released for or of `machine` alone."""
        self.variant(variant)
        return tuple(
            s for s in self.builds if s.variant.name == variant and machine in (None, machine_of(s.variant))
        )


def held_back_line(loaded: LoadedMatrix, name: str) -> str:
    """Why a variant is not released: the located `held_back` and how to lift it."""
    line = loaded.lines.get(f"variants.{name}.held_back")
    where = f"{loaded.path.name}:{line}" if line is not None else loaded.path.name
    reason = loaded.matrix.variants[name].held_back
    return (
        f"{where}: variant {name!r} ({loaded.matrix.variants[name].distribution}) is held back: {reason} "
        f"(remove variants.{name}.held_back to release it)"
    )


def awaiting_line(loaded: LoadedMatrix, name: str) -> str:
    """Why no job runs in a serving image yet, located, and what records its digest."""
    line = loaded.lines.get(f"images.{name}.container")
    where = f"{loaded.path.name}:{line}" if line is not None else loaded.path.name
    return (
        f"{where}: images.{name} ({loaded.matrix.images[name].container}) awaits its digest (pin: probe): "
        "no release or hardware job runs in it until `release images probe --pull --write` (ci.yml's "
        "images job, where the registry is reachable) records one in images.facts.json and the file "
        "is committed"
    )


def make_plan(
    loaded: LoadedMatrix, *, variants: tuple[str, ...] = (), include_held_back: bool = False
) -> Plan:
    """Resolve each variant (all, or the named ones) exactly once and expand the steps.

    A variant the matrix holds back is left out and listed in `Plan.held_back`, unless
    `include_held_back` (local builds, verify and smoke tests of it still work); naming one
    without it is a usage error that gives the reason.
    """
    names = variants or tuple(loaded.matrix.variants)
    for name in names:
        loaded.variant(name)  # an unknown name is a usage error naming the known ones
    held = {n: v.held_back for n, v in loaded.matrix.variants.items() if v.held_back is not None}
    if not include_held_back:
        for name in variants:
            if name in held:
                raise UsageError(held_back_line(loaded, name))
        names = tuple(n for n in names if n not in held)
        if not names:
            msg = (
                f"{loaded.path.name}: every variant is held back ({', '.join(held)}): a release would "
                "publish nothing; remove a `held_back` (local builds of a held-back variant name it: "
                "--variant)"
            )
            raise UsageError(msg)
    else:
        held = {}
    backend = read_build_backend(loaded.engine_dir)
    resolved = {name: resolve_variant(loaded, name, build_backend=backend) for name in names}
    builds = _build_steps(loaded, resolved)
    used = dict.fromkeys(i for n in names for i in loaded.matrix.variants[n].images)
    awaiting = {
        i: str(loaded.matrix.images[i].container) for i in used if loaded.matrix.images[i].awaiting_digest
    }
    smokes = _smoke_steps(loaded, resolved)
    return Plan(loaded, resolved, builds, smokes, _image_steps(builds), held, awaiting)


def _in_abi3(py: str, abi: str | None) -> bool:
    """Whether the abi3 wheel of `stable_abi: abi` serves `py`: a GIL build from that version on. A
    free-threaded Python never loads abi3 (its stable ABI is abi3t, from 3.15, which no engine
    build here makes yet), so it always has a wheel of its own."""
    record = python(py)
    return abi is not None and not record.free_threaded and record.version_tuple >= python(abi).version_tuple


def _build_steps(loaded: LoadedMatrix, variants: Mapping[str, ResolvedVariant]) -> tuple[BuildStep, ...]:
    """A step per Python and machine, except that with `stable_abi` one abi3 step serves every
    GIL Python from that version on."""
    steps = []
    for name, v in ((n, for_machine(r, m)) for n, r in variants.items() for m in r.floors):
        family = parse_platform_tag(v.floor).family_arch  # the identifier does not pin glibc
        abi = v.stable_abi
        for py in loaded.matrix.python:
            tag = python_tag(py)
            if not _in_abi3(py, abi):
                identifier = f"{tag}-{name}-{family}"
                step = BuildStep(identifier=identifier, variant=v, python=py, python_tag=tag, serves=(py,))
                steps.append(step)
            elif py == abi:
                serves = tuple(p for p in loaded.matrix.python if _in_abi3(p, abi))
                identifier = f"{tag}-abi3-{name}-{family}"
                step = BuildStep(
                    identifier=identifier, variant=v, python=py, python_tag=tag, abi3=True, serves=serves
                )
                steps.append(step)
    return tuple(steps)


RUNNER = "runner"
"""The image name of a runner leg: a variant that declares no serving image with a container
reference runs its hardware legs on the tier's runner itself, in the Python actions/setup-python
gives there (hardware.yml), the matrix's newest."""


def _smoke_steps(loaded: LoadedMatrix, variants: Mapping[str, ResolvedVariant]) -> tuple[SmokeStep, ...]:
    """The image x hardware x Python cross product for images with a container reference; for a
    variant without any, one runner leg per tier with the matrix's newest Python."""
    steps = []
    last = newest(loaded.matrix.python)
    for name, variant in variants.items():
        # (image name, container, its Pythons, the GPU architectures its kernels are for)
        places = [
            (i.name, i.image.container, i.image.python or loaded.matrix.python, i.image.gpu_architectures)
            for i in variant.images
            if i.image.container is not None
        ] or [(RUNNER, "", (last,), ())]
        for image, container, pythons, kernels in places:
            for tier in variant.hardware:
                if tier.hardware.machine not in variant.floors:
                    continue  # checked in config: a tier of a machine the variant is not built for
                if kernels and tier.hardware.architecture not in kernels:
                    continue  # the image's kernels are for other GPUs (SGLang's -mi30x on an MI355X)
                for py in pythons:
                    steps.append(
                        SmokeStep(
                            identifier=f"{python_tag(py)}-{name}-{image}-{tier.name}",
                            variant=for_machine(variant, tier.hardware.machine),
                            python=py,
                            image=image,
                            container=container,
                            hardware=tier.name,
                            gpu=tier.hardware.gpu,
                            architecture=tier.hardware.architecture,
                            runner=tier.hardware.runner,
                            nodes=tier.hardware.nodes,
                        )
                    )
    return tuple(steps)


def _image_steps(builds: tuple[BuildStep, ...]) -> tuple[ImageStep, ...]:
    """One container job per build x declared image with a container (for the image's Pythons)."""
    steps = []
    for build in builds:
        if build.variant.floor != next(iter(build.variant.floors.values())):
            continue  # serving images are the first machine's (x86_64's) images
        for image in build.variant.images:
            if image.image.container is None or (
                image.image.python and build.python not in image.image.python
            ):
                continue
            steps.append(
                ImageStep(
                    identifier=f"{build.python_tag}-{build.variant.name}-{image.name}",
                    build=build,
                    image=image,
                )
            )
    return tuple(steps)


_FAMILY = re.compile(r"-(?:manylinux|musllinux)_(?=[^-]+$)")


def _names(identifier: str) -> tuple[str, str]:
    """An identifier and its short form without the platform family (`cp312-cuda-aarch64` for
    `cp312-cuda-manylinux_aarch64`), which `--select` also matches."""
    return identifier, _FAMILY.sub("-", identifier)


def select(steps: tuple[T, ...], patterns: str | None) -> tuple[T, ...]:
    """Steps whose identifier matches any of the space-separated patterns (braces allowed)."""
    if not patterns:
        return steps
    try:
        expanded = [p for word in patterns.split() for p in bracex.expand(word, limit=MAX_PATTERNS)]
    except bracex.ExpansionLimitException:
        msg = (
            f"--select {patterns!r} expands to more than {MAX_PATTERNS} patterns: use a shorter range or '*'"
        )
        raise UsageError(msg) from None
    chosen = tuple(
        s for s in steps if any(fnmatch.fnmatchcase(n, p) for n in _names(s.identifier) for p in expanded)
    )
    if not chosen:
        examples = ", ".join(s.identifier for s in steps[:3])
        msg = f"--select {patterns!r} matches no step (identifiers look like {examples})"
        raise UsageError(msg)
    return chosen
