"""Rules about the system a wheel needs: symbol versions within its tag and the release floor,
and every NEEDED library provided by the system, the wheel or a declaration."""

from __future__ import annotations

import re
from collections.abc import Sequence

from release.inspect.policy import Policy, policy_for
from release.inspect.rules.registry import Finding, RuleContext, Status, listing, matches, rule
from release.inspect.versions import parse_version, split_versioned
from release.wheel.names import PlatformTag, parse_platform_tag, platforms_of

_LOADER = ("ld-linux*.so*", "ld64.so*", "libpython3*.so*")
_NAMED = re.compile(r"^([A-Z][A-Z_]*?)_([^_].*)$", re.ASCII)
"""A version name's prefix and the rest (`GLIBC_2.٣٤` -> 'GLIBC', '2.٣٤'), whatever the rest is."""
_WORD = re.compile(r"^[A-Z_]+$", re.ASCII)
"""A version name that is a word, not a number (`GLIBC_PRIVATE`): no version to compare."""


def _unreadable_version(name: str, policy: Policy, arch: str) -> bool:
    """Whether `name` has a prefix the policy versions (`GLIBC`) but a version that is no ASCII
    number (`GLIBC_2.٣٤`): a requirement no library of the policy meets."""
    named = _NAMED.match(name)
    if named is None or _WORD.match(named.group(2)):
        return False
    return policy.max_allowed(arch, named.group(1)) is not None


def _fmt(version: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in version)


def platform_tags(ctx: RuleContext) -> list[PlatformTag]:
    """The wheel's platform tags, parsed, each once."""
    return [parse_platform_tag(t) for t in platforms_of(ctx.wheel.tags)]


def wheel_policy(ctx: RuleContext, claims: Sequence[PlatformTag]) -> Policy | None:
    """The policy the wheel's oldest manylinux tag names; else the matrix floor's; else the newest."""
    libcs = [t.libc for t in claims if t.libc is not None]
    if libcs:
        return policy_for(ctx.policies, min(libcs))
    if ctx.variant is not None:
        floor = parse_platform_tag(ctx.variant.floor)
        if floor.libc is not None:
            return policy_for(ctx.policies, floor.libc)
    return ctx.policies[-1] if ctx.policies else None


def _too_new(ctx: RuleContext, claim: PlatformTag, policy: Policy) -> tuple[list[str], list[str]]:
    """(problems, paths): symbol versions of the wheel's ELF files newer than the policy allows."""
    provided = ctx.provided()
    problems: list[str] = []
    paths: list[str] = []
    for info in ctx.wheel.elf_files:
        newest: dict[str, tuple[str, tuple[int, ...]]] = {}
        for library, name in info.version_requirements:
            if library in provided:
                continue
            split = split_versioned(name)
            if split is None:
                if _unreadable_version(name, policy, claim.arch):
                    problems.append(f"{info.path} needs {name!a} (no {policy.name} library defines it)")
                    if info.path not in paths:
                        paths.append(info.path)
                continue
            allowed = policy.max_allowed(claim.arch, split[0])
            version = parse_version(split[1])
            if allowed is not None and version > allowed:
                current = newest.get(split[0])
                if current is None or version > current[1]:
                    newest[split[0]] = (name, version)
        for prefix, (name, _version) in sorted(newest.items()):
            limit = policy.max_allowed(claim.arch, prefix) or ()
            problems.append(f"{info.path} needs {name} (> {prefix}_{_fmt(limit)})")
            if info.path not in paths:
                paths.append(info.path)
    return problems, paths


@rule("platform-floor")
def platform_floor(ctx: RuleContext) -> Finding:
    """The wheel's own symbols need a newer glibc/libstdc++ than its tag or the matrix's floor."""
    tags = platform_tags(ctx)
    if all(t.family == "any" for t in tags):
        if not ctx.wheel.elf_files:
            return Finding("not-applicable", "a pure Python wheel (platform 'any')")
        needs = [f"{e.path} needs GLIBC_{e.max_version('GLIBC') or '?'}" for e in ctx.wheel.elf_files]
        return Finding(
            "fail",
            f"platform 'any' promises every system, but the wheel's native code needs one: {listing(needs)}",
            tuple(e.path for e in ctx.wheel.elf_files),
        )
    claims = [t for t in tags if t.family == "manylinux" and t.libc is not None]
    claim: PlatformTag | None = min(claims, key=lambda t: t.libc or (0, 0)) if claims else None
    policy = wheel_policy(ctx, claims) if claim is not None else None
    if claim is not None and policy is not None:
        problems, paths = _too_new(ctx, claim, policy)
        if problems:
            return Finding(
                "fail",
                f"the wheel's own symbols need a newer system than its tag {claim.text} allows: "
                f"{listing(problems)}",
                tuple(paths),
            )
    tag_text = claim.text if claim is not None else ", ".join(t.text for t in tags)
    if ctx.variant is None:
        if claim is None:
            return Finding("warn", f"{tag_text} is no manylinux tag (no matrix: floor not checked)")
        return Finding("pass", f"symbol versions fit {tag_text} (no matrix: floor not checked)")
    floor = parse_platform_tag(ctx.variant.floor)
    status: Status = "fail" if ctx.release else "warn"
    if claim is None:
        message = f"{tag_text} is no manylinux tag: a valid local wheel, not releasable (floor {floor.text})"
        return Finding(status, message)
    if floor.libc is not None and claim.libc is not None and claim.libc > floor.libc:
        return Finding(
            status,
            f"{claim.text} is newer than the release floor {floor.text}: a valid local wheel, not "
            f"releasable (build it in a {floor.policy_name} container)",
        )
    if floor.arch and claim.arch != floor.arch:
        return Finding(status, f"{claim.text} is for {claim.arch}, the floor {floor.text} for {floor.arch}")
    return Finding("pass", f"symbol versions fit {claim.text}, which meets the floor {floor.text}")


@rule("external-dependency")
def external_dependency(ctx: RuleContext) -> Finding:
    """A NEEDED library that is neither in the manylinux policy, nor vendored, nor declared."""
    claims = [t for t in platform_tags(ctx) if t.family == "manylinux"]
    policy = wheel_policy(ctx, claims)
    allowed = policy.libraries if policy is not None else frozenset()
    system = ctx.variant.system_libraries if ctx.variant is not None else ()
    provided = ctx.provided()
    found: list[str] = []
    paths: list[str] = []
    for info in ctx.wheel.elf_files:
        for needed in info.needed:
            if (
                needed in allowed
                or needed in provided
                or matches(needed, ctx.excludes)
                or matches(needed, system)
                or matches(needed, _LOADER)
            ):
                continue
            found.append(f"{info.path} NEEDs {needed}")
            if info.path not in paths:
                paths.append(info.path)
    policy_name = policy.name if policy is not None else "no policy"
    if found:
        return Finding(
            "fail",
            f"NEEDED libraries outside the {policy_name} policy, not vendored and not declared: "
            f"{listing(found)} (vendor them with repair, or declare them in platform.system_libraries)",
            tuple(paths),
        )
    return Finding("pass", f"every NEEDED library is in the {policy_name} policy, vendored or declared")
