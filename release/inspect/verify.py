"""`release verify`: read a wheel, apply every registered rule, and write the report.

Works on any wheel. With a matrix the wheel is mapped to its variant (by distribution name, or
`--variant`) and every rule applies; without one, or for a wheel that is none of the matrix's
distributions, the rules that need a variant say `not-applicable`.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from release.atomic import write_text
from release.config.globs import known_runtime_globs
from release.config.resources import toolkit_backends
from release.errors import ToolchainError, UsageError
from release.inspect.devicecode import architecture_names
from release.inspect.policy import Policy, policies_from_json
from release.inspect.reader import parse_name, read_wheel
from release.inspect.report import VerifyReport
from release.inspect.reuse import facts_digest, reusable
from release.inspect.rules import RULES
from release.inspect.rules.registry import RuleContext, RuleResult, matches
from release.wheel.files import file_sha256, read_json
from release.wheel.names import platforms_of, report_path

if TYPE_CHECKING:
    from release.plan.resolve import ResolvedVariant


POLICY_LIMIT = 16 << 20
"""Bytes of auditwheel's policy file read at most (about 200 KB)."""


@functools.cache
def manylinux_policies() -> tuple[Policy, ...]:
    """auditwheel's manylinux policies, read from its package data (never hard-coded here)."""
    spec = importlib.util.find_spec("auditwheel")
    if spec is None or spec.origin is None:
        msg = "auditwheel is not installed: its manylinux policy is needed (pip install auditwheel)"
        raise ToolchainError(msg)
    policy_file = Path(spec.origin).parent / "policy" / "manylinux-policy.json"
    try:
        return policies_from_json(read_json(policy_file, POLICY_LIMIT))
    except (OSError, ValueError) as exc:
        msg = f"cannot read auditwheel's manylinux policy {policy_file}: {exc}"
        raise ToolchainError(msg) from None


@functools.cache
def _known_runtime() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(runtime globs, device sections, architecture patterns) of every backend the toolkit knows,
    for a wheel that is no variant's: its own backend data, loaded and validated as the matrix
    loader does."""
    from release.config.backends import load_backends  # noqa: PLC0415 (verify start-up time)

    backends = load_backends(toolkit_backends()).values()
    sections = tuple(dict.fromkeys(s for b in backends for s in b.device_code_sections))
    patterns = tuple(b.architectures for b in backends if b.architectures)
    return known_runtime_globs(backends), sections, patterns


def inspect_wheel(
    wheel: Path,
    *,
    variant: ResolvedVariant | None = None,
    matrix: str | None = None,
    release: bool = False,
    expected_version: str | None = None,
    toolkit_override: str | None = None,
) -> RuleContext:
    """Read one wheel and gather what the rules judge it against (see `verify_wheel`)."""
    wheel = Path(wheel)
    if not wheel.is_file():
        msg = f"{wheel}: no such wheel file"
        raise UsageError(msg)
    parse_name(wheel)
    if variant is not None:
        globs = variant.excludes
        sections: tuple[str, ...] = variant.device_code_sections
        names = architecture_names([variant.backend.architectures] if variant.backend.architectures else [])
        matrix = matrix or str(variant.matrix_root)
    else:
        globs, sections, patterns = _known_runtime()
        names = architecture_names(patterns)
    return RuleContext(
        wheel=read_wheel(wheel, sections, names),
        matrix=matrix,
        variant=variant,
        excludes=globs,
        release=release,
        expected_version=expected_version,
        policies=manylinux_policies(),
        toolkit_override=toolkit_override,
    )


def facts(ctx: RuleContext, judged_with: Sequence[str] = ()) -> str:
    """The digest of what a wheel is judged against: the matrix, the resolved variant (every fact
    of it), the runtime libraries kept out, release mode, the expected version, the policies, the
    toolkit override, and the other wheels judged with it (`verify_release`)."""
    judged = (ctx.matrix, ctx.variant, ctx.excludes, ctx.release, ctx.expected_version)
    return facts_digest((*judged, _policies_digest(ctx.policies), ctx.toolkit_override, tuple(judged_with)))


_POLICY_DIGESTS: dict[int, tuple[tuple[Policy, ...], str]] = {}


def _policies_digest(policies: tuple[Policy, ...]) -> str:
    """The policies' part of the facts, written out once per policies object (thousands of names)."""
    known = _POLICY_DIGESTS.get(id(policies))
    if known is None or known[0] is not policies:
        known = _POLICY_DIGESTS[id(policies)] = (policies, facts_digest(policies))
    return known[1]


def judge(
    ctx: RuleContext, results: Sequence[RuleResult] | None = None, judged_with: Sequence[str] = ()
) -> VerifyReport:
    """The report of one inspected wheel: every rule applied (or the results given)."""
    contents = ctx.wheel
    runtime_bound = sorted({n for e in contents.elf_files for n in e.needed if matches(n, ctx.excludes)})
    return VerifyReport(
        wheel=contents.path,
        size=contents.size,
        unpacked_size=sum(m.size for m in contents.members),
        distribution=contents.distribution,
        version=contents.version,
        tags=contents.tags,
        platform_tags=platforms_of(contents.tags),
        variant=ctx.variant.name if ctx.variant is not None else None,
        matrix=ctx.matrix,
        release_mode=ctx.release,
        runtime_bound=tuple(runtime_bound),
        elf_files=tuple(contents.elf_files),
        rules=tuple(results) if results is not None else tuple(r.apply(ctx) for r in RULES),
        sha256=contents.sha256,
        facts=facts(ctx, judged_with),
    )


def verify_wheel(
    wheel: Path,
    *,
    variant: ResolvedVariant | None = None,
    matrix: str | None = None,
    release: bool = False,
    expected_version: str | None = None,
    toolkit_override: str | None = None,
    reuse: bool = False,
) -> VerifyReport:
    """Inspect one wheel and apply every rule against the resolved `variant` it is one of.

    Rules that need a variant say `not-applicable` without one (no matrix, or a wheel that is none
    of the matrix's distributions); `release` turns the floor warning into a failure;
    `expected_version` (a release tag like v1.2.0 or a version) is checked by wheel-name. Rules
    over the wheels of a release (`consistency`) say `not-applicable`: see `verify_release`.
    With `reuse`, an intact report beside the wheel, of the same bytes judged against the same
    facts by this toolkit and rule set, is read back instead (`release.inspect.reuse`): the
    re-verify costs a hash of the wheel."""
    if reuse:
        found = reused(
            wheel,
            variant=variant,
            matrix=matrix,
            release=release,
            expected_version=expected_version,
            toolkit_override=toolkit_override,
        )
        if found is not None:
            return found
    ctx = inspect_wheel(
        wheel,
        variant=variant,
        matrix=matrix,
        release=release,
        expected_version=expected_version,
        toolkit_override=toolkit_override,
    )
    return judge(ctx)


def reused(
    wheel: Path,
    *,
    variant: ResolvedVariant | None,
    matrix: str | None,
    release: bool,
    expected_version: str | None,
    toolkit_override: str | None,
) -> VerifyReport | None:
    """The intact report beside `wheel` that vouches for its bytes under these facts, or None."""
    wheel = Path(wheel)
    if variant is not None:
        globs = variant.excludes
        matrix = matrix or str(variant.matrix_root)
    else:
        globs = _known_runtime()[0]
    judged = (matrix, variant, globs, release, expected_version, _policies_digest(manylinux_policies()))
    report, _why = reusable(wheel, facts_digest((*judged, toolkit_override, ())), lambda: file_sha256(wheel))
    return report


def verify_release(
    wheels: Sequence[tuple[Path, ResolvedVariant | None]],
    *,
    variants: Mapping[str, ResolvedVariant],
    matrix: str | None = None,
    release: bool = False,
    expected_version: str | None = None,
) -> list[VerifyReport]:
    """Verify the wheels of one release, each against its variant (None: not one of the matrix's),
    and apply the rules over all of them (`consistency`) too; publish's preflight calls this."""
    contexts = [
        inspect_wheel(w, variant=v, matrix=matrix, release=release, expected_version=expected_version)
        for w, v in wheels
    ]
    results = [[r.apply(ctx) for r in RULES] for ctx in contexts]
    for index, rule in enumerate(RULES):
        if rule.across is not None:
            for row, found in zip(results, rule.across(contexts, variants), strict=True):
                row[index] = rule.result(found)
    names = sorted(w.name for w, _v in wheels)
    return [judge(ctx, row, names) for ctx, row in zip(contexts, results, strict=True)]


def write_report(report: VerifyReport, path: Path | None = None) -> Path:
    """Write the JSON report (default: beside the wheel) and return its path.

    The report is written to a new file in the same directory and renamed over the target, so a
    symlink at the target is replaced, never followed: nothing outside the report path is written.
    """
    target = path if path is not None else report_path(report.wheel)
    write_text(target, json.dumps(report.to_json(), indent=2) + "\n")
    return target
