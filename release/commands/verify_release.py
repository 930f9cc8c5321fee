"""`release verify-release`: re-check a release against its manifest (see `release.publish.manifest`).

    release verify-release release-manifest.json [DIR] [--index-url URL]

DIR (a downloaded GitHub Release, `dist/`, or a wheelhouse) must hold exactly the manifest's
wheels, byte for byte; with `--index-url` (or `--repository`) the index must list every one of
them with the manifest's sha256. Either mismatch names both digests and exits non-zero.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from release.config.matrix import LoadedMatrix
from release.errors import PublishError, UsageError
from release.publish import index, manifest


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("manifest", type=Path, help="the release manifest (release-checks --manifest wrote it)")
    add("directory", type=Path, nargs="?", help="the downloaded release to check (flat or per variant)")
    add("--repository", metavar="URL", help="upload URL of the index whose listing must match")
    add("--index-url", metavar="URL", help="simple-API URL of that index (derived for PyPI and pypiserver)")
    add("--timeout", type=float, default=index.DEFAULT_TIMEOUT, metavar="SECONDS",
        help="deadline of one listing (default: %(default)s)")  # fmt: skip


def run(args: argparse.Namespace, loaded: LoadedMatrix | None) -> int:
    index_url = args.index_url or (index.simple_url_for(args.repository) if args.repository else None)
    if args.directory is None and index_url is None:
        msg = "verify-release needs a directory to check, or --repository/--index-url, or both"
        raise UsageError(msg)
    wheels = manifest.load(args.manifest)
    problems: list[str] = []
    if args.directory is not None:
        problems += manifest.check_directory(wheels, args.directory)
    if index_url is not None:
        index.check_transport(index_url, "index")
        listing: dict[str, str | None] = {}
        for project in sorted({str(w.get("distribution")) for w in wheels.values()}):
            listing.update(index.list_files(index_url, project, timeout=args.timeout))
        problems += manifest.check_listing(wheels, listing)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        msg = f"{len(problems)} problem(s) against {args.manifest}:\n{lines}"
        raise PublishError(msg)
    where = " and ".join(
        w for w in (str(args.directory) if args.directory else "", index.redact_url(index_url or "")) if w
    )
    print(f"{len(wheels)} wheel(s) of {args.manifest} match in {where}")
    return 0
