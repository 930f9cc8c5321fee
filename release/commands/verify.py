"""`release verify`: inspect wheels and apply the verification rules; one report per wheel."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from release import flags
from release.errors import UsageError, VerifyError
from release.wheel import files

if TYPE_CHECKING:
    from release.config.matrix import LoadedMatrix
    from release.inspect.report import VerifyReport
    from release.plan.resolve import ResolvedVariant


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("wheels", nargs="+", metavar="WHEEL", help="wheel files, or directories of wheels")
    parser.add_argument("--json", action="store_true", help="print the versioned JSON report instead")
    parser.add_argument(
        "--release", action="store_true", help="release mode: a tag newer than the matrix floor fails"
    )
    flags.variant(parser, "the matrix variant to check against (default: from the name)")
    parser.add_argument(
        "--version", dest="expected_version", metavar="VERSION", help="the version (or tag vX.Y.Z) expected"
    )
    parser.add_argument(
        "--write-reports", action="store_true", help="also write each wheel's JSON report beside it"
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="check every rule again, even beside an intact report of the same bytes",
    )


def _collect(arguments: Sequence[str]) -> list[Path]:
    wheels: list[Path] = []
    for argument in arguments:
        path = Path(argument)
        if path.is_dir():
            try:
                found = files.walk_files(path, ".whl", links=True)
            except OSError as exc:
                msg = f"{path}: {files.reason(exc)}"
                raise UsageError(msg) from None
            if not found:
                msg = f"{path}: no wheels in this directory"
                raise UsageError(msg)
            wheels.extend(found)
        elif path.is_file():
            wheels.append(path)
        else:
            msg = f"{path}: no such wheel file or directory"
            raise UsageError(msg)
    return wheels


def _mapped(
    args: argparse.Namespace, loaded: LoadedMatrix | None, wheels: list[Path]
) -> tuple[list[tuple[Path, ResolvedVariant | None]], Mapping[str, ResolvedVariant]]:
    """Each wheel with the variant it is checked against (None: the rules that need one say n/a)."""
    if args.variant is not None and loaded is None:
        msg = f"--variant {args.variant} needs a matrix file (--matrix)"
        raise UsageError(msg)
    if loaded is None:  # no plan to make (nor its modules to import); a name must still be a wheel's
        return [(w, None) for w in wheels if _distribution(w)], {}
    from release.plan.resolve import require_variant, variant_for_distribution  # noqa: PLC0415
    from release.plan.steps import make_plan  # noqa: PLC0415
    from release.variants.make import distribution_matches, label_of, variant_set  # noqa: PLC0415

    variants = make_plan(loaded, include_held_back=True).variants
    chosen = require_variant(variants, args.variant, loaded.path.name) if args.variant else None
    labelled = any(label_of(w) is not None for w in wheels)
    # Only a variant wheel needs the matrix's variant set (a matrix trimmed to some variants
    # still verifies its per-name wheels).
    shared = variant_set(loaded, variants) if labelled and loaded.matrix.variant_wheels else None

    def variant_of(wheel: Path) -> ResolvedVariant | None:
        label = label_of(wheel)
        if label is not None and shared is not None and distribution_matches(wheel, shared.distribution):
            return shared.variant_for_label(label)  # a variant wheel: its label names the variant
        return variant_for_distribution(variants, _distribution(wheel))

    return [(w, _machine_facts(chosen or variant_of(w), w)) for w in wheels], variants


def _machine_facts(variant: ResolvedVariant | None, wheel: Path) -> ResolvedVariant | None:
    """The variant with the facts of the wheel's machine (the aarch64 floor for an aarch64 wheel),
    where the variant is released for it; otherwise as it is, and the rules say what is wrong."""
    from release.config.machines import machine_of_tag  # noqa: PLC0415
    from release.plan.machine import for_machine  # noqa: PLC0415
    from release.wheel.names import InvalidWheelName, parse_wheel_name, split_variant_label  # noqa: PLC0415

    if variant is None:
        return None
    try:
        platforms = parse_wheel_name(split_variant_label(wheel)[0]).platforms
    except InvalidWheelName:
        return variant
    machines = {machine_of_tag(p) for p in platforms}
    machine = machines.pop() if len(machines) == 1 else None
    return for_machine(variant, machine) if machine is not None and machine in variant.floors else variant


def run(args: argparse.Namespace, loaded: LoadedMatrix | None) -> int:
    from release.inspect.report import failure_summary  # noqa: PLC0415
    from release.inspect.verify import verify_release, verify_wheel  # noqa: PLC0415

    wheels = _collect(args.wheels)
    mapped, variants = _mapped(args, loaded, wheels)
    common = {
        "matrix": str(loaded.path) if loaded is not None else None,
        "release": args.release,
        "expected_version": args.expected_version,
    }
    if len(wheels) > 1 and loaded is not None:
        reports = verify_release(mapped, variants=variants, **common)
    else:
        reports = [verify_wheel(w, variant=v, reuse=not args.full, **common) for w, v in mapped]
    _render(reports, as_json=args.json, write_reports=args.write_reports)
    failures = failure_summary(reports)
    if failures:
        raise VerifyError(failures)
    return 0


def _render(reports: Sequence[VerifyReport], *, as_json: bool, write_reports: bool) -> None:
    import json  # noqa: PLC0415

    from release import table  # noqa: PLC0415
    from release.inspect.report import render_report  # noqa: PLC0415
    from release.inspect.verify import write_report  # noqa: PLC0415

    for report in reports:
        if write_reports and not report.reused:
            write_report(report)
        if report.reused:
            print(reused_line(report), file=sys.stderr if as_json else sys.stdout, flush=True)
        elif not as_json:
            print(render_report(report), flush=True)
    if as_json:
        document: object = reports[0].to_json() if len(reports) == 1 else [r.to_json() for r in reports]
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    rows = [(r.wheel.name, r.variant or "-", _verdict(r), ", ".join(r.failed)) for r in reports]
    summary = table.render(("wheel", "variant", "result", "failed rules"), rows, title="Verify")
    print(summary, file=sys.stderr if as_json else sys.stdout, flush=True)


def reused_line(report: VerifyReport) -> str:
    """The one line that says a report was reused, not judged again."""
    return (
        f"{report.wheel.name}: sha256 {report.sha256[:16]}... is the bytes its intact report vouches for "
        f"(this toolkit and rule set, the same facts): re-checks skipped, the report's verdict stands "
        f"({_verdict(report)}); --full checks again"
    )


def _distribution(wheel: Path) -> str:
    from release.wheel.names import InvalidWheelName, parse_wheel_name, split_variant_label  # noqa: PLC0415

    try:
        return str(parse_wheel_name(split_variant_label(wheel)[0]).distribution)
    except InvalidWheelName as exc:
        msg = f"{wheel}: not a wheel file name ({exc})"
        raise UsageError(msg) from None


def _verdict(report: VerifyReport) -> str:
    if not report.ok:
        return "FAIL"
    return "pass" if report.releasable else "pass, not releasable"
