"""A re-verify that costs a hash: the report beside a wheel, reused when it vouches for these bytes.

Every report `release verify` writes carries a `reuse` stamp: the toolkit version, the rule set
(`ruleset`, a digest of the code that reads wheels and judges them), the facts the wheel was judged
against (`facts`: the matrix, the resolved variant, release mode, the expected version, the
policies, the wheels judged with it) and an HMAC of the report's content and stamp keyed by this
user's secret (`release.inspect.stampkey`: a report edited and re-digested by anyone without the
key is never reused; release-checks and publish verify again in any case). A later verify of
a wheel whose sha256 is the report's reuses the report only when it is intact (`reusable`):
bounded, one JSON object of this schema version, the stamp's toolkit, rule set and facts this
run's, its MAC the one this user's key gives, every registered rule once with a known status, `ok` and
`releasable` what those say, and read back into a report that writes exactly the same JSON. Any
other report (another toolkit, another matrix or variant, an edited byte) means a full verify.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path, PurePath

from release import __version__
from release.inspect.report import SCHEMA_VERSION, VerifyReport, ruleset
from release.inspect.rules import RULE_IDS
from release.inspect.rules.registry import STATUSES
from release.wheel.files import open_regular
from release.wheel.names import report_path

REPORT_LIMIT = 16 << 20
"""A report larger than this is not read (it is not one verify writes)."""


def facts_digest(judged: object) -> str:
    """sha256 of `judged` (what a wheel is judged against) written out canonically: the same for
    the same facts in any process (sets sorted, mappings by key, dataclasses field by field)."""
    return hashlib.sha256(_canonical(judged).encode()).hexdigest()


def _canonical(value: object) -> str:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = (f"{f.name}={_canonical(getattr(value, f.name))}" for f in dataclasses.fields(value))
        return f"{type(value).__name__}({','.join(fields)})"
    if isinstance(value, Mapping):
        items = sorted(f"{_canonical(k)}:{_canonical(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, (set, frozenset)):
        return "{" + ",".join(sorted(_canonical(v) for v in value)) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_canonical(v) for v in value) + "]"
    if isinstance(value, (PurePath, enum.Enum)):
        return repr(str(value))
    return repr(value)


def reusable(wheel: Path, facts: str, sha256: Callable[[], str]) -> tuple[VerifyReport | None, str]:
    """(the report beside `wheel`, read back, when it vouches for the wheel's bytes judged against
    `facts`; else None, why not). `sha256` hashes the wheel: called last, once the report would
    vouch, so that a wheel without such a report is not hashed once more before its full verify."""
    target = report_path(wheel)
    try:
        with open_regular(target) as fh:
            data = fh.read(REPORT_LIMIT + 1)
    except FileNotFoundError:
        return None, "no report beside it"
    except OSError as exc:
        return None, f"its report cannot be read ({exc.strerror})"
    if len(data) > REPORT_LIMIT:
        return None, "its report is too large"
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        return None, "its report is not JSON"
    if not isinstance(document, dict):
        return None, "its report is not a JSON object"
    why = _not_intact(document, wheel, facts)
    if why:
        return None, why
    try:
        report = VerifyReport.from_json(document, wheel, reused=True)
    except (KeyError, TypeError, ValueError, StopIteration):
        return None, "its report does not read back"
    if report.to_json() != document:  # its stamp's digest included: an edited byte shows here
        return None, "its report's content is not what its stamp records (edited, or not written by verify)"
    try:
        if sha256() != report.sha256:
            return None, "its bytes are not the reported ones"
    except OSError as exc:
        return None, f"it cannot be hashed ({exc.strerror})"
    return report, ""


def _not_intact(document: Mapping[str, object], wheel: Path, facts: str) -> str:
    """Why the report does not vouch for the wheel under these facts ('' when it may: its bytes
    are hashed last)."""
    mark = document.get("reuse")
    checks = (
        (document.get("schema_version") == SCHEMA_VERSION, "its report has another schema version"),
        (isinstance(mark, dict), "its report carries no reuse stamp"),
        (document.get("wheel") == wheel.name, "its report is another wheel's"),
        (document.get("size") == wheel.stat().st_size, "its size is not the reported one"),
    )
    for holds, why in checks:
        if not holds:
            return why
    assert isinstance(mark, dict)  # noqa: S101 (checked above)
    if mark.get("toolkit") != __version__:
        return f"its report was made by toolkit {str(mark.get('toolkit'))[:40]}, not {__version__}"
    if mark.get("rules") != ruleset():
        return "its report was made by another rule set"
    if mark.get("facts") != facts:
        return "its report was judged against other facts (matrix, variant, mode or version)"
    rules = document.get("rules")
    listed = [r for r in rules if isinstance(r, dict)] if isinstance(rules, list) else []
    statuses = [r.get("status") for r in listed]
    if [r.get("id") for r in listed] != list(RULE_IDS) or not all(s in STATUSES for s in statuses):
        return "its report's rules are not the registry's"
    if document.get("ok") is not ("fail" not in statuses):
        return "its report's ok is not what its rules say"
    if document.get("releasable") is not ("fail" not in statuses and "warn" not in statuses):
        return "its report's releasable is not what its rules say"
    return ""
