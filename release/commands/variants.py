"""`release variants`: PEP 825 variant wheels of one distribution from the per-variant wheels.

    release variants [--wheelhouse DIR] [--out DIR] [--version X.Y.Z]

Opt in with `variant_wheels: {distribution: ..., variants: [...]}` in matrix.yaml. The wheels in
`wheelhouse/<variant>/` are copied (no compile) under the shared name with a label and
`variant.json`; `{name}-{version}-variants.json` is written beside them; every variant wheel is
verified against its variant and gets its `.verify.json`. PyPI does not take variant file names:
publish them to an index that serves PEP 825 (`release publish --variant-wheels`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from release import flags
from release.config.matrix import LoadedMatrix
from release.errors import VerifyError
from release.inspect.report import failure_summary, render_report
from release.inspect.verify import verify_release, write_report
from release.plan.steps import make_plan
from release.variants.make import DEFAULT_OUT, label_of, make_variant_wheels, variant_set


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    flags.wheelhouse(parser, "the per-variant wheels (default: wheelhouse/)", metavar="DIR")
    add("--out", type=Path, metavar="DIR", help=f"where the variant wheels go (default: {DEFAULT_OUT}/)")
    add("--version", metavar="VERSION", help="only wheels of this version (or tag vX.Y.Z)")
    add("--quiet", action="store_true", help="print only the summary line")


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    plan = make_plan(loaded)
    shared = variant_set(loaded, plan.variants)
    wheelhouse = args.wheelhouse or loaded.root / "wheelhouse"
    out = args.out or loaded.root / DEFAULT_OUT
    version = args.version.removeprefix("v") if args.version else None
    log = (lambda _text: None) if args.quiet else print
    made, indexes = make_variant_wheels(shared, plan.variants, wheelhouse, out, version=version, log=log)
    mapped = [(w, shared.variant_for_label(label_of(w) or "")) for w in made]
    reports = verify_release(mapped, variants=shared.variants, matrix=str(loaded.path))
    for report in reports:
        write_report(report)
        if not report.ok:
            print(render_report(report), flush=True)
    failures = failure_summary(reports, "variant wheels")
    if failures:
        raise VerifyError(failures)
    labels = ", ".join(f"{d.variant}={d.label}" for d in shared.descriptions)
    print(
        f"{len(made)} variant wheels of {shared.distribution} ({labels}) and "
        f"{', '.join(p.name for p in indexes)} in {out}; all verified"
    )
    return 0
