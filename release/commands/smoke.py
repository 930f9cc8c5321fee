"""`release smoke`: install the exact wheel files in fresh environments and images."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from release import flags
from release.config.matrix import LoadedMatrix
from release.errors import SmokeError
from release.plan.imagefacts import refuse_missing_pythons
from release.plan.resolve import ResolvedVariant
from release.plan.steps import make_plan
from release.settings import in_ci
from release.smoke.emulated import Foreign, emulated_legs, foreign_wheels
from release.smoke.outcome import Outcome, command_outputs, count_line, failures, report, summary
from release.smoke.runner import smoke_variant
from release.smoke.selection import HOST_IMAGE, wheels_for
from release.table import printable, printable_lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    flags.variant(parser, "variant to test (repeatable; default: every variant with wheels)", many=True)
    flags.python(parser, "only the wheels for this Python (e.g. 3.12)")
    flags.wheelhouse(parser, "holds <variant>/*.whl (default: wheelhouse/ beside the matrix)")
    add("--image", action="append", help=f"only this image (repeatable; '{HOST_IMAGE}': a plain fresh venv)")
    add("--json", action="store_true", help="print the results as JSON (progress goes to stderr)")
    add(
        "--in-image",
        metavar="NAME",
        help="we run inside this declared image (CI containers): a fresh venv here, no simulation; "
        "the image's `expect` decides what passes",
    )
    add("--verbose", action="store_true", help="show every smoke command's output tail, passing or not")
    add(
        "--require-self-tests",
        action="store_true",
        help="fail a leg whose commands or self-tests did not run (the import refused: no GPU driver); "
        "always so under CI=true",
    )
    add(
        "--pull",
        action="store_true",
        help="run the declared serving images (images.<name>.container) in real containers, "
        "pulled with podman or docker first",
    )


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    wheelhouse = args.wheelhouse or loaded.root / "wheelhouse"
    named = tuple(dict.fromkeys(args.variant or ()))
    plan = make_plan(loaded, variants=named, include_held_back=True)
    refuse_missing_pythons(loaded)

    def log(line: str) -> None:
        print(printable_lines(line), file=sys.stderr if args.json else sys.stdout, flush=True)

    outcomes, left = list[Outcome](), list[str]()
    started = time.monotonic()
    for name, variant in plan.variants.items():
        foreign = _other_machines(args, wheelhouse / name, variant)
        here = wheels_for(wheelhouse / name, variant, args.python)
        if here or (args.variant and not foreign):
            outcomes += smoke_variant(
                variant,
                wheelhouse=wheelhouse,
                python=args.python,
                images=args.image,
                in_image=args.in_image,
                log=log,
                pull=args.pull,
            )
        ran, not_run = emulated_legs(variant, foreign, log=log)
        outcomes, left = outcomes + ran, left + not_run
    if not outcomes:
        raise SmokeError("\n".join([f"no wheels to smoke-test in {wheelhouse}", *left]))
    _say_outputs(args.verbose, outcomes, log)
    if args.json:
        print(json.dumps(report(outcomes, left), indent=2))
    else:
        _say_summary(outcomes, left, time.monotonic() - started)
        _say_skipped(plan.variants.values())
    required = "--require-self-tests" if args.require_self_tests else "CI=true" if in_ci() else None
    if failed := failures(outcomes, required):
        raise SmokeError("\n".join([f"{len(failed)} smoke check(s) failed:", *failed]))
    return 0


def _other_machines(args: argparse.Namespace, directory: Path, variant: ResolvedVariant) -> list[Foreign]:
    """The variant's wheels of other machines than this one, when the run includes host legs
    (no --image, or --image host, and not --in-image): each runs under emulation or is left."""
    if args.in_image is not None or (args.image and HOST_IMAGE not in args.image):
        return []
    return foreign_wheels(wheels_for(directory, variant, args.python, other_machines=True), args.python)


def _say_summary(outcomes: list[Outcome], left: list[str], seconds: float) -> None:
    """The table of legs, the count that passed, and the wheels left to their own machines."""
    print()
    print(printable_lines(summary(outcomes)))
    print(f"\n{printable(count_line(outcomes, seconds))}")
    if left:
        print(f"not smoke-tested here, left to their machines ({len(left):d}):")
        print(printable_lines("\n".join(f"  {line}" for line in left)))


def _say_outputs(verbose: bool, outcomes: list[Outcome], log: Callable[[str], None]) -> None:
    """With --verbose: what each command printed (its last lines), passing or not."""
    if verbose and (outputs := command_outputs(outcomes)):
        log(f"\nwhat each command printed (its last lines):\n{outputs}")


def _say_skipped(variants: Iterable[ResolvedVariant]) -> None:
    """The requirements every leg left out (`engine.smoke.requirements.skip`), under the summary."""
    skipped = sorted({n for v in variants for n in v.smoke_requirements.skip})
    if skipped:
        print(f"left out of every leg (engine.smoke.requirements.skip): {printable(', '.join(skipped))}")
