"""`release check-resolution`: the installs a user would type, checked before the release.

    release check-resolution [--wheelhouse DIR] [--variant-wheels DIR] [--python 3.12]
                             [--repository URL] [--variant NAME] [--json]

Serves the release set from local indexes on 127.0.0.1 and installs with pip and uv into fresh
venvs of every matrix Python, reporting per distribution, Python and index setup:

- `per-name`: one index with the per-name set; `pip install <distribution>` must give that
  variant's build.
- `partial-index`: the vLLM #44660 pattern: the first index holds only the newest Python's
  wheels, the second the whole set; an older Python must fail, or fall back visibly (the report
  names the index), and never get another backend's build.
- `held-name` (with `--repository`, the index the release goes to, e.g. PyPI): a name held by
  another project there. Each distribution's files on that index are recognised by the
  release-day `name-owner` rule (`release.wheel.names.foreign_files`). A name that is free, or holds
  only this engine's wheels, gives one note and no install. A held name is a failure, always:
  pip and uv install with that index as `--index-url` and ours as `--extra-index-url`, as a
  user of our self-hosted index types it, and the report says what each gave. Even where it
  gave our build (uv prefers the extra index; pip takes the higher version), the other
  project's next upload wins, so the release must not go out under that name.
- `variants` (with `variant_wheels`): the PEP 825 set and `-variants.json`; `uv pip install
  --preview <name>` gets the null variant on a machine without an NVIDIA driver (the CUDA one
  where uv reads a driver), the CUDA variant with NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION;
  pip, which does not read variant wheels, must find nothing.

What was installed is judged from the wheel's own data (`Requires-External`, `variant.json`),
after the question of whose wheel it is: in every setup, a wheel under our name that is not
this engine's (the `name-owner` rule on its wheel name, and its RECORD without the engine's
import package) is reported as the name held by another project, never as a build of ours.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from packaging.version import Version

from release import flags
from release.config.matrix import LoadedMatrix
from release.errors import SmokeError, UsageError
from release.machine.interpreters import require_interpreter
from release.plan.resolve import ResolvedVariant
from release.plan.steps import make_plan
from release.publish.release_day import held_names
from release.smoke.machines import machine_runs
from release.variants.cases import INSTALLERS, NVIDIA_DRIVER, SETUPS, plan_cases
from release.variants.make import DEFAULT_OUT, VariantSet, variant_set
from release.variants.metadata import INDEX_SUFFIX
from release.variants.resolution import Outcome, lay_out, run_case, serving
from release.wheel.names import parse_wheel_name, split_variant_label


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    flags.wheelhouse(parser, "the per-name set, <variant>/*.whl (default: wheelhouse/)", metavar="DIR")
    add(
        "--variant-wheels",
        type=Path,
        metavar="DIR",
        help=f"the variant set and -variants.json (default: {DEFAULT_OUT}/, with variant_wheels)",
    )
    flags.python(parser, "only this matrix Python (repeatable)", many=True)
    flags.variant(parser, "only this variant (repeatable; a backfill: no variant set)", many=True)
    add(
        "--repository",
        metavar="URL",
        help="the index the release goes to (upload or simple URL): held-name asks it who holds our names",
    )
    add("--installer", action="append", choices=INSTALLERS, help="only this installer (repeatable)")
    add("--setup", action="append", choices=SETUPS, help="only this index setup (repeatable)")
    add("--json", action="store_true", help="print the report as JSON")


def _python_of(path: Path) -> str | None:
    return parse_wheel_name(split_variant_label(path)[0]).python_version()


def _per_name_files(wheelhouse: Path, variants: Mapping[str, ResolvedVariant]) -> list[Path]:
    files = []
    for name in variants:
        files.extend(sorted((wheelhouse / name).glob("*.whl")))
    if not files:
        msg = f"{wheelhouse}: no wheels in <variant>/ directories (build them first, or pass --wheelhouse)"
        raise UsageError(msg)
    return files


def _variant_files(directory: Path, shared: VariantSet) -> list[Path]:
    stem = shared.distribution.replace("-", "_").lower()
    files = sorted(directory.glob(f"{stem}-*.whl")) + sorted(directory.glob(f"{stem}-*{INDEX_SUFFIX}"))
    if not any(p.name.endswith(INDEX_SUFFIX) for p in files):
        msg = (
            f"{directory}: no variant wheels and -variants.json of {shared.distribution}: "
            "run `release variants` first"
        )
        raise UsageError(msg)
    return files


def _selection(
    args: argparse.Namespace, loaded: LoadedMatrix, variants: Mapping[str, ResolvedVariant]
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], VariantSet | None]:
    """(pythons, setups, installers, the variant set or None) the arguments ask for."""
    pythons = tuple(args.python or loaded.matrix.python)
    unknown = [p for p in pythons if p not in loaded.matrix.python]
    if unknown:
        msg = f"--python {unknown[0]} is not a matrix Python ({', '.join(loaded.matrix.python)})"
        raise UsageError(msg)
    setups = tuple(args.setup or SETUPS)
    # A variant set is made of all its variants: a backfill of some (--variant) checks no set.
    wanted = loaded.matrix.variant_wheels and "variants" in setups and not args.variant
    shared = variant_set(loaded, variants) if wanted else None
    if "variants" in (args.setup or ()) and shared is None:
        msg = f"--setup variants needs `variant_wheels` in {loaded.path.name}, and no --variant"
        raise UsageError(msg)
    if "held-name" in (args.setup or ()) and not args.repository:
        msg = "--setup held-name needs --repository (the index the release goes to, e.g. PyPI's)"
        raise UsageError(msg)
    return pythons, setups, tuple(args.installer or INSTALLERS), shared


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    variants = make_plan(loaded, variants=tuple(args.variant or ())).variants
    pythons, setups, installers, shared = _selection(args, loaded, variants)
    interpreters = {p: require_interpreter(p) for p in pythons}
    per_name = _per_name_files(args.wheelhouse or loaded.root / "wheelhouse", variants)
    newest = max(loaded.matrix.python, key=Version)  # the partial index holds the matrix's newest
    public, held = held_names(args.repository, variants) if "held-name" in setups else (None, {})
    cases = plan_cases(
        variants, pythons, installers, setups, shared,
        nvidia_driver=NVIDIA_DRIVER.exists(), newest=newest, held=held,
    )  # fmt: skip
    runs = machine_runs(cases, per_name, variants)
    for line in runs.said:
        print(line, file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="check-resolution-") as scratch:
        work = Path(scratch)
        indexes = {
            "release": lay_out(work / "release", per_name),
            "newest-only": lay_out(work / "newest-only", [p for p in per_name if _python_of(p) == newest]),
        }
        if shared is not None:
            directory = args.variant_wheels or loaded.root / DEFAULT_OUT
            indexes["variants"] = lay_out(work / "variants", _variant_files(directory, shared))
        outcomes: list[Outcome] = []
        with serving(indexes) as servers:
            for case, platform in runs.cases:
                outcome = run_case(
                    case, interpreters[case.python], servers, variants,
                    work=work, pip_runner=sys.executable, outside={"public": public} if public else None,
                    platform=platform,
                )  # fmt: skip
                outcomes.append(outcome)
                if not args.json:
                    _print(outcome)
    return _report(outcomes, as_json=args.json, pythons=len(pythons), setups=len(setups))


def _report(outcomes: Sequence[Outcome], *, as_json: bool, pythons: int, setups: int) -> int:
    failed = [o for o in outcomes if not o.ok]
    if as_json:
        document = {"schema_version": 1, "ok": not failed, "cases": [o.to_json() for o in outcomes]}
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    if failed:
        lines = "\n".join(
            f"  - {o.case.setup} Python {o.case.python}: {o.case.label}: {o.detail}" for o in failed
        )
        msg = f"{len(failed)} of {len(outcomes)} installs did not give the right build:\n{lines}"
        raise SmokeError(msg)
    if not as_json:
        print(f"{len(outcomes)} installs, {pythons} Python(s), {setups} index setup(s): all right")
    return 0


def _print(outcome: Outcome) -> None:
    c = outcome.case
    status = "PASS" if outcome.ok else "FAIL"
    print(f"{status}  {c.setup:<13} {c.python:<5} {c.label}: {outcome.detail}", flush=True)
