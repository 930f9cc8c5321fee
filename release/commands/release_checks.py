"""`release release-checks`: the release-day checks of a downloaded set (see `release.publish.release_day`).

    release release-checks --tag v0.2.0 [--repository URL] [--dist dist] wheelhouse

With `--dist DIR`, once every check passes the checked wheels are copied into DIR (flat), the
directory the upload reads: what is uploaded is exactly what was checked.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
from pathlib import Path

import yaml

from release import atomic, table
from release.config.matrix import LoadedMatrix
from release.errors import PublishError, UsageError
from release.plan.inputs import environment
from release.plan.steps import BuildStep, make_plan
from release.plan.version import route, tag_from_env, version_from_tag
from release.publish import handoff, index, manifest
from release.publish.preflight import reverify
from release.publish.release_day import Publisher, run_checks
from release.publish.upload import Candidate
from release.reproduce import inputs
from release.wheel.files import not_regular, open_regular


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("wheelhouse", type=Path, help="holds <variant>/*.whl with their verify reports")
    add("--tag", help="the release tag (default: the pushed tag in GitHub Actions)")
    add("--variant", action="append", help="only this variant (repeatable; a backfill)")
    add(
        "--repository",
        metavar="URL",
        help="upload URL of the index (default: the matrix's route for the tag)",
    )
    add("--index-url", metavar="URL", help="simple-API URL of that index (derived for PyPI and pypiserver)")
    add("--repo", default=os.environ.get("GITHUB_REPOSITORY"), metavar="OWNER/NAME",
        help="the GitHub repository that publishes (default: GITHUB_REPOSITORY)")  # fmt: skip
    add("--workflow", type=Path, help="the publishing workflow (default: .github/workflows/release.yml)")
    add("--size-limit", type=int, metavar="BYTES", help="the index's per-file limit (default: 100 MiB)")
    add(
        "--dist", type=Path, metavar="DIR", help="copy the checked wheels here (flat) when every check passes"
    )
    add("--timeout", type=float, default=index.DEFAULT_TIMEOUT, metavar="SECONDS",
        help="deadline of each whole request to the index (default: %(default)s)")  # fmt: skip
    add("--manifest", type=Path, metavar="FILE",
        help="write the release manifest of the checked set here (never into --dist)")  # fmt: skip


def publisher(workflow: Path, repo: str | None, planned_environment: str | None = None) -> Publisher:
    """The job that uploads to the index with `id-token: write` in the workflow, and its environment
    (`planned_environment` where the workflow takes it from the plan, `${{ ... }}`)."""
    environment = None
    try:
        doc = yaml.safe_load(workflow.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        doc = None
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    for job in (jobs or {}).values():
        if not isinstance(job, dict) or (job.get("permissions") or {}).get("id-token") != "write":
            continue
        steps = job.get("steps")
        listed = steps if isinstance(steps, list) else []
        uses = [str(st.get("uses", "")) for st in listed if isinstance(st, dict)]
        if not any("pypi-publish" in u for u in uses):
            continue  # id-token for something else (the manifest's attestation)
        env = job.get("environment")
        environment = str(env.get("name") if isinstance(env, dict) else env) if env else None
    if environment is not None and "${{" in environment:
        environment = planned_environment
    return Publisher(repository=repo or "OWNER/NAME", workflow=workflow.name, environment=environment)


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    tag = args.tag or tag_from_env()
    if not tag:
        msg = "release-checks needs a release tag: pass --tag v1.2.3 (in GitHub Actions, the pushed tag)"
        raise UsageError(msg)
    version = version_from_tag(tag, loaded.matrix.publish.tag_pattern)
    plan = make_plan(loaded)
    names = list(dict.fromkeys(args.variant or plan.variants))
    variants = [plan.variant(name) for name in names]  # an unknown name: a usage error naming the known
    if not args.wheelhouse.is_dir():
        msg = f"{args.wheelhouse}: no such directory (download the build artifacts into it first)"
        raise UsageError(msg)
    repository = args.repository or route(loaded.matrix, version)
    index_url = args.index_url or (index.simple_url_for(repository) if repository else None)
    workflow = args.workflow or loaded.root / ".github" / "workflows" / "release.yml"
    checks = run_checks(
        plan.builds, args.wheelhouse, version, variants=variants, index_url=index_url,
        repository=args.repo or "", size_limit=args.size_limit, timeout=_timeout(args.timeout),
        publisher=publisher(workflow, args.repo, environment(loaded.matrix, version)),
    )  # fmt: skip
    rows = [(c.id, "pass" if c.ok else "FAIL") for c in checks]
    print(table.render(("check", "result"), rows, title=f"Release-day checks of {tag}"))
    for name, why in plan.held_back.items():
        print(f"  held back (not expected, not released): {name}: {why}")
    for check in checks:
        for line in check.notes:
            print(f"  {check.id}: {line}")
    if index_url is None:
        print(f"  {tag}: a pre-release that is not published (publish.prerelease: skip): no index to ask")
    problems = [f"  {c.id}: {p}" for c in checks for p in c.problems]
    if problems:
        msg = f"{len(problems)} release-day problem(s) for {tag}:\n" + "\n".join(problems)
        raise PublishError(msg)
    wheels = [w for name in names for w in sorted((args.wheelhouse / name).glob("*.whl"))]
    entries = [_entry(wheel, plan.builds) for wheel in wheels]
    # A report is never trusted alone: the exact bytes are verified again, as one release, before
    # anything is copied or listed (a forged, self-consistent report stops here).
    candidates = [
        Candidate(e.name, e.variant, e.distribution, wheel, e.sha256)
        for e, wheel in zip(entries, wheels, strict=True)
    ]
    again = reverify(plan, candidates, version)
    if again:
        msg = f"{len(again)} problem(s) verifying the set again for {tag}; nothing was copied:\n" + "\n".join(
            f"  - {p}" for p in again
        )
        raise PublishError(msg)
    if args.dist:
        copy_checked(entries, wheels, args.dist)
        print(f"{len(wheels)} checked wheel(s) copied into {args.dist}, each re-hashed")
    if args.manifest:
        held = {
            name: {"distribution": loaded.matrix.variants[name].distribution, "reason": why}
            for name, why in plan.held_back.items()
        }
        document = manifest.assemble(
            entries, plan.variants, tag=tag, version=version, held_back=held,
            inputs=inputs.collect(loaded.root, plan.variants),
        )  # fmt: skip
        manifest.write(args.manifest, document)
        print(f"release manifest of {len(entries)} wheel(s): {args.manifest}")
    return 0


def _timeout(seconds: float) -> float:
    if not (math.isfinite(seconds) and seconds > 0):
        msg = f"--timeout must be a number of seconds > 0, not {seconds!r}"
        raise UsageError(msg)
    return seconds


def _entry(wheel: Path, steps: tuple[BuildStep, ...]) -> manifest.Entry:
    """The manifest entry of a checked wheel: its bytes and its report hashed once more, the build
    step that made it and the compilers its report found."""
    report, report_digest, problems = handoff.check_wheel(wheel)
    if report is None or problems:
        raise handoff.DigestMismatch("; ".join(problems))
    step = inputs.step_of(wheel.name, wheel.parent.name, steps)
    compilers = report.get("compilers")
    return manifest.Entry(
        name=wheel.name, variant=wheel.parent.name, distribution=str(report.get("distribution")),
        size=wheel.stat().st_size, sha256=str(report["sha256"]), report_sha256=report_digest,
        identifier=step.identifier if step else "",
        compilers=tuple(str(c) for c in compilers) if isinstance(compilers, list) else (),
    )  # fmt: skip


def copy_checked(entries: list[manifest.Entry], wheels: list[Path], dist: Path) -> None:
    """`dist` becomes exactly the checked set: a file that is not one of it is refused, and each
    copy is written under a temporary name, re-hashed against the verified sha256, then renamed.
    Our own temporary files left by a killed run are removed first; an entry that is a link (or
    anything but a regular file) is replaced by a checked regular copy, never followed."""
    try:
        dist.mkdir(parents=True, exist_ok=True)
        for leftover in atomic.remove_leftovers(dist):
            print(f"  removed {leftover.name}: a temporary copy of an interrupted run")
        wanted = {e.name: e for e in entries}
        extra = sorted(p.name for p in dist.iterdir() if p.name not in wanted)
        if extra:
            msg = (
                f"{dist}: holds {', '.join(extra)}, which is not in the checked set; the upload reads "
                f"{dist} whole, so it must hold exactly the checked wheels (remove them)"
            )
            raise PublishError(msg)
        for wheel in wheels:
            entry = wanted[wheel.name]
            target = dist / wheel.name
            if not target.is_symlink() and not_regular(target) is None:
                handoff.require_digest(target, entry.sha256, str(target))
                continue
            with open_regular(wheel) as source, atomic.writing(target) as (out, scratch):
                shutil.copyfileobj(source, out, 1 << 20)
                out.flush()
                handoff.require_digest(scratch, entry.sha256, f"{target} (copied from {wheel})")
    except OSError as exc:
        msg = f"{dist}: cannot write the checked set ({exc.strerror})"
        raise PublishError(msg) from None
