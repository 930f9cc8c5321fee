"""`release repair`: auditwheel repair of one wheel, with a variant's excludes or explicit ones."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from release import flags
from release.builder.repair import repair_wheel
from release.config.backends import Backend, load_backends
from release.config.matrix import LoadedMatrix
from release.config.resources import toolkit_backends
from release.errors import ToolchainError, UsageError
from release.machine.toolchain import find_toolchain, toolkit_mismatch
from release.plan.resolve import resolve_variant
from release.wheel.names import FLOOR


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("wheel", type=Path, help="the wheel to repair")
    flags.variant(parser, "variant whose excludes and floor apply (needs the matrix)")
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        help="a soname or glob kept as NEEDED, never vendored (repeatable; instead of --variant)",
    )
    parser.add_argument(
        "--plat", help="the platform floor (instead of --variant), e.g. manylinux_2_28_x86_64"
    )
    parser.add_argument(
        "--toolkit",
        metavar="BACKEND=VERSION",
        help="fail unless the toolkit found here is this version (what the matrix declares)",
    )
    parser.add_argument("--dest-dir", "-w", type=Path, default=Path("wheelhouse"), help="output directory")


def check_declared_toolkit(spec: str, known: Mapping[str, Backend] | None = None) -> None:
    """`rocm=6.4`: the toolkit found here must be that version (the container build's check).
    `known`: the matrix's backends (a project's own included), else the toolkit's."""
    backend_name, sep, version = spec.partition("=")
    backends = known if known is not None else load_backends(toolkit_backends())
    if not sep or backend_name not in backends or not version:
        msg = f"--toolkit {spec!r}: expected BACKEND=VERSION with a backend of {', '.join(sorted(backends))}"
        raise UsageError(msg)
    backend = backends[backend_name]
    toolchain = find_toolchain(backend)
    install = backend.toolkit.install if backend.toolkit else "its install script"
    hint = (
        f"this build image does not carry {backend.title} {version}; use an image that does, or let "
        f"before-all install it (`{install} {version}`)"
    )
    problem = toolkit_mismatch(
        backend=backend_name, declared=version, source="--toolkit", toolchain=toolchain, hint=hint
    )
    if problem:
        raise ToolchainError(problem)


def needs_matrix(args: argparse.Namespace) -> bool:
    return args.variant is not None


def run(args: argparse.Namespace, loaded: LoadedMatrix | None) -> int:
    if not args.wheel.is_file():
        msg = f"{args.wheel}: no such wheel"
        raise UsageError(msg)
    if args.variant is not None:
        if loaded is None:
            msg = "repair --variant needs a matrix file (--matrix)"
            raise UsageError(msg)
        if args.exclude or args.plat:
            msg = "repair takes --variant, or --plat with --exclude, not both"
            raise UsageError(msg)
        variant = resolve_variant(loaded, args.variant)
        floor, excludes = variant.floor, variant.excludes
    else:
        if not args.plat or not FLOOR.match(args.plat):
            msg = "repair needs --variant, or --plat PLATFORM_TAG (e.g. manylinux_2_28_x86_64) with --exclude"
            raise UsageError(msg)
        floor, excludes = args.plat, tuple(dict.fromkeys(args.exclude))
    if args.toolkit:
        check_declared_toolkit(args.toolkit, loaded.backends if loaded is not None else None)
    result = repair_wheel(args.wheel, floor=floor, excludes=excludes, dest_dir=args.dest_dir)
    print(f"repaired {result.wheel} ({result.note}); excluded: {', '.join(result.excludes) or 'nothing'}")
    return 0
