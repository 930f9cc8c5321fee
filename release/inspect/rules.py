"""The verification rules of `release verify`: eleven checks, each a function of a `RuleContext`.

A rule reads what `release.inspect.verify` found in one wheel (its members, its ELF files, the matrix and
the variant it maps to) and returns one `RuleResult`; `RULES` applies them in `RULE_IDS` order.
Rules that need the matrix, or a variant the wheel maps to, say `not-applicable` without it.
"""

from __future__ import annotations

import ast
import fnmatch
import posixpath
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from release.inspect.elf import (
    ElfInfo,
    Policy,
    parse_version,
    policy_for,
    split_versioned,
)
from release.plan.version import tag_version
from release.wheel.names import PlatformTag, parse_platform_tag

if TYPE_CHECKING:
    from release.plan.resolve import ResolvedVariant

Status = Literal["pass", "fail", "warn", "not-applicable"]
RULE_IDS = (
    "vendored-runtime",
    "missing-runtime-needed",
    "duplicate-library",
    "debug-info",
    "build-path-rpath",
    "platform-floor",
    "external-dependency",
    "device-code",
    "wheel-name",
    "non-executable-script",
    "variant-conflict",
)
_EXTENSION = re.compile(r"(\.cpython-[^/]*|\.abi3|\.pypy[^/]*)?\.so$")
_LOADER = ("ld-linux*.so*", "ld64.so*", "libpython3*.so*")
# Calls of importlib.metadata that can see the other installed distributions.
_GUARD_CALLS = frozenset({"distributions", "packages_distributions", "distribution", "metadata"})
_METADATA_MODULES = frozenset({"importlib.metadata", "importlib_metadata"})


@dataclass(frozen=True)
class RuleResult:
    """The outcome of one rule on one wheel."""

    id: str
    status: Status
    message: str
    paths: tuple[str, ...] = ()
    """Files of the wheel the result is about (for `vendored-runtime`: the vendored files)."""

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "status": self.status, "message": self.message, "paths": list(self.paths)}


# --- what the rules read ---------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    name: str
    install_path: str
    """Where the file lands relative to site-packages; `<scripts>/x` for `*.data/scripts/x`."""
    size: int
    mode: int


@dataclass
class WheelContents:
    """What `release.inspect.verify` read from one wheel: its name's fields, members and ELF files."""

    path: Path
    distribution: str
    version: str
    tags: tuple[str, ...]
    members: list[Member]
    elf_files: list[ElfInfo]
    read: Callable[[str], bytes]
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RuleContext:
    """Everything a rule sees: the wheel, and the matrix, variant and policies it is checked against."""

    wheel: WheelContents
    matrix: str | None
    """The matrix file the wheel is checked against, if any."""
    variant: ResolvedVariant | None
    """The variant the wheel is one of; None for a wheel that is none of the matrix's."""
    runtime_globs: tuple[str, ...]
    """The variant's `excludes` (what repair kept out); without a variant, every known runtime."""
    release: bool
    expected_version: str | None
    policies: tuple[Policy, ...]
    toolkit_override: str | None = None
    """Set when the wheel was built with --allow-toolkit-mismatch (e.g. 'declared 6.4, built with 5.2')."""

    def provided(self) -> set[str]:
        """Names the wheel's own libraries answer to: file names and sonames."""
        names = {posixpath.basename(e.path) for e in self.wheel.elf_files}
        names.update(e.soname for e in self.wheel.elf_files if e.soname)
        return names


# --- pure helpers the rules use ----------------------------------------------------------------


_GRAFT_HASH = re.compile(r"^(?P<stem>.+)-[0-9a-f]{8}(?P<suffix>\.so(?:\.[^/]*)?)$")


def original_name(name: str) -> str:
    """The library's name before auditwheel grafted it (`libamdhip64-1a2b3c4d.so.5` -> `libamdhip64.so.5`)."""
    match = _GRAFT_HASH.match(name)
    return match.group("stem") + match.group("suffix") if match else name


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether a file name or soname matches one of the globs (case-sensitive, like the loader),
    also under the name it had before auditwheel grafted it with a hash suffix."""
    candidates = {name, original_name(name)}
    return any(fnmatch.fnmatchcase(c, p) for p in patterns for c in candidates)


def classify_rpath(entry: str, install: str) -> Literal["inside", "escapes", "absolute", "relative"]:
    """Where an RPATH/RUNPATH entry of the file at `install` points.

    `inside`: `$ORIGIN`-relative and within the installed wheel; `escapes`: `$ORIGIN`-relative
    but leaving it; `absolute`: a fixed path (a build machine's); `relative`: resolved against
    the process's working directory.
    """
    for origin in ("$ORIGIN", "${ORIGIN}"):
        if entry == origin or entry.startswith(origin + "/"):
            rest = entry[len(origin) :].lstrip("/")
            break
    else:
        return "absolute" if entry.startswith("/") else "relative"
    base = posixpath.dirname(install)
    if base.startswith("<scripts>"):
        # A script lands in <prefix>/bin; the wheel's other files in <prefix>/lib/pythonX.Y/site-packages.
        base = "bin" + base[len("<scripts>") :]
        target = posixpath.normpath(posixpath.join(base, rest))
        inside = re.match(r"^lib/python[^/]*/site-packages(/|$)", target) is not None
        return "inside" if inside else "escapes"
    target = posixpath.normpath(posixpath.join(base, rest)) if base or rest else "."
    return "escapes" if target == ".." or target.startswith("../") else "inside"


def has_metadata_guard(source: str) -> bool:
    """Whether Python source calls importlib.metadata's `distributions`, `packages_distributions`,
    `distribution` or `metadata` (however imported): the guard against a second variant."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    modules: set[str] = set()  # local names bound to importlib.metadata
    functions: set[str] = set()  # local names bound to one of the guard calls
    importlib_names: set[str] = set()  # local names bound to the importlib package
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in _METADATA_MODULES and alias.asname:
                    modules.add(alias.asname)
                elif alias.name == "importlib_metadata":
                    modules.add("importlib_metadata")
                elif alias.name.startswith("importlib"):
                    importlib_names.add(alias.asname or "importlib")
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            if node.module in _METADATA_MODULES:
                functions.update(a.asname or a.name for a in node.names if a.name in _GUARD_CALLS)
            elif node.module == "importlib":
                modules.update(a.asname or a.name for a in node.names if a.name == "metadata")

    def is_metadata_module(expr: ast.expr) -> bool:
        if isinstance(expr, ast.Name):
            return expr.id in modules
        return (
            isinstance(expr, ast.Attribute)
            and expr.attr == "metadata"
            and isinstance(expr.value, ast.Name)
            and expr.value.id in importlib_names
        )

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in functions:
            return True
        if isinstance(func, ast.Attribute) and func.attr in _GUARD_CALLS and is_metadata_module(func.value):
            return True
    return False


def _python_tag_version(interpreter: str) -> str | None:
    """'cp312' -> '3.12'; 'py3' -> None."""
    match = re.match(r"^(?:cp|pp)3(\d+)$", interpreter)
    return f"3.{match.group(1)}" if match else None


def _fmt(version: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in version)


# --- the rules ---------------------------------------------------------------------------------


def _na(rule_id: str, ctx: RuleContext, what: str = "the matrix") -> RuleResult:
    if ctx.matrix is None:
        return RuleResult(rule_id, "not-applicable", f"needs {what} (no matrix file given)")
    return RuleResult(
        rule_id, "not-applicable", f"needs a variant: {ctx.wheel.distribution!r} is no variant's distribution"
    )


def _paths_message(items: Sequence[str], limit: int = 6) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def rule_vendored_runtime(ctx: RuleContext) -> RuleResult:
    rid = "vendored-runtime"
    if ctx.variant is None:
        return _na(rid, ctx, "the variant's runtime excludes")
    if not ctx.runtime_globs:
        return RuleResult(rid, "pass", f"variant {ctx.variant.name} binds no GPU runtime (no excludes)")
    sonames = {e.path: e.soname for e in ctx.wheel.elf_files}
    found = [
        m.name
        for m in ctx.wheel.members
        if matches(posixpath.basename(m.name), ctx.runtime_globs)
        or (sonames.get(m.name) and matches(sonames[m.name] or "", ctx.runtime_globs))
    ]
    if found:
        return RuleResult(
            rid,
            "fail",
            f"excluded runtime library vendored into the wheel: {_paths_message(found)} "
            f"(repair must exclude {', '.join(ctx.runtime_globs)} so the loader binds the image's runtime)",
            tuple(found),
        )
    return RuleResult(rid, "pass", f"no library matching {', '.join(ctx.runtime_globs)} is inside the wheel")


def _closure(start: ElfInfo, by_name: Mapping[str, ElfInfo]) -> set[str]:
    """Every NEEDED name reachable from `start` through the wheel's own libraries."""
    seen: set[str] = set()
    stack = [start]
    visited = {start.path}
    while stack:
        info = stack.pop()
        for needed in info.needed:
            seen.add(needed)
            inner = by_name.get(needed)
            if inner is not None and inner.path not in visited:
                visited.add(inner.path)
                stack.append(inner)
    return seen


def rule_missing_runtime_needed(ctx: RuleContext) -> RuleResult:
    rid = "missing-runtime-needed"
    if ctx.variant is None:
        return _na(rid, ctx)
    prefixes = ctx.variant.runtime_needed
    if not prefixes:
        return RuleResult(rid, "not-applicable", f"variant {ctx.variant.name} needs no GPU runtime")
    by_name: dict[str, ElfInfo] = {}
    for info in ctx.wheel.elf_files:
        by_name[posixpath.basename(info.path)] = info
        if info.soname:
            by_name[info.soname] = info
    extensions = [e for e in ctx.wheel.elf_files if _EXTENSION.search(posixpath.basename(e.path))
                  and not posixpath.basename(e.path).startswith("lib")]
    candidates = extensions or ctx.wheel.elf_files
    if not candidates:
        return RuleResult(rid, "fail", f"no ELF file in the wheel, so nothing links {', '.join(prefixes)}")
    linked = [e.path for e in candidates if any(n.startswith(prefixes) for n in _closure(e, by_name))]
    if linked:
        message = f"{_paths_message(linked)} NEED {' or '.join(prefixes)}*"
        return RuleResult(rid, "pass", message, tuple(linked))
    missing = [e.path for e in candidates]
    what = "extension" if extensions else "ELF file"
    return RuleResult(
        rid,
        "fail",
        f"no {what} NEEDs {' or '.join(prefixes)}* (directly or through the wheel's libraries): "
        f"{_paths_message(missing)} would run without the GPU (a silent CPU fallback)",
        tuple(missing),
    )


def rule_duplicate_library(ctx: RuleContext) -> RuleResult:
    rid = "duplicate-library"
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for info in ctx.wheel.elf_files:
        if info.soname:
            groups[("soname", info.soname)].append(info.path)
        groups[("code", info.code_sha256)].append(info.path)
    duplicates: list[str] = []
    paths: list[str] = []
    for (kind, key), members in groups.items():
        if len(members) < 2:
            continue
        why = f"SONAME {key}" if kind == "soname" else "identical code"
        duplicates.append(f"{' and '.join(members)} ({why})")
        paths.extend(p for p in members if p not in paths)
    if duplicates:
        message = "the same library is shipped twice: " + "; ".join(duplicates)
        return RuleResult(rid, "fail", message, tuple(paths))
    return RuleResult(rid, "pass", f"{len(ctx.wheel.elf_files)} ELF files, no library shipped twice")


def rule_debug_info(ctx: RuleContext) -> RuleResult:
    rid = "debug-info"
    found = [e for e in ctx.wheel.elf_files if e.debug_sections]
    if found:
        names = [f"{e.path} ({len(e.debug_sections)} .debug sections)" for e in found]
        return RuleResult(
            rid,
            "fail",
            f"unstripped debug info: {_paths_message(names)} (strip with `strip --strip-debug`)",
            tuple(e.path for e in found),
        )
    return RuleResult(rid, "pass", "no .debug_* sections")


def rule_build_path_rpath(ctx: RuleContext) -> RuleResult:
    rid = "build-path-rpath"
    install = {m.name: m.install_path for m in ctx.wheel.members}
    bad: list[str] = []
    paths: list[str] = []
    for info in ctx.wheel.elf_files:
        for kind, entries in (("RPATH", info.rpath), ("RUNPATH", info.runpath)):
            for entry in entries:
                where = classify_rpath(entry, install.get(info.path, info.path))
                if where != "inside":
                    bad.append(f"{info.path} {kind} {entry} ({where})")
                    if info.path not in paths:
                        paths.append(info.path)
    if bad:
        return RuleResult(
            rid,
            "fail",
            f"RPATH/RUNPATH outside the wheel: {_paths_message(bad)} "
            "(only $ORIGIN-relative paths inside the wheel are portable)",
            tuple(paths),
        )
    return RuleResult(rid, "pass", "every RPATH/RUNPATH is $ORIGIN-relative inside the wheel")


def _wheel_policy(ctx: RuleContext, claims: Sequence[PlatformTag]) -> Policy | None:
    if claims:
        libc = min(t.libc for t in claims if t.libc is not None)
        return policy_for(ctx.policies, libc)
    if ctx.variant is not None:
        floor = parse_platform_tag(ctx.variant.floor)
        if floor.libc is not None:
            return policy_for(ctx.policies, floor.libc)
    return ctx.policies[-1] if ctx.policies else None


def rule_platform_floor(ctx: RuleContext) -> RuleResult:
    rid = "platform-floor"
    tags = [parse_platform_tag(t) for t in {t.split("-")[-1] for t in ctx.wheel.tags}]
    if all(t.family == "any" for t in tags):
        return RuleResult(rid, "not-applicable", "a pure Python wheel (platform 'any')")
    claims = [t for t in tags if t.family == "manylinux" and t.libc is not None]
    problems: list[str] = []
    paths: list[str] = []
    claim: PlatformTag | None = min(claims, key=lambda t: t.libc or (0, 0)) if claims else None
    policy = _wheel_policy(ctx, claims) if claim is not None else None
    if claim is not None and policy is not None:
        provided = ctx.provided()
        for info in ctx.wheel.elf_files:
            newest: dict[str, tuple[str, tuple[int, ...]]] = {}
            for library, name in info.version_requirements:
                split = split_versioned(name)
                if split is None or library in provided:
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
    if problems and claim is not None:
        return RuleResult(
            rid,
            "fail",
            f"the wheel's own symbols need a newer system than its tag {claim.text} allows: "
            f"{_paths_message(problems)}",
            tuple(paths),
        )
    tag_text = claim.text if claim is not None else ", ".join(t.text for t in tags)
    if ctx.variant is None:
        if claim is None:
            return RuleResult(rid, "warn", f"{tag_text} is no manylinux tag (no matrix: floor not checked)")
        return RuleResult(rid, "pass", f"symbol versions fit {tag_text} (no matrix: floor not checked)")
    floor = parse_platform_tag(ctx.variant.floor)
    status: Status = "fail" if ctx.release else "warn"
    if claim is None:
        message = f"{tag_text} is no manylinux tag: a valid local wheel, not releasable (floor {floor.text})"
        return RuleResult(rid, status, message)
    if floor.libc is not None and claim.libc is not None and claim.libc > floor.libc:
        return RuleResult(
            rid,
            status,
            f"{claim.text} is newer than the release floor {floor.text}: a valid local wheel, not "
            f"releasable (build it in a {floor.policy_name} container)",
        )
    if floor.arch and claim.arch != floor.arch:
        message = f"{claim.text} is for {claim.arch}, the floor {floor.text} for {floor.arch}"
        return RuleResult(rid, status, message)
    return RuleResult(rid, "pass", f"symbol versions fit {claim.text}, which meets the floor {floor.text}")


def rule_external_dependency(ctx: RuleContext) -> RuleResult:
    rid = "external-dependency"
    tags = (parse_platform_tag(x.split("-")[-1]) for x in ctx.wheel.tags)
    claims = [t for t in tags if t.family == "manylinux"]
    policy = _wheel_policy(ctx, claims)
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
                or matches(needed, ctx.runtime_globs)
                or matches(needed, system)
                or matches(needed, _LOADER)
            ):
                continue
            found.append(f"{info.path} NEEDs {needed}")
            if info.path not in paths:
                paths.append(info.path)
    policy_name = policy.name if policy is not None else "no policy"
    if found:
        return RuleResult(
            rid,
            "fail",
            f"NEEDED libraries outside the {policy_name} policy, not vendored and not declared: "
            f"{_paths_message(found)} (vendor them with repair, or declare them in "
            "platform.system_libraries)",
            tuple(paths),
        )
    message = f"every NEEDED library is in the {policy_name} policy, vendored or declared"
    return RuleResult(rid, "pass", message)


def rule_device_code(ctx: RuleContext) -> RuleResult:
    rid = "device-code"
    if ctx.variant is None:
        return _na(rid, ctx)
    carrying = [e for e in ctx.wheel.elf_files if e.device_sections]
    found_arch = sorted({a for e in carrying for a in e.architectures})
    if not ctx.variant.device_code:
        if carrying:
            what = [f"{e.path} ({', '.join(e.device_sections)})" for e in carrying]
            archs = f" for {', '.join(found_arch)}" if found_arch else ""
            return RuleResult(
                rid,
                "fail",
                f"GPU code objects{archs} in {_paths_message(what)}, but variant {ctx.variant.name} "
                "declares device_code: false",
                tuple(e.path for e in carrying),
            )
        message = f"no GPU code objects (variant {ctx.variant.name}: device_code: false)"
        return RuleResult(rid, "pass", message)
    missing = [a for a in ctx.variant.architectures if a not in found_arch]
    if not carrying or missing:
        return RuleResult(
            rid,
            "fail",
            f"declared architectures missing from the GPU code objects: {', '.join(missing)} "
            f"(found: {', '.join(found_arch) or 'none'})",
            tuple(e.path for e in carrying),
        )
    message = f"GPU code objects for {', '.join(found_arch)}"
    return RuleResult(rid, "pass", message, tuple(e.path for e in carrying))


def rule_wheel_name(ctx: RuleContext) -> RuleResult:
    rid = "wheel-name"
    if ctx.variant is None:
        return _na(rid, ctx)
    problems: list[str] = []
    w = ctx.wheel
    if canonicalize_name(w.distribution) != canonicalize_name(ctx.variant.distribution):
        expected = ctx.variant.distribution
        problems.append(f"distribution {w.distribution!r} is not variant {ctx.variant.name}'s {expected!r}")
    pythons = ctx.variant.pythons
    for interpreter in sorted({t.split("-")[0] for t in w.tags}):
        version = _python_tag_version(interpreter)
        if version not in pythons:
            problems.append(f"python tag {interpreter} is not one of the matrix's ({', '.join(pythons)})")
    if ctx.expected_version is not None:
        try:
            same = Version(tag_version(ctx.expected_version, ctx.variant.tag_pattern)) == Version(w.version)
        except InvalidVersion:
            same = False
        if not same:
            problems.append(f"version {w.version} is not the expected {ctx.expected_version}")
    meta_name, meta_version = w.metadata.get("Name"), w.metadata.get("Version")
    if meta_name is None or canonicalize_name(meta_name) != canonicalize_name(w.distribution):
        problems.append(f"METADATA Name {meta_name!r} does not match the file name's {w.distribution!r}")
    if meta_version is None or meta_version != w.version:
        try:
            equal = meta_version is not None and Version(meta_version) == Version(w.version)
        except InvalidVersion:
            equal = False
        if not equal:
            problems.append(f"METADATA Version {meta_version!r} does not match the file name's {w.version!r}")
    if problems:
        return RuleResult(rid, "fail", "; ".join(problems))
    message = f"{w.distribution} {w.version} for {', '.join(w.tags)} is what the matrix expects"
    return RuleResult(rid, "pass", message)


def rule_non_executable_script(ctx: RuleContext) -> RuleResult:
    rid = "non-executable-script"
    executables = {e.path for e in ctx.wheel.elf_files if e.executable}
    checked = [
        m for m in ctx.wheel.members if m.install_path.startswith("<scripts>/") or m.name in executables
    ]
    bad = [m.name for m in checked if not (m.mode & 0o111)]
    if bad:
        return RuleResult(
            rid,
            "fail",
            f"no run bit in the zip for {_paths_message(bad)}: installed, it cannot be executed",
            tuple(bad),
        )
    if not checked:
        return RuleResult(rid, "pass", "no scripts or executables in the wheel")
    return RuleResult(rid, "pass", f"{len(checked)} scripts/executables carry the run bit")


def rule_variant_conflict(ctx: RuleContext) -> RuleResult:
    rid = "variant-conflict"
    if ctx.variant is None:
        return _na(rid, ctx)
    import_name = ctx.variant.import_name
    if len(ctx.variant.siblings) < 2:
        return RuleResult(rid, "pass", "the matrix has one variant: no other can share the import package")
    target = f"{import_name}/__init__.py"
    member = next((x for x in ctx.wheel.members if x.install_path == target), None)
    sharing = ", ".join(ctx.variant.siblings)
    if member is None:
        return RuleResult(
            rid,
            "fail",
            f"no {target} in the wheel: nothing stops another variant ({sharing}) from overwriting "
            f"{import_name}",
        )
    source = ctx.wheel.read(member.name).decode("utf-8", errors="replace")
    if has_metadata_guard(source):
        message = f"{member.name} checks the installed distributions (importlib.metadata)"
        return RuleResult(rid, "pass", message, (member.name,))
    return RuleResult(
        rid,
        "fail",
        f"{member.name} has no guard: variants {sharing} share the import package "
        f"{import_name}; check the installed distributions with importlib.metadata "
        "and refuse to load beside another variant",
        (member.name,),
    )


RULES: tuple[Callable[[RuleContext], RuleResult], ...] = (
    rule_vendored_runtime,
    rule_missing_runtime_needed,
    rule_duplicate_library,
    rule_debug_info,
    rule_build_path_rpath,
    rule_platform_floor,
    rule_external_dependency,
    rule_device_code,
    rule_wheel_name,
    rule_non_executable_script,
    rule_variant_conflict,
)
