"""The release-day checks of a downloaded set, run as one stage (`release release-checks`): the
checks of `release_day`, the set verified once more, then the checked wheels copied into the
upload's directory and the release manifest written.

With `dist`, once every check passes the checked wheels are copied into it (flat), the directory
the upload reads: what is uploaded is exactly what was checked.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import yaml

from release import atomic, table
from release.config.machines import machine_of_tag
from release.config.matrix import LoadedMatrix
from release.errors import PublishError, UsageError
from release.plan.inputs import environment
from release.plan.machine import machine_of
from release.plan.resolve import ResolvedVariant
from release.plan.steps import BuildStep, Plan
from release.plan.version import route
from release.publish import handoff, index, manifest
from release.publish.preflight import reverify
from release.publish.release_day import Publisher, run_checks
from release.publish.upload import Candidate
from release.wheel.files import not_regular, open_regular
from release.wheel.names import InvalidWheelName, parse_wheel_name, split_tag

InputsOf = Callable[[Mapping[str, ResolvedVariant]], dict[str, object]]
"""What a rebuild needs of these variants, for the manifest (`release.reproduce.inputs.collect`)."""


def check_release(
    loaded: LoadedMatrix,
    plan: Plan,
    variants: Sequence[ResolvedVariant],
    wheelhouse: Path,
    *,
    tag: str,
    version: str,
    repository: str | None = None,
    index_url: str | None = None,
    repo: str | None = None,
    workflow: Path | None = None,
    size_limit: int | None = None,
    timeout: float = index.DEFAULT_TIMEOUT,
    dist: Path | None = None,
    manifest_path: Path | None = None,
    inputs_of: InputsOf,
    say: Callable[[str], None] = print,
) -> None:
    """Run the release-day checks of `variants` (of `plan`) in `wheelhouse` for `tag` (its
    `version`); when they pass, verify the set again,
    copy it into `dist` and write its manifest to `manifest_path` (each when given). Raises
    `PublishError` listing every problem."""
    names = [v.name for v in variants]
    if not wheelhouse.is_dir():
        msg = f"{wheelhouse}: no such directory (download the build artifacts into it first)"
        raise UsageError(msg)
    repository = repository or route(loaded.matrix, version)
    index_url = index_url or (index.simple_url_for(repository) if repository else None)
    workflow = workflow or loaded.root / ".github" / "workflows" / "release.yml"
    checks = run_checks(
        plan.builds, wheelhouse, version, variants=variants, index_url=index_url,
        repository=repo or "", size_limit=size_limit, timeout=timeout,
        publisher=publisher(workflow, repo, environment(loaded.matrix, version)),
    )  # fmt: skip
    rows = [(c.id, "pass" if c.ok else "FAIL") for c in checks]
    say(table.render(("check", "result"), rows, title=f"Release-day checks of {tag}"))
    for name, why in plan.held_back.items():
        say(f"  held back (not expected, not released): {name}: {why}")
    for check in checks:
        for line in check.notes:
            say(f"  {check.id}: {line}")
    if index_url is None:
        say(f"  {tag}: a pre-release that is not published (publish.prerelease: skip): no index to ask")
    problems = [f"  {c.id}: {p}" for c in checks for p in c.problems]
    if problems:
        msg = f"{len(problems)} release-day problem(s) for {tag}:\n" + "\n".join(problems)
        raise PublishError(msg)
    wheels = [w for name in names for w in sorted((wheelhouse / name).glob("*.whl"))]
    entries = [_entry(wheel, plan.builds) for wheel in wheels]
    # A report is never trusted alone: the exact bytes are verified again, as one release, before
    # anything is copied or listed (a forged, self-consistent report stops here).
    again = reverify(plan, candidates_of(entries, wheels), version)
    if again:
        msg = f"{len(again)} problem(s) verifying the set again for {tag}; nothing was copied:\n" + "\n".join(
            f"  - {p}" for p in again
        )
        raise PublishError(msg)
    if dist:
        copy_checked(entries, wheels, dist, say)
        say(f"{len(wheels)} checked wheel(s) copied into {dist}, each re-hashed")
    if manifest_path:
        held = {
            name: {"distribution": loaded.matrix.variants[name].distribution, "reason": why}
            for name, why in plan.held_back.items()
        }
        document = manifest.assemble(
            entries, plan.variants, tag=tag, version=version, held_back=held,
            inputs=inputs_of(plan.variants),
        )  # fmt: skip
        manifest.write(manifest_path, document)
        say(f"release manifest of {len(entries)} wheel(s): {manifest_path}")


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


def step_of(wheel_name: str, variant: str, steps: Sequence[BuildStep]) -> BuildStep | None:
    """The build step of the plan that makes this wheel (same variant, interpreter tag and machine)."""
    try:
        parsed = parse_wheel_name(wheel_name)
    except InvalidWheelName:
        return None
    pairs = {split_tag(t)[:2] for t in parsed.tags}  # (cp314, cp314t): a t wheel is not cp314's
    machines = {machine_of_tag(p) for p in parsed.platforms}
    mine = (s for s in steps if s.variant.name == variant and machine_of(s.variant) in machines)
    return next((s for s in mine if s.wheel_tags in pairs), None)


def candidates_of(entries: Sequence[manifest.Entry], wheels: Sequence[Path]) -> list[Candidate]:
    """The checked wheels as preflight verifies them again: each with the identifier of the step
    that made it, whose variant carries that step's machine (an aarch64 wheel's floor)."""
    return [
        Candidate(e.identifier, e.variant, e.distribution, wheel, e.sha256)
        for e, wheel in zip(entries, wheels, strict=True)
    ]


def _entry(wheel: Path, steps: tuple[BuildStep, ...]) -> manifest.Entry:
    """The manifest entry of a checked wheel: its bytes and its report hashed once more, the build
    step that made it and the compilers its report found."""
    report, report_digest, problems = handoff.check_wheel(wheel)
    if report is None or problems:
        raise handoff.DigestMismatch("; ".join(problems))
    step = step_of(wheel.name, wheel.parent.name, steps)
    compilers = report.get("compilers")
    return manifest.Entry(
        name=wheel.name, variant=wheel.parent.name, distribution=str(report.get("distribution")),
        size=wheel.stat().st_size, sha256=str(report["sha256"]), report_sha256=report_digest,
        identifier=step.identifier if step else "",
        compilers=tuple(str(c) for c in compilers) if isinstance(compilers, list) else (),
    )  # fmt: skip


def copy_checked(
    entries: list[manifest.Entry], wheels: list[Path], dist: Path, say: Callable[[str], None] = print
) -> None:
    """`dist` becomes exactly the checked set: a file that is not one of it is refused, and each
    copy is written under a temporary name, re-hashed against the verified sha256, then renamed.
    Our own temporary files left by a killed run are removed first; an entry that is a link (or
    anything but a regular file) is replaced by a checked regular copy, never followed."""
    try:
        dist.mkdir(parents=True, exist_ok=True)
        for leftover in atomic.remove_leftovers(dist):
            say(f"  removed {leftover.name}: a temporary copy of an interrupted run")
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
