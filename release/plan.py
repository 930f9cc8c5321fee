"""Plan, then execute: expand the matrix into frozen build and smoke steps with identifiers.

Identifiers look like `cp312-rocm-manylinux_x86_64` and are selected with shell-style patterns
that may use braces (`cp31{2,3}-rocm-*`). Planning is pure: no compiler, no network.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
from dataclasses import asdict, dataclass
from typing import TypeVar

import bracex

from release import table
from release.errors import UsageError
from release.matrix import LoadedMatrix, Matrix

T = TypeVar("T", "BuildStep", "SmokeStep")


@dataclass(frozen=True, kw_only=True)
class BuildStep:
    """One wheel to build: a variant for one Python."""

    identifier: str
    variant: str
    python: str
    python_tag: str
    backend: str
    distribution: str
    platform: str


@dataclass(frozen=True, kw_only=True)
class SmokeStep:
    """One image on one hardware tier with one Python: what a self-hosted GPU job runs."""

    identifier: str
    variant: str
    distribution: str
    python: str
    image: str
    container: str
    hardware: str
    gpu: str
    architecture: str
    runner: tuple[str, ...]
    nodes: int


def python_tag(version: str) -> str:
    return "cp" + version.replace(".", "")


def platform_family(floor: str) -> str:
    """`manylinux_2_28_x86_64` -> `manylinux_x86_64` (the identifier does not pin glibc)."""
    family, _major, _minor, arch = floor.split("_", 3)
    return f"{family}_{arch}"


def build_steps(matrix: Matrix) -> tuple[BuildStep, ...]:
    family = platform_family(matrix.platform.floor)
    steps = []
    for name, variant in matrix.variants.items():
        for py in matrix.python:
            tag = python_tag(py)
            steps.append(
                BuildStep(
                    identifier=f"{tag}-{name}-{family}",
                    variant=name,
                    python=py,
                    python_tag=tag,
                    backend=variant.backend,
                    distribution=variant.distribution,
                    platform=matrix.platform.floor,
                )
            )
    return tuple(steps)


def smoke_steps(matrix: Matrix) -> tuple[SmokeStep, ...]:
    """The image x hardware x Python cross product for images with a container reference."""
    steps = []
    for name, variant in matrix.variants.items():
        for image_name in variant.images:
            image = matrix.images[image_name]
            if image.container is None:
                continue
            for tier_name in variant.hardware:
                tier = matrix.hardware[tier_name]
                for py in image.python or matrix.python:
                    steps.append(
                        SmokeStep(
                            identifier=f"{python_tag(py)}-{name}-{image_name}-{tier_name}",
                            variant=name,
                            distribution=variant.distribution,
                            python=py,
                            image=image_name,
                            container=image.container,
                            hardware=tier_name,
                            gpu=tier.gpu,
                            architecture=tier.architecture,
                            runner=tier.runner,
                            nodes=tier.nodes,
                        )
                    )
    return tuple(steps)


def select(steps: tuple[T, ...], patterns: str | None) -> tuple[T, ...]:
    """Steps whose identifier matches any of the space-separated patterns (braces allowed)."""
    if not patterns:
        return steps
    expanded = [p for word in patterns.split() for p in bracex.expand(word)]
    chosen = tuple(s for s in steps if any(fnmatch.fnmatchcase(s.identifier, p) for p in expanded))
    if not chosen:
        examples = ", ".join(s.identifier for s in steps[:3])
        msg = f"--select {patterns!r} matches no step (identifiers look like {examples})"
        raise UsageError(msg)
    return chosen


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--select", help="shell patterns over identifiers, e.g. 'cp31{2,3}-rocm-*'")
    parser.add_argument("--json", action="store_true", help="print {'include': [...]} for GitHub Actions")
    parser.add_argument("--smoke", action="store_true", help="the image x hardware x Python cross product")


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    matrix = loaded.matrix
    if args.smoke:
        smoke = select(smoke_steps(matrix), args.select)
        if args.json:
            print(json.dumps({"include": [asdict(s) for s in smoke]}, separators=(",", ":")))
            return 0
        rows = [
            (s.identifier, s.container, s.gpu, s.architecture, " ".join(s.runner), s.nodes) for s in smoke
        ]
        print(table.render(("identifier", "image", "gpu", "arch", "runner labels", "nodes"), rows))
        print(f"\n{len(smoke)} smoke jobs")
        return 0
    steps = select(build_steps(matrix), args.select)
    if args.json:
        print(json.dumps({"include": [asdict(s) for s in steps]}, separators=(",", ":")))
        return 0
    build_rows = [(s.identifier, s.distribution, s.backend, s.python, s.platform) for s in steps]
    print(table.render(("identifier", "distribution", "backend", "python", "platform floor"), build_rows))
    print(f"\n{len(steps)} build steps from {loaded.path.name}")
    return 0
