"""`release rehearse`: run, here and in order, what the release workflow runs for a tag.

The job list is release.yml itself (see `release.rehearse.workflow`): every run: step is a
single toolkit command, run as the workflow would (the workflow's env, bash -eo pipefail) by the
unprivileged `runner` user; the steps only GitHub runs go to local equivalents: a copy of the
tree, a local interpreter, an artifact directory, a local index on 127.0.0.1 (pypiserver) for
PyPI and a `gh` stand-in for GitHub Releases. By default the toolkit is installed with its
dependencies at their lowest allowed versions (`--latest`: the newest, as pip picks).

`--workflow .github/workflows/hardware.yml` rehearses the hardware tier the same way: this
machine stands in for the self-hosted GPU runners, `--release-assets` for the tag's GitHub
Release, the local stand-in images for the serving images (RELEASE_IMAGE_STANDINS), and jobs that
meet while running (prefill and decode of one pair) run at the same time, as on GitHub.

An adopter's workflows install the toolkit pinned (`pip install "$TOOLKIT"`, from the index);
`--toolkit WHEEL` installs that wheel in their place (and in the container builds' environment).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from release import flags
from release.config.matrix import LoadedMatrix
from release.errors import UsageError
from release.rehearse import runner, session


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--tag", required=True, help="the tag to rehearse, e.g. v0.2.0 (checked against the matrix)")
    add("--workflow", type=Path, help="default: .github/workflows/release.yml beside the matrix")
    add(
        "--work", type=Path, help="where jobs run (default: build/rehearse/ beside the matrix; emptied first)"
    )
    add(
        "--latest",
        action="store_true",
        help="install the toolkit's newest dependencies, not the lowest allowed",
    )
    add(
        "--installer",
        choices=("uv", "pip"),
        default="uv",
        help="what the toolkit's install steps run here: uv (default: the same requirement and pins "
        "in a venv with pip, about 15 s of CPU less per job) or pip, as the workflow writes it",
    )
    flags.variant(parser, "the workflow_dispatch `variant` input (a backfill of one variant)", default="")
    add(
        "--user",
        default="runner",
        help="the unprivileged user jobs run as when started as root (default: runner)",
    )
    add(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for every job (repeatable), e.g. a switch the toolkit honours",
    )
    add(
        "--input",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a workflow_dispatch input (repeatable); a declared `tag` input gets --tag unless given",
    )
    add(
        "--release-assets",
        type=Path,
        metavar="DIR",
        help="wheels and their verify reports the tag's GitHub Release holds (hardware.yml downloads "
        "them), e.g. a wheelhouse or a release rehearsal's github/releases/OWNER/NAME/TAG",
    )
    flags.python(
        parser,
        "only these matrix Pythons (repeatable): the jobs' checkout lists just them; the local "
        "images are made from the matrix as it is",
        many=True, default=[], metavar="X.Y",
    )  # fmt: skip
    add(
        "--floor",
        metavar="TAG",
        help="the platform floor the jobs' checkout declares, e.g. manylinux_2_39_x86_64 for wheels "
        "built in local Debian trixie images where the matrix's floor image is in a registry",
    )
    add(
        "--arch",
        action="append",
        default=[],
        metavar="MACHINE",
        help="only these machines of platform.architectures (repeatable): the jobs' checkout lists "
        "just them, e.g. --arch x86_64 where another machine's Pythons cannot run here under emulation",
    )
    add(
        "--toolkit",
        type=Path,
        metavar="WHEEL",
        help="the toolkit wheel every 'Install the toolkit' step installs, in place of the checkout "
        '(`pip install .`) or the pinned "$TOOLKIT" (which it must satisfy): an adopter rehearsing a '
        "toolkit that is not on the index yet",
    )
    add(
        "--job",
        action="append",
        default=[],
        metavar="ID",
        help="only this job of the workflow runs (repeatable): the others are skipped, as a job "
        "whose if: is false, and the jobs that need them follow their own if:, e.g. two rehearsals "
        "of one tag in parallel, each running part of it over wheels the store shares",
    )
    add("--repo", default="local/rehearsal", metavar="OWNER/NAME", help="GITHUB_REPOSITORY for the jobs")


def _env(pairs: list[str], flag: str = "--env") -> dict[str, str]:
    found = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.replace("-", "_").isidentifier():
            msg = f"{flag} {pair!r}: expected KEY=VALUE"
            raise UsageError(msg)
        found[key] = value
    return found


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    rehearsed = session.rehearse(
        loaded, tag=args.tag, workflow_path=args.workflow, work=args.work, lowest=not args.latest,
        variant=args.variant, user=args.user, repository=args.repo, env=_env(args.env),
        inputs=_env(args.input, "--input"), release_assets=args.release_assets, pythons=args.python,
        floor=args.floor, machines=args.arch, toolkit=args.toolkit, installer=args.installer,
        only=args.job, log=lambda line: print(line, flush=True),
    )  # fmt: skip
    print()
    print(runner.render(rehearsed.results))
    mapped = session.local_equivalents(rehearsed.workflow)
    print("\nsteps run by local equivalents:\n" + "\n".join(f"  {line}" for line in mapped))
    session.require_success(rehearsed)
    print(f"\nrehearsal passed: {len(rehearsed.results)} job(s)")
    return 0
