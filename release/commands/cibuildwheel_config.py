"""`release cibuildwheel-config`: the cibuildwheel settings of one variant's build steps."""

from __future__ import annotations

import argparse

from release import flags
from release.builder.cibw import FORMATS, render, stable_abi_override
from release.config.machines import MACHINES
from release.config.matrix import LoadedMatrix
from release.errors import UsageError
from release.plan.machine import machine_of
from release.plan.steps import make_plan


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.variant(parser, "the variant to configure", required=True)
    flags.python(
        parser, "a Python version from the matrix (repeatable; default: all of them)", many=True, default=[]
    )
    parser.add_argument(
        "--arch",
        choices=tuple(MACHINES),
        help="the machine architecture of the steps (default: the variant's first)",
    )
    parser.add_argument(
        "--format", choices=FORMATS, default="toml", help="output format (default: %(default)s)"
    )


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    plan = make_plan(loaded, variants=(args.variant,), include_held_back=True)
    known = loaded.matrix.python
    for py in args.python:
        if py not in known:
            msg = f"{loaded.path.name}: Python {py} is not in the matrix (python: {', '.join(known)})"
            raise UsageError(msg)
    steps = tuple(s for s in plan.builds_of(args.variant) if not args.python or s.python in args.python)
    variant = plan.variant(args.variant)
    machine = args.arch or next(iter(variant.floors))
    steps = tuple(s for s in steps if machine_of(s.variant) == machine)
    if not steps:
        has = ", ".join(variant.floors)
        msg = f"variant {args.variant!r} is not released for {machine} (its machines: {has})"
        raise UsageError(msg)
    options, overrides = stable_abi_override(steps)
    print(render(options, args.format, overrides), end="")
    return 0
