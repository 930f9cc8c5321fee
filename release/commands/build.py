"""`release build`: build, repair and verify the wheels of the selected steps.

Without `--variant` every variant of the matrix is built. A Python that is missing here (or has no
headers), or, when every variant is built, a variant whose toolkit is missing or is not the
declared one, is skipped on a local run and listed at the end with the command that gets it; with
`CI=true` it fails the build instead.

Where each variant builds is the placement `release plan` shows (`release.plan.placement`, from the
same probes): its lines are printed first, and the build carries them out.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from release import flags, table
from release.builder.host import WheelResult, build_variant, summary
from release.config.machines import MACHINES, host_machine
from release.config.matrix import LoadedMatrix
from release.config.names import seconds, whole
from release.errors import BuildError, ReleaseError, ToolchainError, UsageError, VerifyError
from release.machine.containers import ContainerEngine, require_engine
from release.machine.interpreters import Interpreter, interpreter, missing_table
from release.machine.lock import DEFAULT_WAIT_S
from release.machine.probes import host_probes
from release.plan.machine import machine_of
from release.plan.placement import StepPlacement, place_steps
from release.plan.source import check_engine_source
from release.plan.steps import BuildStep, make_plan, select
from release.plan.version import build_version
from release.settings import in_ci, in_github_actions
from release.table import printable

Steps = dict[str, tuple[BuildStep, ...]]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.variant(parser, "variant from the matrix (repeatable; default: every variant)", many=True)
    flags.python(parser, "Python version to build for (repeatable; default: all in the matrix)", many=True)
    parser.add_argument("--select", help="identifier patterns, e.g. 'cp31{2,3}-rocm-*'")
    parser.add_argument(
        "--arch",
        choices=tuple(MACHINES),
        default=host_machine(),
        help="the machine architecture to build for (default: this machine's, %(default)s)",
    )
    flags.wheelhouse(parser, "output root (default: wheelhouse/ beside the matrix)")
    parser.add_argument("--tag", help="release tag (e.g. v0.3.13); sets the version of every wheel")
    parser.add_argument(
        "--jobs", type=whole(1, 1024), default=os.cpu_count() or 1, help="wheels built at once"
    )
    parser.add_argument(
        "--container",
        action="store_true",
        help="build through cibuildwheel in the variant's build image (needs docker or podman)",
    )
    parser.add_argument("--image", help="with --container: this build image instead of the matrix's")
    parser.add_argument(
        "--release-image",
        action="store_true",
        default=in_github_actions(),
        help="with --container: the release image (manylinux + toolkit install; default in GitHub Actions)",
    )
    parser.add_argument(
        "--lock-wait",
        type=seconds,
        default=DEFAULT_WAIT_S,
        metavar="SECONDS",
        help="how long to wait for another build of the same variant to finish (default: %(default).0f)",
    )
    parser.add_argument(
        "--allow-toolkit-mismatch",
        action="store_true",
        help="build on the host although its toolkit is not the declared one (an experiment: verify "
        "records it and --release fails the wheels)",
    )


def chosen_steps(args: argparse.Namespace, loaded: LoadedMatrix) -> dict[str, tuple[BuildStep, ...]]:
    """The selected steps by variant: `--variant` (default: every variant), `--python`, `--select`."""
    variants = tuple(dict.fromkeys(args.variant or ()))
    steps = make_plan(loaded, variants=variants, include_held_back=True).builds
    if args.python:
        unknown = [p for p in args.python if p not in loaded.matrix.python]
        if unknown:
            known = ", ".join(loaded.matrix.python)
            msg = f"Python {', '.join(unknown)} is not in the matrix (python: {known})"
            raise UsageError(msg)
        steps = tuple(s for s in steps if set(s.serves) & set(args.python))
    steps = _of_machine(steps, args.arch, loaded)
    by_variant: dict[str, tuple[BuildStep, ...]] = {}
    for step in select(steps, args.select):
        by_variant[step.variant.name] = (*by_variant.get(step.variant.name, ()), step)
    return by_variant


def _of_machine(steps: tuple[BuildStep, ...], machine: str, loaded: LoadedMatrix) -> tuple[BuildStep, ...]:
    """The steps of one machine: this one's, or another's, cross-compiled in the local image
    (`release.builder.cross`); GitHub Actions builds each machine's natively."""
    chosen = tuple(s for s in steps if machine_of(s.variant) == machine)
    if steps and not chosen:
        machines = ", ".join(loaded.matrix.platform.machines)
        msg = f"--arch {machine}: no selected variant is released for it (platform.architectures: {machines})"
        raise UsageError(msg)
    return chosen


def usable_interpreters(pythons: list[str]) -> tuple[set[str], list[Interpreter]]:
    """(versions a build can use, the others with why and how to get them); CI=true fails on any."""
    found = [interpreter(p) for p in dict.fromkeys(pythons)]
    missing = [i for i in found if not i.usable]
    if missing and (in_ci() or len(missing) == len(found)):
        reasons = "; ".join(f"{i.problem}: `{i.fix}`" for i in missing)
        why = " (CI=true: nothing may be skipped)" if in_ci() and len(missing) < len(found) else ""
        msg = f"{reasons}{why}"
        raise ToolchainError(msg)
    return {i.version for i in found if i.usable}, missing


def placed_steps(
    args: argparse.Namespace, loaded: LoadedMatrix
) -> tuple[Steps, StepPlacement[ContainerEngine]]:
    """(the steps this machine builds, by variant; where every chosen step runs): the record
    `release plan` prints, made by the same function from the same probes
    (`release.machine.probes`), and its lines printed as `release plan` prints them."""
    chosen = chosen_steps(args, loaded)
    steps = [s for selected in chosen.values() for s in selected]
    placed = place_steps(steps, host_probes(allow_toolkit_mismatch=args.allow_toolkit_mismatch))
    return _here(chosen, placed, container=args.container), placed


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    check_engine_source(loaded)
    every = not args.variant
    planned, placed = placed_steps(args, loaded)
    version = build_version(loaded, args.tag)
    root = args.wheelhouse or loaded.root / "wheelhouse"
    started = time.monotonic()
    if args.arch != host_machine():
        return _report(
            _cross(args, planned, placed, root, version), root, started, missing=[], skipped=[], failures=[]
        )
    if args.container:
        answering = require_engine()
        built: list[WheelResult] = []
        for steps in planned.values():
            built += _in_container(args, steps, root, version, answering, missing=[])
        return _report(built, root, started, missing=[], skipped=[], failures=[])
    on_host, in_image, skipped_variants, overrides, engine = _carry_out(placed, planned, every=every)
    missing: list[Interpreter] = []
    pythons: set[str] = set()
    if on_host:
        pythons, missing = usable_interpreters([s.python for steps in on_host.values() for s in steps])
    failures: list[str] = []
    results = _on_host(
        args, on_host, pythons=pythons, overrides=overrides, root=root, version=version, failures=failures,
        every=every,
    )  # fmt: skip
    for name, selected in in_image.items():
        assert engine is not None  # noqa: S101 (set with every in_image entry)
        try:
            results += _in_container(args, selected, root, version, engine, missing=missing)
        except ReleaseError as exc:
            if not every:
                raise
            failures.append(f"{name}: {exc}")
    if not results and not failures:
        msg = "nothing could be built here: " + "; ".join(f"{v}: {why}" for v, why in skipped_variants)
        raise ToolchainError(msg)
    return _report(results, root, started, missing=missing, skipped=skipped_variants, failures=failures)


def _here(planned: Steps, placed: StepPlacement[ContainerEngine], *, container: bool) -> Steps:
    """The steps this machine can build, after saying where each runs (`placed.lines()`, the lines
    `release plan` prints under its table; with `--container`, only the GitHub-only line: every
    variant builds in its image). The GitHub-only steps are left out, an error when nothing else is
    left."""
    github = {s.identifier for s in placed.github_only}
    kept: Steps = {}
    for name, steps in planned.items():
        here = tuple(s for s in steps if s.identifier not in github)
        if here:
            kept[name] = here
    lines = placed.lines(placed_only=True)
    if github and not kept:
        msg = f"nothing to build here: {lines[-1]}"
        raise ToolchainError(msg)
    shown = ([lines[-1]] if github else []) if container else lines  # the GitHub-only line is last
    for line in shown:
        print(printable(line), flush=True)
    return kept


def _carry_out(
    placed: StepPlacement[ContainerEngine], planned: Steps, *, every: bool
) -> tuple[Steps, Steps, list[tuple[str, str]], dict[str, str | None], ContainerEngine | None]:
    """The placement carried out: (on the host, in its local image, skipped with why, the host
    builds' toolkit overrides, the container engine the image builds use). A variant not buildable
    here fails when it was asked for by name or under `CI=true`."""
    on_host: Steps = {}
    in_image: Steps = {}
    skipped_variants: list[tuple[str, str]] = []
    overrides: dict[str, str | None] = {}
    engine: ContainerEngine | None = None
    for name, steps in planned.items():
        where = placed.of(steps[0])
        if where.where == "host":
            overrides[name] = where.override
            on_host[name] = steps
        elif where.where == "image":
            engine = where.engine
            in_image[name] = steps
        elif not every or in_ci():
            raise ToolchainError(where.why)
        else:
            skipped_variants.append((name, where.why))
    return on_host, in_image, skipped_variants, overrides, engine


def _on_host(
    args: argparse.Namespace,
    on_host: Steps,
    *,
    pythons: set[str],
    overrides: dict[str, str | None],
    root: Path,
    version: str,
    failures: list[str],
    every: bool,
) -> list[WheelResult]:
    """Build each host variant's wheels of the usable Pythons; with every variant asked for, a
    variant that fails is added to `failures` and the others go on."""
    results: list[WheelResult] = []
    for name, selected in on_host.items():
        variant = selected[0].variant
        steps = tuple(s for s in selected if s.python in pythons)
        print(
            f"building {len(steps)} wheel(s) of {variant.distribution} {version} on the host "
            f"(no container: the platform tag is the best this host allows)",
            flush=True,
        )
        try:
            results += build_variant(
                steps,
                wheelhouse=root / name,
                version=version,
                jobs=args.jobs,
                toolkit_override=overrides[name],
                lock_wait_s=args.lock_wait,
            )
        except ReleaseError as exc:
            if not every:
                raise
            failures.append(f"{name}: {exc}")
    return results


def _in_container(
    args: argparse.Namespace,
    steps: tuple[BuildStep, ...],
    root: Path,
    version: str,
    engine: ContainerEngine,
    *,
    missing: list[Interpreter],
) -> list[WheelResult]:
    """The steps built in their variant's image. On a local run (not `CI=true`) the Pythons the
    image lacks are skipped and added to `missing`, with the command that gets them."""
    from release.builder.container import run_cibuildwheel  # noqa: PLC0415

    results, lacking = run_cibuildwheel(
        steps,
        wheelhouse=root / steps[0].variant.name,
        version=version,
        engine=engine,
        image=args.image,
        release_image=args.release_image,
        skip_absent_pythons=not in_ci(),
        lock_wait_s=args.lock_wait,
        reuse=True,
    )
    image = args.image or steps[0].variant.build_image.local
    for python in lacking:
        if all(m.version != python for m in missing):
            missing.append(
                Interpreter(
                    python,
                    None,
                    f"the image {image} has no CPython {python} (none with its own prefix here to copy in)",
                    f"release toolchain install python {python}",
                )
            )
    return results


def _cross(
    args: argparse.Namespace, planned: Steps, placed: StepPlacement[ContainerEngine], root: Path, version: str
) -> list[WheelResult]:
    """Another machine's wheels, cross-compiled in each variant's local Debian image (where the
    placement says `cross`)."""
    from release.builder.cross import run_cross  # noqa: PLC0415

    if args.release_image or args.image:
        msg = (
            f"--arch {args.arch}: this machine is {host_machine()}; the release image builds "
            f"{args.arch} wheels on {args.arch} machines (GitHub Actions: the "
            f"{MACHINES[args.arch].github_runner} runner), and here they are cross-compiled in the "
            "local image (leave out --release-image and --image)"
        )
        raise UsageError(msg)
    built: list[WheelResult] = []
    for steps in planned.values():
        where = placed.of(steps[0])
        if where.where != "cross" or where.engine is None:
            msg = f"--arch {args.arch}: {where.why}"
            raise ToolchainError(msg)
        engine = where.engine
        built += run_cross(
            steps, args.arch, wheelhouse=root / steps[0].variant.name, version=version, engine=engine,
            lock_wait_s=args.lock_wait, reuse=True,
        )  # fmt: skip
    return built


def _report(
    results: list[WheelResult],
    root: Path,
    started: float,
    *,
    missing: list[Interpreter],
    skipped: list[tuple[str, str]],
    failures: list[str],
) -> int:
    results.sort(key=lambda r: (r.step.variant.name, r.step.identifier))
    if results:
        print()
        print(summary(results))
    below = {(r.built_in, r.platform, r.step.variant.floor) for r in results if not r.floor_met}
    for where, platform, floor in sorted(below):
        place = "this host" if where == "host" else f"the image {where}"
        print(
            f"\nnote: {place} allows {platform}, not the matrix floor {floor}: "
            "valid local wheels, not release wheels"
        )
    print(f"\n{len(results)} wheel(s) in {root} ({time.monotonic() - started:.1f} s)")
    if missing:
        print("\nskipped Pythons (CI=true fails on them instead):")
        print(missing_table(missing))
    if skipped:
        print("\nskipped variants (CI=true fails on them instead):")
        print(table.render(("variant", "skipped because"), skipped))
    if failures:
        raise BuildError("\n".join(failures))
    bad = [r for r in results if not r.verify_ok]
    if bad:
        msg = f"{len(bad)} wheel(s) failed verification: " + ", ".join(r.wheel.name for r in bad)
        raise VerifyError(msg)
    return 0
