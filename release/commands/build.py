"""`release build`: build, repair and verify the wheels of the selected steps."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from release.build.host import build_variant, summary
from release.build.toolchain import Toolchain, find_toolchain, toolkit_mismatch
from release.config.matrix import LoadedMatrix
from release.errors import ToolchainError, UsageError, VerifyError
from release.plan.resolve import ResolvedVariant
from release.plan.steps import BuildStep, make_plan, select
from release.plan.version import build_version


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variant", required=True, help="variant from the matrix (cpu, cuda, rocm, musa)")
    parser.add_argument(
        "--python",
        action="append",
        default=None,
        help="Python version to build for (repeatable; default: all in the matrix)",
    )
    parser.add_argument("--select", help="identifier patterns, e.g. 'cp31{2,3}-rocm-*'")
    parser.add_argument(
        "--wheelhouse", type=Path, help="output root (default: wheelhouse/ beside the matrix)"
    )
    parser.add_argument("--tag", help="release tag (e.g. v0.3.13); sets the version of every wheel")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="wheels built at once")
    parser.add_argument(
        "--container",
        action="store_true",
        help="build through cibuildwheel in the variant's build image (needs docker or podman)",
    )
    parser.add_argument("--image", help="with --container: this build image instead of the matrix's")
    parser.add_argument(
        "--release-image",
        action="store_true",
        default=os.environ.get("GITHUB_ACTIONS") == "true",
        help="with --container: the release image (manylinux + toolkit install; default in GitHub Actions)",
    )
    parser.add_argument(
        "--allow-toolkit-mismatch",
        action="store_true",
        help="build on the host although its toolkit is not the declared one (an experiment: verify "
        "records it and --release fails the wheels)",
    )


def chosen_steps(args: argparse.Namespace, loaded: LoadedMatrix) -> tuple[BuildStep, ...]:
    plan = make_plan(loaded, variants=(args.variant,))
    steps = plan.builds_of(args.variant)
    if args.python:
        unknown = [p for p in args.python if p not in loaded.matrix.python]
        if unknown:
            known = ", ".join(loaded.matrix.python)
            msg = f"Python {', '.join(unknown)} is not in the matrix (python: {known})"
            raise UsageError(msg)
        steps = tuple(s for s in steps if set(s.serves) & set(args.python))
    return select(steps, args.select)


def check_toolkit(variant: ResolvedVariant, toolchain: Toolchain, *, allow: bool) -> str | None:
    """The declared toolkit must be the one found (major.minor); the mismatch line otherwise, or,
    with `allow`, the override that verify records."""
    probe = variant.backend.toolkit
    install = f"{probe.install} {variant.toolkit}" if probe is not None else "its install script"
    env_var = probe.env[0] if probe and probe.env else "PATH"
    hint = (
        f"install {variant.toolkit} (`{install}`) and point ${env_var} "
        "at it, build in the variant's build image with --container, or pass --allow-toolkit-mismatch "
        "for an experiment"
    )
    problem = toolkit_mismatch(
        backend=variant.name,
        declared=variant.toolkit,
        source=variant.toolkit_source,
        toolchain=toolchain,
        hint=hint,
    )
    if problem is None:
        return None
    if not allow:
        raise ToolchainError(problem)
    print(f"warning: {problem.split(': install ')[0]}; --allow-toolkit-mismatch: verify records it")
    return f"declared {variant.toolkit}, built with {toolchain.version}"


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    steps = chosen_steps(args, loaded)
    variant = steps[0].variant
    version = build_version(loaded, args.tag)
    wheelhouse = (args.wheelhouse or loaded.root / "wheelhouse") / args.variant
    if args.container:
        from release.build.container import require_engine, run_cibuildwheel  # noqa: PLC0415

        started = time.monotonic()
        reports = run_cibuildwheel(
            steps,
            wheelhouse=wheelhouse,
            version=version,
            engine=require_engine(),
            image=args.image,
            release_image=args.release_image,
        )
        print(f"\n{len(reports)} wheel(s) in {wheelhouse} ({time.monotonic() - started:.1f} s)")
        failed = [r.wheel.name for r in reports if not r.ok]
        if failed:
            msg = f"{len(failed)} wheel(s) failed verification: " + ", ".join(failed)
            raise VerifyError(msg)
        return 0
    toolchain = find_toolchain(variant.backend)  # a missing toolkit stops here, in one line
    override = check_toolkit(variant, toolchain, allow=args.allow_toolkit_mismatch)
    print(
        f"building {len(steps)} wheel(s) of {variant.distribution} {version} on the host "
        f"(no container: the platform tag is the best this host allows)",
        flush=True,
    )
    started = time.monotonic()
    results = build_variant(
        steps, wheelhouse=wheelhouse, version=version, jobs=args.jobs, toolkit_override=override
    )
    results.sort(key=lambda r: r.step.identifier)
    print()
    print(summary(results))
    floor_missed = [r for r in results if not r.floor_met]
    if floor_missed:
        print(
            f"\nnote: this host allows {floor_missed[0].platform}, not the matrix floor "
            f"{variant.floor}: valid local wheels, not release wheels"
        )
    print(f"\n{len(results)} wheel(s) in {wheelhouse} ({time.monotonic() - started:.1f} s)")
    bad = [r for r in results if not r.verify_ok]
    if bad:
        msg = f"{len(bad)} wheel(s) failed verification: " + ", ".join(r.wheel.name for r in bad)
        raise VerifyError(msg)
    return 0
