"""`release publish`: preflight the whole set, then upload it idempotently (see `release.publish`)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from release import flags, settings
from release.config.matrix import LoadedMatrix
from release.config.names import seconds, whole
from release.errors import PublishError, UsageError
from release.machine.lock import build_lock
from release.plan.steps import Plan, make_plan
from release.plan.version import route, tag_from_env, version_from_tag
from release.publish import index, variant_upload
from release.publish.preflight import preflight, publish
from release.publish.upload import DEFAULT_TRIES, DEFAULT_UPLOAD_TIMEOUT, Credentials, Uploader
from release.variants.make import variant_set


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.variant(
        parser,
        "publish only this variant's wheels (repeatable; a backfill). Default: the whole matrix",
        many=True,
    )
    parser.add_argument(
        "--tag", help="the release tag, e.g. v0.3.13 (default: the pushed tag in GitHub Actions)"
    )
    parser.add_argument(
        "--repository",
        metavar="URL",
        help="upload URL (default: publish.repository, or publish.prerelease_repository for pre-releases)",
    )
    parser.add_argument(
        "--index-url",
        metavar="URL",
        help="simple-API URL of that index (derived for PyPI, TestPyPI and pypiserver)",
    )
    flags.wheelhouse(parser, "default: wheelhouse/ beside the matrix", metavar="DIR")
    parser.add_argument(
        "--variant-wheels",
        metavar="DIR",
        help="publish the PEP 825 variant set in DIR (`release variants` made it) instead of the "
        "per-name set, to an index that serves -variants.json; PyPI is refused",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="say what would be uploaded and skipped; upload nothing"
    )
    parser.add_argument(
        "--username", help="upload user (default: TWINE_USERNAME, or __token__ with PYPI_API_TOKEN)"
    )
    parser.add_argument(
        "--tries", type=whole(1, 100), default=DEFAULT_TRIES, help="tries per file (default: %(default)s)"
    )
    parser.add_argument(
        "--backoff", type=seconds, default=1.0, metavar="SECONDS", help="first retry delay, doubled each try"
    )
    parser.add_argument(
        "--upload-timeout", type=seconds, default=DEFAULT_UPLOAD_TIMEOUT, metavar="SECONDS",
        help="deadline of one upload (twine, or one variant file), then it stops (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--index-timeout", type=seconds, default=index.DEFAULT_TIMEOUT, metavar="SECONDS",
        help="deadline of one index listing, connect to last byte (default: %(default)s)",
    )  # fmt: skip


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    credentials = Credentials.from_env(settings.environment(), username=args.username)
    try:
        return _run(args, loaded, credentials)
    except PublishError as exc:
        raise PublishError(credentials.redact(str(exc))) from None
    except UsageError as exc:
        raise UsageError(credentials.redact(str(exc))) from None


def _check_numbers(args: argparse.Namespace) -> None:
    if not math.isfinite(args.backoff) or args.backoff < 0:
        msg = f"--backoff must be a number of seconds >= 0, not {args.backoff}"
        raise UsageError(msg)
    for flag, value in (("--upload-timeout", args.upload_timeout), ("--index-timeout", args.index_timeout)):
        if not math.isfinite(value) or value <= 0:
            msg = f"{flag} must be a number of seconds > 0, not {value}"
            raise UsageError(msg)
    if args.tries < 1:
        msg = "--tries must be at least 1"
        raise UsageError(msg)


def _run(args: argparse.Namespace, loaded: LoadedMatrix, credentials: Credentials) -> int:
    matrix = loaded.matrix
    plan = make_plan(loaded)
    tag = args.tag or tag_from_env()
    if not tag:
        msg = "publish needs a release tag: pass --tag v1.2.3 (in GitHub Actions the pushed tag is used)"
        raise UsageError(msg)
    _check_numbers(args)
    version = version_from_tag(tag, matrix.publish.tag_pattern)
    repository = args.repository or route(matrix, version)
    if repository is None:
        print(f"{tag}: {version} is a pre-release and publish.prerelease is skip: nothing is published")
        return 0
    variant_wheels = getattr(args, "variant_wheels", None)
    if variant_wheels is not None and (refusal := variant_upload.pypi_refusal(repository)):
        raise UsageError(refusal)
    index.check_transport(repository, "repository")
    index_url = args.index_url or index.simple_url_for(repository)
    index.check_transport(index_url, "index")
    if variant_wheels is not None:
        return _publish_variants(
            args, loaded, plan, version=version, repository=repository, index_url=index_url,
            credentials=credentials,
        )  # fmt: skip
    wheelhouse = Path(args.wheelhouse) if args.wheelhouse else loaded.root / "wheelhouse"

    for name in args.variant or ():
        plan.variant(name)  # an unknown name is a usage error with the known ones
    # One publish of this project at a time: a second waits, naming the holder, then gives up.
    with build_lock(
        loaded.root / "build", what=f"publishing {wheelhouse}", wait_s=PUBLISH_LOCK_WAIT_S,
        name=PUBLISH_LOCK, error=PublishError,
    ):  # fmt: skip
        return _publish(
            args, plan, wheelhouse=wheelhouse, version=version, repository=repository,
            index_url=index_url, credentials=credentials,
        )  # fmt: skip


def _publish_variants(
    args: argparse.Namespace,
    loaded: LoadedMatrix,
    plan: Plan,
    *,
    version: str,
    repository: str,
    index_url: str,
    credentials: Credentials,
) -> int:
    shared = variant_set(loaded, plan.variants)
    files = variant_upload.collect(Path(args.variant_wheels), shared, version)
    variant_upload.reverify(files, shared, str(loaded.path))
    print(
        f"preflight passed: {len(files) - 1} variant wheels of {shared.distribution} {version} and "
        f"{files[-1].path.name}\n{'dry run: ' if args.dry_run else ''}publishing to "
        f"{index.redact_url(repository)} (index {index.redact_url(index_url)}) as {credentials.who}"
    )
    with build_lock(
        loaded.root / "build", what=f"publishing {args.variant_wheels}", wait_s=PUBLISH_LOCK_WAIT_S,
        name=PUBLISH_LOCK, error=PublishError,
    ):  # fmt: skip
        outcomes = variant_upload.publish_variant_set(
            files, project=shared.distribution, version=version, repository=repository, index_url=index_url,
            username=credentials.username, password=credentials.env.get("TWINE_PASSWORD"),
            dry_run=args.dry_run, log=lambda text: print(credentials.redact(text), flush=True),
            upload_timeout=args.upload_timeout, index_timeout=args.index_timeout,
        )  # fmt: skip
    counts = {o: list(outcomes.values()).count(o) for o in dict.fromkeys(outcomes.values())}
    print(", ".join(f"{n} {what}" for what, n in counts.items()))
    return 0


PUBLISH_LOCK = ".publish.lock"
PUBLISH_LOCK_WAIT_S = 600.0


def _publish(
    args: argparse.Namespace,
    plan: Plan,
    *,
    wheelhouse: Path,
    version: str,
    repository: str,
    index_url: str,
    credentials: Credentials,
) -> int:
    matrix = plan.loaded.matrix
    candidates = preflight(plan, wheelhouse, version, variants=args.variant)
    print(
        f"preflight passed: {len(candidates)} wheels of {len(plan.variants)} variant(s) for {version}\n"
        f"{'dry run: ' if args.dry_run else ''}publishing to {index.redact_url(repository)} "
        f"(index {index.redact_url(index_url)}) as {credentials.who}"
    )
    for name, why in plan.held_back.items():
        print(f"held back (not published): {name} ({matrix.variants[name].distribution}): {why}")
    uploader = Uploader(
        repository=repository,
        index_url=index_url,
        credentials=credentials,
        tries=args.tries,
        backoff=args.backoff,
        upload_timeout=args.upload_timeout,
        index_timeout=args.index_timeout,
        log=lambda text: print(credentials.redact(text), flush=True),
    )
    try:
        publish(candidates, uploader, dry_run=args.dry_run)
    except index.IndexUnavailable as exc:
        msg = f"{exc}; nothing more was uploaded: re-run when the index answers"
        raise PublishError(msg) from None
    return 0
