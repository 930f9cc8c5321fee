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
from pathlib import Path

from release import settings, table
from release.config.matrix import LoadedMatrix
from release.plan.inputs import TITLE, markdown, readiness, require_ready
from release.plan.steps import make_plan


def add_arguments(parser: argparse.ArgumentParser) -> None:
    settings.argument(
        parser, "--repo", env="GITHUB_REPOSITORY", metavar="OWNER/NAME",
        help="the GitHub repository that publishes",
    )  # fmt: skip
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
    items = readiness(plan, environ=settings.environment(), repository=args.repo, workflow=workflow)
    rows = [(i.kind, i.name, i.status, i.detail) for i in items]
    print(table.render(("input", "name", "status", "detail"), rows, title="Ready for a tag push?"))
    require_ready(items)
    by_hand = sum(i.status == "by hand" for i in items)
    print(f"\nready: nothing missing that this job can see; {by_hand} item(s) above to check by hand once")
    return 0
