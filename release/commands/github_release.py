"""`release github-release`: attach a release's files to its GitHub Release, never replacing one
(`release.publish.github_release` does it).

`gh` runs from PATH (or `--gh`, or `RELEASE_GH`) with the caller's environment (`GH_TOKEN`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from release import settings, table
from release.config.matrix import LoadedMatrix
from release.errors import UsageError
from release.plan.version import is_prerelease, tag_from_env, version_from_tag
from release.publish.github_release import (
    MANIFEST_NAME,
    REPO,
    GitHubRelease,
    attach,
    check_manifest,
    collect,
    held_back_notes,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="+", metavar="DIR_OR_FILE", help="files, or directories of files, to attach"
    )
    parser.add_argument("--tag", help="the release tag (default: the pushed tag in GitHub Actions)")
    settings.argument(
        parser, "--repo", env="GITHUB_REPOSITORY", metavar="OWNER/NAME", help="the GitHub repository"
    )
    parser.add_argument(
        "--manifest",
        type=Path,
        metavar="FILE",
        help="the release manifest: every file attached must be named by it, byte for byte "
        f"(default: a {MANIFEST_NAME} among the files given)",
    )
    parser.add_argument(
        "--gh",
        default=settings.text("RELEASE_GH"),
        metavar="PATH",
        help="the GitHub CLI executable (default: RELEASE_GH, else gh on PATH)",
    )


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    matrix = loaded.matrix
    tag = args.tag or tag_from_env()
    if not tag:
        msg = "github-release needs a release tag: pass --tag v1.2.3 (in GitHub Actions, the pushed tag)"
        raise UsageError(msg)
    if not args.repo or not REPO.fullmatch(args.repo):
        msg = f"--repo must be OWNER/NAME (default: GITHUB_REPOSITORY), not {args.repo!r}"
        raise UsageError(msg)
    version = version_from_tag(tag, matrix.publish.tag_pattern)
    if not matrix.publish.github_release:
        print(f"{loaded.path.name}: publish.github_release is false: nothing is attached")
        return 0
    files = collect(args.paths)
    found = [f.path for f in files.values() if f.name == MANIFEST_NAME]
    manifest_file = args.manifest or (found[0] if found else None)
    if manifest_file is not None:
        check_manifest(files, manifest_file)
    secrets = tuple(v for v in (settings.raw("GH_TOKEN"), settings.raw("GITHUB_TOKEN")) if len(v) >= 3)
    notes = held_back_notes(loaded)
    release = GitHubRelease(gh=args.gh, repo=args.repo, tag=tag, secrets=secrets, notes=notes)
    rows = attach(release, files, prerelease=is_prerelease(version))
    if notes:
        print(notes)
    print(table.render(("asset", "status"), rows))
    added = sum(status.startswith("uploaded") for _, status in rows)
    print(f"\n{args.repo} {tag}: {added} added, {len(rows) - added} already there")
    return 0
