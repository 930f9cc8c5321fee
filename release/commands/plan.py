"""`release plan`: print the steps the matrix expands to, or every value a workflow needs.

`--json` prints one GitHub Actions matrix (`{"include": [...]}`) on one line. `--github WORKFLOW`
prints `key=value` lines for `$GITHUB_OUTPUT`: every matrix and routing value that workflow
needs, so the workflow YAML holds no Python of its own.
"""

from __future__ import annotations

import argparse
import json
import sys

from release import flags, table
from release.config.checks import unpinned_serving_images
from release.config.machines import host_machine
from release.config.matrix import LoadedMatrix
from release.config.placeholders import unfilled
from release.config.pythons import newest, sort_key
from release.errors import MatrixError, Problem, UsageError
from release.machine.probes import host_probes
from release.plan.imagefacts import refuse_missing_pythons
from release.plan.inputs import environment
from release.plan.machine import machine_of
from release.plan.placement import place_leg, place_steps
from release.plan.source import check_engine_source
from release.plan.steps import BuildStep, Plan, awaiting_line, make_plan, select
from release.plan.version import is_prerelease, route, version_from_tag
from release.table import printable
from release.variants.make import variant_set

WORKFLOWS = ("release", "ci", "hardware")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--select", help="shell patterns over identifiers, e.g. 'cp31{2,3}-rocm-*'")
    parser.add_argument("--json", action="store_true", help="print {'include': [...]} for GitHub Actions")
    parser.add_argument("--smoke", action="store_true", help="the image x hardware x Python cross product")
    parser.add_argument(
        "--github",
        choices=WORKFLOWS,
        metavar="WORKFLOW",
        help=f"print the $GITHUB_OUTPUT lines of one workflow ({', '.join(WORKFLOWS)})",
    )
    parser.add_argument("--tag", help="with --github release: the release tag (checked against the matrix)")
    parser.add_argument(
        "--no-probe",
        action="store_true",
        help="do not ask this host where each step would run (its toolkits, Pythons, podman or "
        "docker): the runs column says 'not probed'",
    )
    flags.variant(parser, "with --github: only this variant (a backfill)")
    flags.python(parser, "with --github ci: the toolkit's Python (the one PR builds use)")


def _line(values: dict[str, object]) -> str:
    return json.dumps(values, separators=(",", ":"))


def github_outputs(
    plan: Plan, workflow: str, *, tag: str | None = None, python: str | None = None
) -> dict[str, str]:
    """The outputs one workflow's plan job sets, from the resolved plan alone."""
    if workflow == "release":
        return _release_outputs(plan, tag)
    if workflow == "ci":
        return _ci_outputs(plan, python)
    return _hardware_outputs(plan)


def _release_outputs(plan: Plan, tag: str | None) -> dict[str, str]:
    matrix = plan.loaded.matrix
    if not tag:
        msg = "--github release needs --tag (the pushed tag, e.g. v0.2.0)"
        raise UsageError(msg)
    version = version_from_tag(tag, matrix.publish.tag_pattern)
    pythons = sorted({p for s in plan.builds for p in s.serves}, key=sort_key)
    images = plan.images  # each names the build job whose artifact holds its wheel
    return {
        "version": version,
        "build": _line({"include": [{**s.to_json(), "artifact": build_job_name(s)} for s in plan.builds]}),
        "build-jobs": _line({"include": build_jobs(plan)}),
        "second-build": _line({"include": [s.to_json() for s in second_builds(plan)]}),
        "pythons": _line({"include": [{"python": p} for p in pythons]}),
        "variant-wheels": str(_makes_variant_wheels(plan)).lower(),
        "images": _line({"include": [{**i.to_json(), "artifact": build_job_name(i.build)} for i in images]}),
        "has-images": str(bool(plan.images)).lower(),
        "has-hardware": str(bool(plan.smokes)).lower(),
        "github-release": str(matrix.publish.github_release).lower(),
        "prerelease": str(is_prerelease(version)).lower(),
        "repository-url": route(matrix, version) or "",
        "environment": environment(matrix, version),
    }


def _ci_outputs(plan: Plan, python: str | None) -> dict[str, str]:
    matrix = plan.loaded.matrix
    if python is None or python not in matrix.python:
        known = ", ".join(matrix.python)
        msg = f"--github ci needs --python, one of the matrix's ({known}); got {python!r}"
        raise UsageError(msg)
    # Variants with declared images are the ones the smoke stage exercises on a plain host.
    steps = [s.to_json() for s in plan.builds if s.python == python and s.variant.images]
    # A matrix whose variants declare no images yet has nothing for the build job.
    return {"build": _line({"include": steps}), "has-build": str(bool(steps)).lower()}


def _hardware_outputs(plan: Plan) -> dict[str, str]:
    matrix = plan.loaded.matrix
    single = [s.to_json() for s in plan.smokes if s.nodes == 1]
    pair = [s.to_json() for s in plan.smokes if s.nodes == 2]
    return {
        "single": _line({"include": single}),
        "pair": _line({"include": pair}),
        "has-single": str(bool(single)).lower(),
        "has-pair": str(bool(pair)).lower(),
        "import-name": matrix.engine.import_name,
        "scripts": " ".join(matrix.engine.scripts),
    }


def build_job_name(step: BuildStep) -> str:
    """The release build job (and its artifact) that makes `step`'s wheel: one per variant and
    machine (`cpu-x86_64`)."""
    return f"{step.variant.name}-{machine_of(step.variant)}"


def build_jobs(plan: Plan) -> list[dict[str, object]]:
    """release.yml's build matrix: one job per variant and machine building all of its Pythons in
    one container run, so that the variant's compiler cache (the job's own, never restored from
    another run) serves the 2nd and later Pythons; a new machine of the plan is a new job."""
    grouped: dict[str, list[BuildStep]] = {}
    for step in plan.builds:
        grouped.setdefault(build_job_name(step), []).append(step)
    return [
        {
            "job": name,
            "variant": steps[0].variant.name,
            "machine": machine_of(steps[0].variant),
            "runner": steps[0].to_json()["runner"],
            "pythons": " ".join(s.python for s in steps),
            "identifiers": [s.identifier for s in steps],
        }
        for name, steps in grouped.items()
    ]


def second_builds(plan: Plan) -> list[BuildStep]:
    """One build step per variant and machine, its newest (GIL) Python's: what release.yml's
    second-build job rebuilds from the manifest before anything is uploaded (`release reproduce`)."""
    chosen: dict[tuple[str, str], BuildStep] = {}
    for step in plan.builds:
        key = (step.variant.name, step.variant.floor)
        known = chosen.get(key)
        if known is None or newest((known.python, step.python)) == step.python != known.python:
            chosen[key] = step
    return list(chosen.values())


def _makes_variant_wheels(plan: Plan) -> bool:
    """Whether the release also makes the matrix's PEP 825 variant set: with `variant_wheels`,
    unless this is a backfill of some variants (a variant set is made of all of its variants).
    An unusable `variant_wheels` fails here, in the plan job, naming the key."""
    loaded = plan.loaded
    if loaded.matrix.variant_wheels is None:
        return False
    if set(plan.variants) != set(loaded.matrix.variants) - set(plan.held_back):
        return False
    variant_set(loaded, plan.variants)
    return True


def held_back_lines(plan: Plan) -> list[str]:
    """One line per variant the plan leaves out on purpose, with the reason."""
    variants = plan.loaded.matrix.variants
    return [
        f"held back (not released): {name} ({variants[name].distribution}): {why}"
        for name, why in plan.held_back.items()
    ]


def unpinned_images(plan: Plan) -> list[Problem]:
    """The plan's serving images that are named by tag only."""
    loaded = plan.loaded
    return unpinned_serving_images(loaded.matrix, loaded.lines, loaded.path.name, plan.variants)


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    check_engine_source(loaded)
    plan = make_plan(loaded, variants=(args.variant,) if args.variant else ())
    code = _run(args, plan)
    where = sys.stderr if args.github or args.json else sys.stdout
    for line in held_back_lines(plan):
        print(line, file=where)
    if plan.held_back and args.github == "release":  # the run's page says it too (job summary)
        variants = plan.loaded.matrix.variants
        rows = [(name, variants[name].distribution, why) for name, why in plan.held_back.items()]
        held = table.render(("variant", "distribution", "reason"), rows, title="Held back: not released")
        print(held, file=where)
    if args.github:
        for name in plan.awaiting:
            print(f"awaiting: {awaiting_line(loaded, name)}", file=sys.stderr)
    elif plan.awaiting:
        print(
            f"awaiting a digest (pin: probe; no release or hardware job runs in them yet): images "
            f"{', '.join(plan.awaiting)}: ci.yml's images job records them (`release ready` says more)",
            file=where,
        )
    if args.github != "release":
        for problem in [*unpinned_images(plan), *unfilled(loaded.path)]:
            print(f"warning: {problem}", file=sys.stderr)
    return code


def _run(args: argparse.Namespace, plan: Plan) -> int:
    loaded = plan.loaded
    if args.github:
        outputs = github_outputs(plan, args.github, tag=args.tag, python=args.python)
        unpinned = unpinned_images(plan) if args.github == "release" else []
        if unpinned:
            # A release runs its smoke tests in these images: a tag could change under it.
            raise MatrixError(unpinned)
        if args.github == "release":
            refuse_missing_pythons(loaded)
        for key, value in outputs.items():
            print(f"{key}={value}")
        return 0
    if args.smoke:
        smoke = select(plan.smokes, args.select)
        if args.json:
            print(_line({"include": [s.to_json() for s in smoke]}))
            return 0
        here = host_machine()
        rows = [
            (s.identifier, s.container or f"(the runner's own Python {s.python})", s.gpu, s.architecture,
             " ".join(s.runner), s.nodes,
             place_leg(image=s.container or None, machine=machine_of(s.variant), host=here).runs)
            for s in smoke
        ]  # fmt: skip
        header = ("identifier", "image", "gpu", "arch", "runner labels", "nodes", "runs here")
        print(table.render(header, rows))
        print(f"\n{len(smoke)} smoke jobs")
        return 0
    return _print_builds(args, plan)


def _print_builds(args: argparse.Namespace, plan: Plan) -> int:
    """The build steps, each with where it runs on this host (`runs`), and one line per variant
    saying why: the lines `release build` prints first (`release.plan.placement`)."""
    steps = select(plan.builds, args.select)
    placed = place_steps(steps, None if args.no_probe else host_probes())
    if args.json:
        placed_json = [{**s.to_json(), "runs": placed.runs(s), "why": placed.why(s)} for s in steps]
        print(_line({"include": placed_json}))
        return 0
    build_rows = [
        (s.identifier, s.variant.distribution, s.variant.backend_name, s.python, s.variant.floor,
         placed.runs(s))
        for s in steps
    ]  # fmt: skip
    header = ("identifier", "distribution", "backend", "python", "platform floor", "runs")
    print(table.render(header, build_rows))
    print(f"\n{len(steps)} build steps from {plan.loaded.path.name}")
    for line in placed.lines():
        print(printable(line))
    return 0
