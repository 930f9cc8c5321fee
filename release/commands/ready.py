"""`release ready`: is this repository ready for a tag push? Every outside input it needs.

    release ready                 the list, with what is missing; exit 1 when a tag push would
                                  fail for configuration alone, naming what to set
    release ready --markdown      docs/release-builds.md's "Before your first tag", from the same list

What it can see it checks: the declared variables in its environment (ci.yml hands it whether
each repository variable or secret is set, never the value), the serving images' pins, and that
release.yml passes every declared variable. What only GitHub or the index can answer (environments,
trusted publishers, index names, runners) it prints as a checklist. See `release.plan.inputs`.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from release import table
from release.config.matrix import LoadedMatrix
from release.errors import ReleaseError
from release.plan.inputs import BLOCKING, Item, declared_variables, environments, readiness
from release.plan.steps import Plan, make_plan

TITLE = "Before your first tag"


class NotReady(ReleaseError):
    """A tag push would fail for configuration alone."""

    exit_code = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repo",
        default=os.environ.get("GITHUB_REPOSITORY"),
        metavar="OWNER/NAME",
        help="the GitHub repository that publishes (default: GITHUB_REPOSITORY)",
    )
    parser.add_argument(
        "--workflow", type=Path, help="the release workflow (default: .github/workflows/release.yml)"
    )
    parser.add_argument(
        "--markdown",
        action="store_true",
        help=f'print the section "{TITLE}" of docs/release-builds.md and check nothing',
    )


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    plan = make_plan(loaded)
    if args.markdown:
        print(markdown(plan), end="")
        return 0
    workflow = args.workflow or loaded.root / ".github" / "workflows" / "release.yml"
    items = readiness(plan, environ=os.environ, repository=args.repo, workflow=workflow)
    rows = [(i.kind, i.name, i.status, i.detail) for i in items]
    print(table.render(("input", "name", "status", "detail"), rows, title="Ready for a tag push?"))
    blocking = [i for i in items if i.status in BLOCKING]
    by_hand = sum(i.status == "by hand" for i in items)
    if blocking:
        lines = "\n".join(f"  {i.fix}" for i in blocking)
        msg = f"a tag push would fail for configuration alone ({len(blocking)} to set):\n{lines}"
        raise NotReady(msg)
    print(f"\nready: nothing missing that this job can see; {by_hand} item(s) above to check by hand once")
    return 0


def _names(items: list[Item], kind: str) -> str:
    return ", ".join(f"`{i.name}`" for i in items if i.kind == kind)


def markdown(plan: Plan) -> str:
    """The section of docs/release-builds.md, generated from what `release ready` checks (a test
    compares the two)."""
    loaded = plan.loaded
    matrix = loaded.matrix
    items = readiness(plan, environ={}, repository=None)
    out = [
        f"### {TITLE}",
        "",
        "`release ready` lists what a tag push needs from outside the code and fails, naming what to "
        "set, when the push would fail for configuration alone; `ci.yml` runs it on every pull "
        "request. Once per repository:",
        "",
    ]
    variables = declared_variables(loaded.backends)
    used = {
        name: by for name, by in variables.items()
        if any(v.backend in by for v in matrix.variants.values())
    }  # fmt: skip
    for name, by in used.items():
        users = [v for v, spec in matrix.variants.items() if spec.backend in by]
        held = [v for v in users if v in plan.held_back]
        idle = held and len(held) == len(users)
        state = f" (not needed while {', '.join(held)} is held back)" if idle else ""
        out.append(
            f"- **Repository variable or secret `{name}`**{state}: read by the {' and '.join(by)} "
            f"install script (`toolkit.install_env`); `release.yml` passes it to its build and smoke jobs."
        )
    envs = environments(matrix)
    out.append(
        "- **Environments** (Settings > Environments): "
        + ", ".join(f"`{env}` for uploads to {url}" for url, env in envs.items())
        + "; add required reviewers."
    )
    out.append(
        "- **Trusted publishers**, one per distribution and index (repository, workflow `release.yml`, "
        f"the environment above): {_names(items, 'index name')}. Each name must be yours or free."
    )
    images = [i for i in items if i.kind == "image"]
    if images:
        out.append(
            "- **Serving images pinned by digest** (`name:tag@sha256:...`), pullable without "
            f"credentials: {_names(images, 'image')}."
        )
    runners = [i for i in items if i.kind == "runner"]
    if runners:
        out.append(
            "- **Self-hosted GPU runners**: "
            + "; ".join(f"{i.name} ({i.detail.split('labels ', 1)[1]})" for i in runners)
            + "; and Actions settings that let `GITHUB_TOKEN` take `actions: write` (the release "
            "starts `hardware.yml`)."
        )
    for name, why in plan.held_back.items():
        out.append(f"- **Held back** (not released until its `held_back` is removed): `{name}`: {why}.")
    return "\n".join(out) + "\n"
