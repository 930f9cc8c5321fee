"""The stable ABI: an abi3 wheel is tagged for its variant's floor and uses only the limited API."""

from __future__ import annotations

from release.errors import VerifyError
from release.inspect.rules.registry import Finding, RuleContext, listing, rule
from release.inspect.stableabi import LimitedApiAudit, audit_limited_api
from release.wheel.names import interpreters_of, python_tag, split_tag, tag_python

_version = tag_python


def _dotted(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def _problems(audits: list[LimitedApiAudit], floor: str) -> list[str]:
    problems = []
    for audit in audits:
        if audit.outside:
            problems.append(f"{audit.path} uses {listing(audit.outside)} (not in the limited API)")
        if audit.newer:
            newer = [f"{name} (from {added})" for name, added in audit.newer]
            problems.append(f"{audit.path} uses {listing(newer)}, newer than the floor {floor}")
    return problems


@rule("stable-abi")
def stable_abi(ctx: RuleContext) -> Finding:
    """An abi3 wheel is tagged `cpXY-abi3` for the variant's `stable_abi` and uses only the limited
    API of that version (abi3audit); a per-Python wheel of such a variant is one below the floor."""
    tags = [split_tag(t) for t in ctx.wheel.tags]
    abi3 = sorted({t[0] for t in tags if t[1] == "abi3"})
    interpreters = list(interpreters_of(ctx.wheel.tags))
    declared = ctx.variant.stable_abi if ctx.variant is not None else None
    if ctx.variant is None:
        if not abi3:
            return Finding("not-applicable", "not an abi3 wheel")
        versions = [v for v in map(_version, abi3) if v is not None]
        if not versions:
            return Finding("fail", f"tagged abi3 for {', '.join(abi3)}: no CPython version to audit against")
        floor = _dotted(min(versions))
    elif declared is None:
        if abi3:
            return Finding(
                "fail",
                f"tagged {abi3[0]}-abi3, but variant {ctx.variant.name} builds a wheel per Python "
                "(its stable_abi is off)",
            )
        return Finding("not-applicable", f"variant {ctx.variant.name} declares no stable_abi")
    else:
        floor = declared
        expected = python_tag(declared)
        if not abi3:
            own = [v for v in map(_version, interpreters) if v is not None]
            major, minor = (int(part) for part in declared.split(".")[:2])
            if own and max(own) < (major, minor):
                return Finding(
                    "not-applicable",
                    f"{', '.join(interpreters)} is below the stable ABI floor {declared}: a wheel per Python",
                )
            return Finding(
                "fail",
                f"variant {ctx.variant.name} declares stable_abi {declared}: expected one {expected}-abi3 "
                f"wheel, got {', '.join('-'.join(t[:2]) for t in tags)}",
            )
        if abi3 != [expected]:
            return Finding(
                "fail",
                f"tagged {', '.join(a + '-abi3' for a in abi3)}, but variant {ctx.variant.name} declares "
                f"stable_abi {declared} (expected {expected}-abi3)",
            )
    shared = [e.path for e in ctx.wheel.elf_files if not e.executable]
    if not shared:
        return Finding("warn", f"tagged abi3 for Python {floor}, but the wheel has no shared object to audit")
    try:
        audits = audit_limited_api(ctx.wheel, shared, floor)
    except VerifyError as exc:
        return Finding("fail", f"cannot show that it keeps to the limited API of Python {floor}: {exc}")
    problems = _problems(audits, floor)
    if problems:
        return Finding(
            "fail",
            f"symbols outside the limited API of Python {floor}: {listing(problems)}",
            tuple(a.path for a in audits if not a.ok),
        )
    return Finding(
        "pass",
        f"{len(shared)} shared object{'s use' if len(shared) > 1 else ' uses'} only the limited API of "
        f"Python {floor} (abi3audit)",
    )
