"""`python -m release publish`: preflight the whole set, then upload it idempotently.

Preflight is all or nothing: every variant x Python of the matrix must be in
`wheelhouse/<variant>/`, named and versioned as the tag says, with a passing release-mode verify
report whose sha256 is the file's, and `twine check --strict` must pass; otherwise nothing is
uploaded and every problem is listed. The upload asks the index (simple API) what it holds: a
file with the same sha256 is skipped, a different one is a conflict that stops the run before
any upload, the rest go up one file per twine call, with bounded retries that re-check the index
first (an upload that landed before the connection dropped is recognised, not repeated).

Credentials come from the environment only: `TWINE_USERNAME`/`TWINE_PASSWORD`, or
`PYPI_API_TOKEN` (username `__token__`), or trusted publishing in GitHub Actions, which twine
(>= 6.1) performs itself when `ACTIONS_ID_TOKEN_REQUEST_URL` is set and no password is given.
Secrets are removed from everything this command prints. The upload machinery (credentials,
twine, retries) lives in `release.publish.upload`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from release import process, table
from release.config.machines import machine_of_tag
from release.config.pythons import python
from release.errors import PublishError, ReleaseError
from release.inspect.verify import verify_release
from release.plan.machine import machine_of
from release.plan.resolve import ResolvedVariant
from release.plan.steps import BuildStep, Plan
from release.publish import handoff, index
from release.publish.redact import redact_text
from release.publish.upload import Candidate, Outcome, Uploader, clean_output
from release.wheel.archive import WheelReadError, read_metadata
from release.wheel.files import file_sha256, not_regular, walk_files
from release.wheel.names import (
    REPORT_SUFFIX,
    InvalidWheelName,
    is_report,
    parse_wheel_name,
    report_path,
    report_wheel,
    split_tag,
)

# ---------------------------------------------------------------------------------------------
# Preflight


def _wheel_metadata(path: Path) -> tuple[str, str]:
    """(Name, Version) from the wheel's `*.dist-info/METADATA`."""
    headers = read_metadata(path)
    return headers.get("Name", ""), headers.get("Version", "")


def _check_report(wheel: Path, sha: str, variant: str, distribution: str) -> list[str]:
    """The report beside `wheel`, re-validated (schema, rules, ok/releasable, sha256 of `sha`)."""
    report, _digest, problems = handoff.check_wheel(wheel, sha)
    if report is None:
        return problems
    where = f"{wheel.parent.name}/{report_path(wheel).name}"
    reported_dist = report.get("distribution")
    if isinstance(reported_dist, str) and canonicalize_name(reported_dist) != canonicalize_name(distribution):
        problems.append(f"{where}: verified as {reported_dist}, not {distribution}")
    if report.get("variant") not in (None, variant):
        problems.append(f"{where}: verified as variant {report.get('variant')!r}, not {variant!r}")
    return problems


def reverify(plan: Plan, candidates: Sequence[Candidate], version: str) -> list[str]:
    """Verify the exact bytes about to be sent again, as one release, and compare each outcome
    with its report: a report is never trusted alone."""
    if not candidates:
        return []
    try:
        fresh = verify_release(
            [(c.path, _variant_of(plan, c)) for c in candidates],
            variants=plan.variants,
            matrix=str(plan.loaded.path),
            release=True,
            expected_version=version,
        )
    except ReleaseError as exc:
        return [f"verifying the set again failed: {exc}"]
    problems = []
    for candidate, report in zip(candidates, fresh, strict=True):
        saved, _digest, _ = handoff.load_report(report_path(candidate.path))
        problems.extend(handoff.compare_outcome(saved or {}, report))
        if report.sha256 != candidate.sha256:
            problems.append(handoff.mismatch(candidate.filename, candidate.sha256, report.sha256))
    return problems


def _file_name_stem(distribution: str, version: str, step: BuildStep) -> str:
    interpreter, abi, machine = _step_key(step)
    return (
        f"{canonicalize_name(distribution).replace('-', '_')}-{version}-{interpreter}-{abi}-*_{machine}.whl"
    )


def _variant_of(plan: Plan, candidate: Candidate) -> ResolvedVariant:
    """The candidate's variant with its step's machine (the floor an aarch64 wheel is held to)."""
    step = next((s for s in plan.builds if s.identifier == candidate.step), None)
    return step.variant if step is not None else plan.variants[candidate.variant]


def _step_key(step: BuildStep) -> tuple[str, str, str]:
    """(interpreter, abi, machine) of the wheel a step makes: (cp311, cp311, x86_64), or (cp312,
    abi3, aarch64) for a step whose one abi3 wheel serves every Python from 3.12 on."""
    return (*step.wheel_tags, machine_of(step.variant))


def _wheel_key(tag: str) -> tuple[str, str, str]:
    interpreter, abi, platform = split_tag(tag)
    return interpreter, abi, machine_of_tag(platform) or platform


def _key_text(key: tuple[str, str, str]) -> str:
    """`cp312-abi3 aarch64`: the key for a person."""
    return f"{key[0]}-{key[1]} {key[2]}"


def _unexpected(
    rel: str, keys: set[tuple[str, str, str]], variant_steps: Sequence[BuildStep], plan: Plan
) -> str:
    """Why a wheel of the variant's distribution matches none of its steps."""
    built = ", ".join(sorted(_key_text(k) for k in keys))
    abi3 = next((s for s in variant_steps if s.abi3), None)
    # The per-Python wheels the abi3 one replaces (cp313-cp313): never a t wheel (cp314-cp314t).
    served = {f"{python(p).interpreter_tag}-{python(p).abi_tag}" for p in abi3.serves} if abi3 else set()
    variant = variant_steps[0].variant if variant_steps else None
    if abi3 is not None and any(f"{interpreter}-{abi}" in served for interpreter, abi, _ in keys):
        return (
            f"{rel}: a {built} wheel, but variant {abi3.variant.name!r} has stable_abi {abi3.python}: one "
            f"{_key_text(_step_key(abi3))} wheel serves Python {', '.join(abi3.serves)} (remove this one)"
        )
    if any(abi == "abi3" for _, abi, _ in keys) and variant is not None:
        expected = _key_text(_step_key(abi3)) if abi3 is not None else "a wheel per Python"
        return (
            f"{rel}: a {built} wheel, but variant {variant.name!r} expects {expected} "
            f"(stable_abi: {variant.stable_abi or 'off'})"
        )
    return (
        f"{rel}: built for {built}, which the matrix does not list "
        f"(python: {', '.join(plan.loaded.matrix.python)})"
    )


def collect(
    plan: Plan, wheelhouse: Path, version: str, *, variants: Sequence[str] | None = None
) -> tuple[list[Candidate], list[str]]:
    """The expected set found in `wheelhouse`, and every problem with it (without twine).

    `variants` narrows the expected set (a backfill of one variant); by default it is every variant
    of the plan: the matrix's, less those it holds back (whose wheels are a problem here).
    """
    steps = tuple(s for s in plan.builds if not variants or s.variant.name in variants)
    wanted_version = Version(version)
    if not wheelhouse.is_dir():
        return [], [f"{wheelhouse}: no such directory (build the wheels first: nox -s build_<variant>)"]
    problems = _stray_entries(plan, wheelhouse)
    found: list[Candidate] = []
    for variant_name, variant in plan.variants.items():
        if variants and variant_name not in variants:
            continue
        expected = _VariantDirectory(
            plan,
            variant_name,
            variant,
            {_step_key(s): s for s in steps if s.variant.name == variant_name},
            version,
            wanted_version,
        )
        found.extend(_collect_variant(expected, wheelhouse / variant_name, problems))
    return found, problems


def _stray_entries(plan: Plan, wheelhouse: Path) -> list[str]:
    """Wheels in directories of no variant (or of a held-back one), and files beside the directories."""
    problems: list[str] = []
    for entry in sorted(wheelhouse.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir() and entry.name in plan.held_back:
            if walk_files(entry, ".whl", links=True):
                problems.append(
                    f"{entry.name}/: holds wheels, but the variant is held back "
                    f"({plan.held_back[entry.name]}): remove them, or remove its held_back to release it"
                )
        elif entry.is_dir() and entry.name not in plan.loaded.matrix.variants:
            if walk_files(entry, ".whl", links=True):
                problems.append(f"{entry.name}/: not a variant of {plan.loaded.path.name}, but holds wheels")
        elif entry.is_file():
            problems.append(f"{entry.name}: unexpected file outside the <variant>/ directories")
    return problems


@dataclass(frozen=True)
class _VariantDirectory:
    """What one variant's directory of the wheelhouse must hold: a wheel per step, of `version`."""

    plan: Plan
    name: str
    variant: ResolvedVariant
    steps: dict[tuple[str, str, str], BuildStep]
    version: str
    wanted_version: Version


def _collect_variant(expected: _VariantDirectory, directory: Path, problems: list[str]) -> list[Candidate]:
    """The candidates in one variant's directory; its problems are added to `problems`."""
    found: list[Candidate] = []
    seen: dict[tuple[str, str, str], list[Path]] = {}
    files = sorted(directory.iterdir()) if directory.is_dir() else []
    for path in files:
        matching, candidate = _examine(expected, path, problems)
        for key in matching:
            seen.setdefault(key, []).append(path)
        if candidate is not None:
            found.append(candidate)
    problems.extend(_coverage(expected, seen))
    return found


def _examine(
    expected: _VariantDirectory, path: Path, problems: list[str]
) -> tuple[list[tuple[str, str, str]], Candidate | None]:
    """The step keys a file of the variant's directory is a wheel for, and its candidate when its
    report vouches for it; what is wrong with it is added to `problems`."""
    rel = f"{expected.name}/{path.name}"
    if is_report(path):
        if not report_wheel(path).is_file():
            problems.append(f"{rel}: a verify report without its wheel")
        return [], None
    if path.is_dir() or not path.name.endswith(".whl"):
        problems.append(f"{rel}: unknown file (only wheels and their {REPORT_SUFFIX} belong here)")
        return [], None
    refused = not_regular(path)
    if refused:
        problems.append(f"{rel}: {refused}: only a regular file is read as a wheel (remove it)")
        return [], None
    try:
        parsed = parse_wheel_name(path)
    except InvalidWheelName as exc:
        problems.append(f"{rel}: not a valid wheel file name ({exc})")
        return [], None
    name, file_version = parsed.distribution, Version(parsed.version)
    distribution = expected.variant.distribution
    if name != canonicalize_name(distribution):
        problems.append(
            f"{rel}: distribution {name} is not {distribution}, the distribution of variant {expected.name!r}"
        )
        return [], None
    if file_version != expected.wanted_version:
        problems.append(f"{rel}: version {file_version} does not match the tag's version {expected.version}")
        return [], None
    keys = {_wheel_key(t) for t in parsed.tags}
    matching = sorted(k for k in keys if k in expected.steps)
    if not matching:
        problems.append(_unexpected(rel, keys, list(expected.steps.values()), expected.plan))
        return [], None
    try:
        meta_name, meta_version = _wheel_metadata(path)
    except WheelReadError as exc:
        problems.append(f"{rel}: unreadable wheel ({exc})")
        return [], None
    if canonicalize_name(meta_name) != name or meta_version != str(file_version):
        problems.append(f"{rel}: its METADATA says {meta_name} {meta_version}: the file was renamed")
        return [], None
    sha = file_sha256(path)
    report_problems = _check_report(path, sha, expected.name, distribution)
    problems.extend(report_problems)
    if report_problems:
        return matching, None
    step = expected.steps[matching[0]]
    return matching, Candidate(step.identifier, expected.name, distribution, path, sha)


def _coverage(expected: _VariantDirectory, seen: dict[tuple[str, str, str], list[Path]]) -> list[str]:
    """Steps of the variant with no wheel, or with more than one."""
    problems: list[str] = []
    for key, step in expected.steps.items():
        paths = seen.get(key, [])
        if not paths:
            pythons = f"Python {', '.join(step.serves)}" if step.abi3 else f"Python {step.python}"
            problems.append(
                f"{expected.name}/: missing {step.identifier} ({pythons}): no "
                f"{_file_name_stem(expected.variant.distribution, expected.version, step)}"
            )
        elif len(paths) > 1:
            problems.append(
                f"{expected.name}/: {len(paths)} wheels for {step.identifier}: "
                f"{', '.join(p.name for p in paths)} (keep one)"
            )
    return problems


TWINE_CHECK_TIMEOUT = 300.0
"""Seconds `twine check` may take for the whole set."""


def twine_check(paths: Sequence[Path]) -> list[str]:
    """`twine check --strict` on all files in one call, under a deadline; the problems it reports.
    Only regular files reach twine (the others are problems of their own)."""
    problems = [f"{p}: {why}: not handed to twine" for p in paths if (why := not_regular(p))]
    regular = [p for p in paths if not_regular(p) is None]
    if not regular:
        return problems
    cmd = [sys.executable, "-m", "twine", "check", "--strict", *(str(p) for p in regular)]
    rc, output = process.run_bounded(cmd, timeout=TWINE_CHECK_TIMEOUT)
    if rc == 0:
        return problems
    lines = [
        line.strip()
        for line in clean_output(redact_text(output)).splitlines()
        if line.strip() and not line.rstrip().endswith("PASSED")
    ]
    return [*problems, "twine check --strict failed:\n    " + "\n    ".join(lines)]


def preflight(
    plan: Plan,
    wheelhouse: Path,
    version: str,
    *,
    checker: Callable[[Sequence[Path]], list[str]] = twine_check,
    variants: Sequence[str] | None = None,
) -> list[Candidate]:
    """The complete, checked set; `PublishError` listing every problem otherwise.

    Every report is re-validated, and the wheels are verified again: the outcome must be the
    report's, on bytes whose sha256 is the report's."""
    found, problems = collect(plan, wheelhouse, version, variants=variants)
    if not problems:
        problems.extend(reverify(plan, found, version))
    wheels = sorted(wheelhouse.glob("*/*.whl")) if wheelhouse.is_dir() else []
    if variants:
        wheels = [w for w in wheels if w.parent.name in variants]
    # Only regular files reach twine; the others are problems already (collect names them).
    problems.extend(checker([w for w in wheels if not_regular(w) is None]))
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        msg = (
            f"preflight of {wheelhouse} for {version} found {len(problems)} problem(s); "
            f"nothing was uploaded:\n{lines}"
        )
        raise PublishError(msg)
    return sorted(found, key=lambda c: (c.variant, c.step))


# ---------------------------------------------------------------------------------------------
# Publish


STATUS_TEXT = {
    "upload": "would upload",
    "skip": "skipped (already there)",
    "conflict": "conflict",
    "uploaded": "uploaded",
    "failed": "failed",
    "pending": "not attempted",
    "unverified": "unverified",
}


def summary(outcomes: Sequence[Outcome], *, dry_run: bool = False) -> str:
    rows = []
    for o in outcomes:
        status = STATUS_TEXT[o.status]
        if dry_run and o.status == "skip":
            status = "would skip (already there)"
        rows.append((o.candidate.filename, o.candidate.sha256[:12], status, o.note))
    return table.render(("file", "sha256", "status", "note"), rows)


def publish(candidates: Sequence[Candidate], uploader: Uploader, *, dry_run: bool = False) -> list[Outcome]:
    """Skip what is there, refuse conflicts before any upload, upload the rest in order."""
    log = uploader.log
    redact = uploader.credentials.redact
    listing = uploader.listing(c.project for c in candidates)
    outcomes = [Outcome(c, *uploader.judge(listing[c.project], c)) for c in candidates]
    unverified = [o for o in outcomes if o.status == "unverified"]
    if unverified:
        names = "\n".join(f"  - {o.candidate.filename}: {o.note}" for o in unverified)
        msg = (
            f"cannot confirm {len(unverified)} file(s) on {uploader.index_url}: a name listed without a "
            f"sha256 is not a confirmation, and the file could not be fetched to hash it; nothing was "
            f"uploaded:\n{names}"
        )
        raise PublishError(msg)
    conflicts = [o for o in outcomes if o.status == "conflict"]
    if conflicts:
        log(summary(outcomes, dry_run=True))
        names = "\n".join(f"  - {o.candidate.filename}: {o.note}" for o in conflicts)
        msg = (
            f"{len(conflicts)} file(s) already on {uploader.index_url} with different content; "
            f"nothing was uploaded (a published file can never be replaced: bump the version):\n{names}"
        )
        raise PublishError(msg)
    todo = [o for o in outcomes if o.status == "upload"]
    if dry_run:
        log(summary(outcomes, dry_run=True))
        log(
            f"\ndry run: {len(todo)} file(s) would be uploaded to {index.redact_url(uploader.repository)}, "
            f"{len(outcomes) - len(todo)} already there"
        )
        return outcomes
    if todo and not uploader.credentials.available:
        msg = (
            f"no credentials to upload {len(todo)} file(s): set TWINE_USERNAME and TWINE_PASSWORD, "
            "or PYPI_API_TOKEN, or run in GitHub Actions with `id-token: write` (trusted publishing)"
        )
        raise PublishError(msg)
    for o in todo:
        o.status = "pending"
    for done, o in enumerate(todo):
        log(f"uploading {o.candidate.filename}")
        try:
            result = uploader.upload(o.candidate, done)
        except ReleaseError as exc:
            o.status, o.note = "failed", redact(str(exc))[:80]
            log(summary(outcomes))
            msg = (
                f"{redact(str(exc))}\n{done} file(s) uploaded in this run; re-run the same command to "
                "complete the set (files already on the index are skipped)"
            )
            raise PublishError(msg) from None
        o.status, o.note = result.status, result.note
        if o.status == "conflict":
            log(summary(outcomes))
            msg = (
                f"{o.candidate.filename}: the index now holds a different file under this name "
                f"({o.note}); an index that keeps partial uploads does this. Nothing is overwritten: "
                "remove that file on the index, then re-run"
            )
            raise PublishError(msg)
    log(summary(outcomes))
    uploaded = sum(o.status == "uploaded" for o in outcomes)
    skipped = sum(o.status == "skip" for o in outcomes)
    if uploaded == 0:
        log(f"\nnothing to upload: all {skipped} file(s) were already on {uploader.index_url}")
    else:
        log(f"\n{uploaded} uploaded, {skipped} skipped (already there)")
    log(uploader.totals())
    return outcomes


# ---------------------------------------------------------------------------------------------
# CLI
