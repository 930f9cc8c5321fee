"""`release verify-release`: re-check a release against its manifest (see `release.publish.manifest`).

    release verify-release release-manifest.json [DIR] [--index-url URL]

DIR (a downloaded GitHub Release, `dist/`, or a wheelhouse) must hold exactly the manifest's
files, byte for byte, and nothing else; with `--index-url` (or `--repository`) the index must
list every one of them with the manifest's sha256 (a file listed without one is fetched and
hashed). Either mismatch names both digests and exits non-zero.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from release.config.matrix import LoadedMatrix
from release.config.names import seconds
from release.errors import PublishError, UsageError
from release.publish import index, manifest


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("manifest", type=Path, help="the release manifest (release-checks --manifest wrote it)")
    add("directory", type=Path, nargs="?", help="the downloaded release to check (flat or per variant)")
    add("--repository", metavar="URL", help="upload URL of the index whose listing must match")
    add("--index-url", metavar="URL", help="simple-API URL of that index (derived for PyPI and pypiserver)")
    add("--timeout", type=seconds, default=index.DEFAULT_TIMEOUT, metavar="SECONDS",
        help="deadline of one listing (default: %(default)s)")  # fmt: skip
    add("--settle", type=seconds, default=0.0, metavar="SECONDS",
        help="list again for up to this long while files are only missing (an index's cache "
             "catching up after an upload); a different sha256 fails at once (default: 0)")  # fmt: skip


def run(args: argparse.Namespace, loaded: LoadedMatrix | None) -> int:
    index_url = args.index_url or (index.simple_url_for(args.repository) if args.repository else None)
    if args.directory is None and index_url is None:
        msg = "verify-release needs a directory to check, or --repository/--index-url, or both"
        raise UsageError(msg)
    wheels = manifest.load(args.manifest)
    problems: list[str] = []
    if args.directory is not None:
        problems += manifest.check_directory(wheels, args.directory, ignore=[args.manifest])
    if index_url is not None:
        index.check_transport(index_url, "index")
        problems += _check_index(wheels, index_url, args.timeout, args.settle)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        msg = f"{len(problems)} problem(s) against {args.manifest}:\n{lines}"
        raise PublishError(msg)
    where = " and ".join(
        w for w in (str(args.directory) if args.directory else "", index.redact_url(index_url or "")) if w
    )
    print(f"{len(wheels)} wheel(s) of {args.manifest} match in {where}")
    return 0


SETTLE_STEP = 5.0
"""Seconds between listings while an index catches up."""


def _check_index(
    wheels: dict[str, dict[str, object]], index_url: str, timeout: float, settle: float
) -> list[str]:
    """The listing's problems; files only missing are listed again until `settle` seconds pass."""
    if not (math.isfinite(timeout) and timeout > 0 and math.isfinite(settle) and settle >= 0):
        msg = "--timeout must be > 0 and --settle >= 0 seconds"
        raise UsageError(msg)
    end = time.monotonic() + settle
    projects = sorted({str(w.get("distribution")) for w in wheels.values()})
    while True:
        listing: dict[str, str | None] = {}
        for project in projects:
            listing.update(index.list_files(index_url, project, timeout=timeout))
        failed = _hash_unlisted_digests(wheels, listing, index_url, timeout)
        rest = {n: e for n, e in wheels.items() if n not in failed}
        problems = list(failed.values()) + manifest.check_listing(rest, listing)
        missing_only = all(p.endswith(": not listed on the index") for p in problems)
        if not problems or not missing_only or time.monotonic() + SETTLE_STEP > end:
            return problems
        print(f"{len(problems)} file(s) not listed yet; listing again in {SETTLE_STEP:g}s", flush=True)
        time.sleep(SETTLE_STEP)


def _hash_unlisted_digests(
    wheels: dict[str, dict[str, object]], listing: dict[str, str | None], index_url: str, timeout: float
) -> dict[str, str]:
    """A manifest's file that the index lists without a sha256 is fetched and hashed (a name is
    not a confirmation); the digest found fills the gap in `listing`. The problems, by name, of
    those that could not be fetched."""
    problems = {}
    for name, entry in sorted(wheels.items()):
        if name not in listing or listing[name] is not None:
            continue
        try:
            listing[name] = index.fetch_sha256(
                index_url, str(entry.get("distribution")), name, timeout=timeout
            )
        except PublishError as exc:
            problems[name] = f"{name}: listed without a sha256, and fetching it to hash it failed ({exc})"
    return problems
