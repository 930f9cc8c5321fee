"""`release release-checks`: the release-day checks of a downloaded set (`release.publish.checked_set`).

    release release-checks --tag v0.2.0 [--repository URL] [--dist dist] wheelhouse

With `--dist DIR`, once every check passes the checked wheels are copied into DIR (flat), the
directory the upload reads: what is uploaded is exactly what was checked.
"""

from __future__ import annotations

import argparse
import math
from functools import partial
from pathlib import Path

from release import flags, settings
from release.config.matrix import LoadedMatrix
from release.config.names import seconds, whole
from release.errors import UsageError
from release.plan.steps import make_plan
from release.plan.version import tag_from_env, version_from_tag
from release.publish import checked_set, index
from release.reproduce import inputs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("wheelhouse", type=Path, help="holds <variant>/*.whl with their verify reports")
    add("--tag", help="the release tag (default: the pushed tag in GitHub Actions)")
    flags.variant(parser, "only this variant (repeatable; a backfill)", many=True)
    add(
        "--repository",
        metavar="URL",
        help="upload URL of the index (default: the matrix's route for the tag)",
    )
    add("--index-url", metavar="URL", help="simple-API URL of that index (derived for PyPI and pypiserver)")
    settings.argument(parser, "--repo", env="GITHUB_REPOSITORY", metavar="OWNER/NAME",
                      help="the GitHub repository that publishes")  # fmt: skip
    add("--workflow", type=Path, help="the publishing workflow (default: .github/workflows/release.yml)")
    add("--size-limit", type=whole(1, 1 << 40), metavar="BYTES",
        help="the index's per-file limit (default: 100 MiB)")  # fmt: skip
    add(
        "--dist", type=Path, metavar="DIR", help="copy the checked wheels here (flat) when every check passes"
    )
    add("--timeout", type=seconds, default=index.DEFAULT_TIMEOUT, metavar="SECONDS",
        help="deadline of each whole request to the index (default: %(default)s)")  # fmt: skip
    add("--manifest", type=Path, metavar="FILE",
        help="write the release manifest of the checked set here (never into --dist)")  # fmt: skip


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    tag = args.tag or tag_from_env()
    if not tag:
        msg = "release-checks needs a release tag: pass --tag v1.2.3 (in GitHub Actions, the pushed tag)"
        raise UsageError(msg)
    version = version_from_tag(tag, loaded.matrix.publish.tag_pattern)
    plan = make_plan(loaded)
    names = list(dict.fromkeys(args.variant or plan.variants))
    variants = [plan.variant(name) for name in names]  # an unknown name: a usage error naming the known
    checked_set.check_release(
        loaded, plan, variants, args.wheelhouse, tag=tag, version=version, repository=args.repository,
        index_url=args.index_url, repo=args.repo, workflow=args.workflow, size_limit=args.size_limit,
        timeout=_timeout(args.timeout), dist=args.dist, manifest_path=args.manifest,
        inputs_of=partial(inputs.collect, loaded.root), say=print,
    )  # fmt: skip
    return 0


def _timeout(seconds: float) -> float:
    if not (math.isfinite(seconds) and seconds > 0):
        msg = f"--timeout must be a number of seconds > 0, not {seconds!r}"
        raise UsageError(msg)
    return seconds
