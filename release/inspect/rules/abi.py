"""The stable ABI: an abi3 wheel is tagged for its variant's floor and uses only the limited API.

abi3audit judges the limited API of every version through 3.15 (its abi3info data), by symbol
names; the names a module defines itself (`PyInit_x`, PEP 793's `PyModExport_x`) are its hooks,
not API it uses, and are left out (`release.inspect.stableabi`). abi3audit has no mode for the
free-threaded stable ABI (`abi3t`, PEP 803): an abi3t module is checked against what PEP 803 makes
unusable there instead. Its `PyObject` and `PyModuleDef` are opaque, so a module cannot define
the static `PyModuleDef` that `PyModuleDef_Init`, `PyModule_Create2` and
`PyModule_FromDefAndSpec2` take; it exports `PyModExport_<name>` instead. (The macros PEP 803
removes, `PyObject_HEAD` and `Py_SET_TYPE` among them, leave no symbol to look for; a direct field
access shows as the free-threaded build's `_Py` reference counting, which is outside the limited
API and fails above.)
"""

from __future__ import annotations

from release.errors import VerifyError
from release.inspect.rules.registry import Finding, RuleContext, listing, rule
from release.inspect.stableabi import LimitedApiAudit, audit_limited_api
from release.wheel.names import interpreters_of, python_tag, split_tag, tag_python

_version = tag_python

ABI3T_UNUSABLE = ("PyModuleDef_Init", "PyModule_Create2", "PyModule_FromDefAndSpec2")
"""Functions PEP 803 leaves in abi3t but makes unusable: they take a static `PyModuleDef`."""


def _dotted(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def _problems(audits: list[LimitedApiAudit], floor: str, abi3t: bool = False) -> list[str]:
    problems = []
    for audit in audits:
        unusable = [s for s in ABI3T_UNUSABLE if s in audit.uses] if abi3t else []
        if unusable:
            problems.append(
                f"{audit.path} uses {listing(unusable)}, which abi3t cannot use (PEP 803: a module "
                "of the free-threaded stable ABI exports PyModExport_<name> instead of a PyModuleDef)"
            )
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
    abi3 = sorted({t[0] for t in tags if t[1] in ("abi3", "abi3t")})
    abi3t = any(t[1] == "abi3t" for t in tags)
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
            floor_version = _version(expected)
            if own and floor_version is not None and max(own) < floor_version:
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
    problems = _problems(audits, floor, abi3t)
    doubts = [f"{p}: {why}" for p, why in ctx.wheel.symbol_doubts.items() if p in shared]
    doubted = (
        f"; audited whole, as the section headers disagree with the dynamic table: {listing(doubts, 3)}"
        if doubts
        else ""
    )
    if problems:
        return Finding(
            "fail",
            f"symbols outside the limited API of Python {floor}: {listing(problems)}{doubted}",
            tuple(a.path for a in audits if not a.ok or (abi3t and set(ABI3T_UNUSABLE) & set(a.uses))),
        )
    both = " and abi3t's (PEP 803)" if abi3t else ""
    return Finding(
        "warn" if doubts else "pass",
        f"{len(shared)} shared object{'s use' if len(shared) > 1 else ' uses'} only the limited API of "
        f"Python {floor}{both} (abi3audit){doubted}",
        tuple(p for p in ctx.wheel.symbol_doubts if p in shared),
    )
