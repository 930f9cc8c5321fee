"""`release repair`: auditwheel repair of one wheel, with a variant's excludes or explicit ones."""

from __future__ import annotations

import argparse
from pathlib import Path

from release.build.repair import repair_wheel
from release.config.matrix import LoadedMatrix
from release.errors import UsageError
from release.plan.resolve import resolve_variant
from release.wheel.names import FLOOR


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("wheel", type=Path, help="the wheel to repair")
    parser.add_argument("--variant", help="variant whose excludes and floor apply (needs the matrix)")
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        help="a soname or glob kept as NEEDED, never vendored (repeatable; instead of --variant)",
    )
    parser.add_argument(
        "--plat", help="the platform floor (instead of --variant), e.g. manylinux_2_28_x86_64"
    )
    parser.add_argument("--dest-dir", "-w", type=Path, default=Path("wheelhouse"), help="output directory")


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
    result = repair_wheel(args.wheel, floor=floor, excludes=excludes, dest_dir=args.dest_dir)
    print(f"repaired {result.wheel} ({result.note}); excluded: {', '.join(result.excludes) or 'nothing'}")
    return 0
