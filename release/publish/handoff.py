"""The checks every hand-off of the release set makes: re-hash the wheel, re-validate its report.

A report is never trusted alone. At each hand-off (release-checks, `dist/`, preflight, upload,
the index listing, a downloaded release) the wheel's bytes are hashed again and compared with the
report's sha256, and the report itself is re-validated: its schema version, every registered
rule present with a known status, `ok` and `releasable` what those statuses say, release mode,
and releasable. Preflight also verifies the exact bytes again and compares the outcome, rule by
rule, with the report (`compare_outcome`). A disagreement names both digests.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from release.errors import PublishError
from release.inspect.report import SCHEMA_VERSION, VerifyReport
from release.inspect.rules import RULE_IDS
from release.inspect.rules.registry import STATUSES, registered
from release.wheel.files import file_sha256
from release.wheel.names import report_path

REPORT_LIMIT = 16 << 20
"""A verify report larger than this is refused before it is parsed."""


class DigestMismatch(PublishError):
    """The bytes handed on are not the bytes that were verified."""


def sha256_of(path: Path) -> str:
    try:
        return file_sha256(path)
    except OSError as exc:
        msg = f"{path}: cannot read it to hash it ({exc.strerror})"
        raise PublishError(msg) from None


def mismatch(where: str, verified: str, found: str) -> str:
    """The one line a digest mismatch stops the release with."""
    return (
        f"{where}: sha256 {found} is not the verified sha256 {verified}: the bytes changed after "
        "verification; the release stops"
    )


def require_digest(path: Path, verified: str, where: str | None = None) -> None:
    """Re-hash `path`; `DigestMismatch` naming both digests when it is not `verified`."""
    found = sha256_of(path)
    if found != verified:
        raise DigestMismatch(mismatch(where or str(path), verified, found))


def load_report(report_file: Path) -> tuple[dict[str, object] | None, str, list[str]]:
    """(the report, the sha256 of its bytes, problems): read once, bounded."""
    where = f"{report_file.parent.name}/{report_file.name}"
    try:
        with report_file.open("rb") as fh:
            data = fh.read(REPORT_LIMIT + 1)
    except OSError as exc:
        return None, "", [f"{where}: cannot read the verify report ({exc.strerror})"]
    if len(data) > REPORT_LIMIT:
        return None, "", [f"{where}: over {REPORT_LIMIT >> 20} MiB: not a verify report"]
    digest = hashlib.sha256(data).hexdigest()
    try:
        report = json.loads(data)
    except (ValueError, RecursionError) as exc:
        return None, digest, [f"{where}: not a readable JSON report ({str(exc)[:80]})"]
    if not isinstance(report, dict):
        return None, digest, [f"{where}: not a verify report (a JSON object)"]
    return report, digest, []


def validate_report(report: Mapping[str, object], wheel: Path, sha: str) -> list[str]:
    """Every reason the report does not vouch, for release, for `wheel` whose bytes hash to `sha`."""
    where = f"{wheel.parent.name}/{report_path(wheel).name}"
    problems: list[str] = []
    if report.get("schema_version") != SCHEMA_VERSION:
        problems.append(
            f"{where}: schema_version {report.get('schema_version')!r}, not {SCHEMA_VERSION} "
            "(verify it again with this toolkit)"
        )
    if report.get("wheel") != wheel.name:
        problems.append(f"{where}: reports on {str(report.get('wheel'))[:80]!r}, not on {wheel.name}")
    reported = report.get("sha256")
    if reported != sha:
        shown = reported if isinstance(reported, str) else repr(reported)[:80]
        problems.append(
            f"{where}: the report's sha256 {shown} is not the wheel's sha256 {sha} "
            "(the wheel or its report changed after verification)"
        )
    size = report.get("size")
    if size is not None and wheel.is_file() and size != wheel.stat().st_size:
        problems.append(f"{where}: reports {size!r} bytes, the wheel has {wheel.stat().st_size}")
    if report.get("release_mode") is not True:
        problems.append(
            f"{where}: not a release-mode report (run `python -m release verify --release --write-reports`)"
        )
    statuses = _rule_statuses(where, report.get("rules"), problems)
    failed = sorted(r for r, s in statuses.items() if s == "fail")
    warned = sorted(r for r, s in statuses.items() if s == "warn")
    if report.get("ok") is not (not failed):
        problems.append(
            f"{where}: says ok {report.get('ok')!r}, but its rules failed: {', '.join(failed) or 'none'}"
        )
    if report.get("releasable") is not (not failed and not warned):
        problems.append(
            f"{where}: says releasable {report.get('releasable')!r}, but its rules say "
            f"{'not' if failed or warned else ''} releasable".replace("  ", " ")
        )
    if failed or warned or report.get("releasable") is not True:
        shown = ", ".join(failed + warned)
        problems.append(f"{where}: not releasable{f' (failed or warned: {shown})' if shown else ''}")
    return problems


def _rule_statuses(where: str, rules: object, problems: list[str]) -> dict[str, str]:
    """Rule id -> status of a report's `rules`; what is wrong with them is added to `problems`."""
    statuses: dict[str, str] = {}
    if not isinstance(rules, list):
        problems.append(f"{where}: rules is {type(rules).__name__}, not a list of rule results")
        return statuses
    for rule in rules:
        known = isinstance(rule, dict) and rule.get("id") in RULE_IDS and rule.get("status") in STATUSES
        if not known or not isinstance(rule, dict):
            problems.append(f"{where}: a rule result that is not one of the registry's: {str(rule)[:80]}")
            continue
        statuses[str(rule["id"])] = str(rule["status"])
    missing = [r for r in RULE_IDS if r not in statuses]
    if missing or len(rules) != len(RULE_IDS):
        problems.append(f"{where}: rules missing or repeated (missing: {', '.join(missing) or 'none'})")
    return statuses


def check_wheel(wheel: Path, sha: str | None = None) -> tuple[dict[str, object] | None, str, list[str]]:
    """(report, report digest, problems) of `wheel` against its report beside it."""
    report_file = report_path(wheel)
    if not report_file.is_file():
        rel = f"{wheel.parent.name}/{wheel.name}"
        hint = "run `release verify --release --write-reports`"
        return None, "", [f"{rel}: no verify report {report_file.name} ({hint})"]
    report, digest, problems = load_report(report_file)
    if report is None:
        return None, digest, problems
    return report, digest, validate_report(report, wheel, sha if sha is not None else sha256_of(wheel))


def compare_outcome(report: Mapping[str, object], fresh: VerifyReport) -> list[str]:
    """Where a fresh verify of the exact bytes disagrees with the report."""
    where = fresh.wheel.name
    problems = []
    if fresh.sha256 != report.get("sha256"):
        problems.append(mismatch(where, str(report.get("sha256")), fresh.sha256))
    rules = report.get("rules")
    listed = rules if isinstance(rules, list) else []
    said = {str(r.get("id")): r.get("status") for r in listed if isinstance(r, dict)}
    # A rule across the release's wheels (consistency) is not-applicable in the report a build job
    # wrote for its wheel alone, and judged only now, over the whole set: a fail shows below.
    across = {rule.id for rule in registered() if rule.across is not None}
    differ = [
        f"{r.id} {said.get(r.id)!r} -> {r.status!r}"
        for r in fresh.rules
        if said.get(r.id) != r.status and not (r.id in across and said.get(r.id) == "not-applicable")
    ]
    if differ:
        problems.append(f"{where}: verified again, the outcome differs from its report: {'; '.join(differ)}")
    if not fresh.releasable:
        bad = [r.id for r in fresh.rules if r.status in ("fail", "warn")]
        problems.append(f"{where}: verified again, not releasable ({', '.join(bad)})")
    return problems
