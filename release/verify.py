"""`release verify`: inspect every ELF file of a wheel and apply the verification rules.

Works on any wheel. With a matrix the wheel is mapped to its variant (by distribution name, or
`--variant`) and every rule applies; without one, the rules that need the matrix say
`not-applicable`. ELF files are read from the zip into memory and never extracted.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import fnmatch
import functools
import hashlib
import importlib.util
import itertools
import json
import mmap
import posixpath
import re
import struct
import sys
import zipfile
import zlib
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from packaging.utils import (
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from release.elf import (
    ElfInfo,
    ElfReadError,
    MissingRange,
    PlatformTag,
    Policy,
    SparseImage,
    inspect_elf,
    is_elf,
    parse_platform_tag,
    parse_version,
    policies_from_json,
    policy_for,
    split_versioned,
    wanted_ranges,
)
from release.errors import ToolchainError, UsageError, VerifyError

if TYPE_CHECKING:
    from release.backends import Backend
    from release.matrix import LoadedMatrix, Variant

SCHEMA_VERSION = 1
SCHEMA_FILE = Path(__file__).with_name("verify.schema.json")
REPORT_SUFFIX = ".verify.json"

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
_LABEL = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "not-applicable": "n/a"}
_EXTENSION = re.compile(r"(\.cpython-[^/]*|\.abi3|\.pypy[^/]*)?\.so$")
_NOT_ELF = (".py", ".pyi", ".pyc", ".txt", ".json", ".h", ".hpp", ".md", ".typed", ".toml", ".cmake")
_READ_AHEAD = 3
_STREAM_ABOVE = 8 << 20  # deflated ELF members larger than this are streamed, not held whole
_STREAM_INPUT = 64 << 10
_STREAM_OUTPUT = 1 << 20
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


@dataclass(frozen=True)
class VerifyReport:
    """Everything `release verify` found in one wheel."""

    wheel: Path
    size: int
    unpacked_size: int
    distribution: str
    version: str
    tags: tuple[str, ...]
    platform_tags: tuple[str, ...]
    variant: str | None
    matrix: str | None
    release_mode: bool
    runtime_bound: tuple[str, ...]
    elf_files: tuple[ElfInfo, ...]
    rules: tuple[RuleResult, ...]

    @functools.cached_property
    def sha256(self) -> str:
        """sha256 of the wheel file, computed when first asked (the JSON report and publish need
        it; the readable report does not)."""
        return _hash_file(self.wheel)

    @property
    def ok(self) -> bool:
        """No rule failed (warnings allowed)."""
        return not any(r.status == "fail" for r in self.rules)

    @property
    def releasable(self) -> bool:
        """No rule failed or warned: the wheel passes `--release` as well."""
        return not any(r.status in ("fail", "warn") for r in self.rules)

    def rule(self, rule_id: str) -> RuleResult:
        return next(r for r in self.rules if r.id == rule_id)

    def to_json(self) -> dict[str, object]:
        return {
            "schema_version": SCHEMA_VERSION,
            "wheel": self.wheel.name,
            "sha256": self.sha256,
            "size": self.size,
            "unpacked_size": self.unpacked_size,
            "matrix": self.matrix,
            "variant": self.variant,
            "distribution": self.distribution,
            "version": self.version,
            "tags": list(self.tags),
            "platform_tags": list(self.platform_tags),
            "release_mode": self.release_mode,
            "ok": self.ok,
            "releasable": self.releasable,
            "runtime_bound": list(self.runtime_bound),
            "elf_files": [_elf_json(e) for e in self.elf_files],
            "rules": [r.to_json() for r in self.rules],
        }


def _elf_json(info: ElfInfo) -> dict[str, object]:
    return {
        "path": info.path,
        "size": info.size,
        "executable": info.executable,
        "needed": list(info.needed),
        "soname": info.soname,
        "rpath": list(info.rpath),
        "runpath": list(info.runpath),
        "max_glibc": info.max_version("GLIBC"),
        "max_glibcxx": info.max_version("GLIBCXX"),
        "max_cxxabi": info.max_version("CXXABI"),
        "debug_sections": list(info.debug_sections),
        "device_code_sections": list(info.device_sections),
        "architectures": list(info.architectures),
    }


def report_path(wheel: Path) -> Path:
    """Where a wheel's report lives: `<wheel file name>.verify.json` beside it."""
    return wheel.with_name(wheel.name + REPORT_SUFFIX)


def write_report(report: VerifyReport, path: Path | None = None) -> Path:
    """Write the JSON report (default: beside the wheel) and return its path."""
    target = path if path is not None else report_path(report.wheel)
    target.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    return target


# --- reading a wheel ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    name: str
    install_path: str
    """Where the file lands relative to site-packages; `<scripts>/x` for `*.data/scripts/x`."""
    size: int
    mode: int


@dataclass
class _Wheel:
    path: Path
    distribution: str
    version: str
    tags: tuple[str, ...]
    members: list[Member]
    elf_files: list[ElfInfo]
    read: Callable[[str], bytes]
    metadata: Mapping[str, str] = field(default_factory=dict)


def install_path(member: str) -> str:
    """`pkg-1.0.data/platlib/x/y.so` -> `x/y.so`; `pkg-1.0.data/scripts/tool` -> `<scripts>/tool`."""
    first, _, rest = member.partition("/")
    if first.endswith(".data") and rest:
        scheme, _, inner = rest.partition("/")
        if scheme in ("purelib", "platlib"):
            return inner
        return f"<{scheme}>/{inner}"
    return member


def _parse_name(wheel: Path) -> tuple[str, str, tuple[str, ...]]:
    try:
        name, version, _build, tags = parse_wheel_filename(wheel.name)
    except InvalidWheelFilename as exc:
        msg = f"{wheel}: not a wheel file name ({exc})"
        raise UsageError(msg) from None
    return str(name), str(version), tuple(sorted(str(t) for t in tags))


def _hash_file(path: Path) -> str:
    """sha256 of the whole wheel, through a memory map (no copy)."""
    try:
        with path.open("rb") as fh:
            if not path.stat().st_size:
                return hashlib.sha256(b"").hexdigest()
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                return hashlib.sha256(mapped).hexdigest()
    except OSError as exc:
        msg = f"{path}: cannot read the wheel to hash it ({exc.strerror})"
        raise VerifyError(msg) from None


# --- the manylinux policy and backend knowledge --------------------------------------------------


@functools.cache
def manylinux_policies() -> tuple[Policy, ...]:
    """auditwheel's manylinux policies, read from its package data (never hard-coded here)."""
    spec = importlib.util.find_spec("auditwheel")
    if spec is None or spec.origin is None:
        msg = "auditwheel is not installed: its manylinux policy is needed (pip install auditwheel)"
        raise ToolchainError(msg)
    policy_file = Path(spec.origin).parent / "policy" / "manylinux-policy.json"
    try:
        return policies_from_json(json.loads(policy_file.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        msg = f"cannot read auditwheel's manylinux policy {policy_file}: {exc}"
        raise ToolchainError(msg) from None


@dataclass(frozen=True)
class _RuntimeKnowledge:
    runtime_libraries: tuple[str, ...]
    device_code_sections: tuple[str, ...]


@functools.cache
def _known_backends() -> tuple[_RuntimeKnowledge, ...]:
    """Runtime globs and device sections from the toolkit's own backend data, used when there is
    no matrix (read as plain JSON: the matrix loader validates these files)."""
    directory = Path(__file__).resolve().parent.parent / "packaging" / "backends"
    known = []
    for file in sorted(directory.glob("*.json")):
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        known.append(
            _RuntimeKnowledge(
                tuple(data.get("runtime_libraries") or ()), tuple(data.get("device_code_sections") or ())
            )
        )
    return tuple(known)


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


# --- pure helpers the rules use ----------------------------------------------------------------


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


def metadata_fields(text: str, names: Sequence[str]) -> dict[str, str]:
    """The first value of each named header of a core metadata file (headers end at a blank line)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and key in names and key not in found:
            found[key] = value.strip()
    return found


def _python_tag_version(interpreter: str) -> str | None:
    """'cp312' -> '3.12'; 'py3' -> None."""
    match = re.match(r"^(?:cp|pp)3(\d+)$", interpreter)
    return f"3.{match.group(1)}" if match else None


def _fmt(version: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in version)


# --- the rules ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Context:
    wheel: _Wheel
    loaded: LoadedMatrix | None
    variant_name: str | None
    variant: Variant | None
    backend: Backend | None
    runtime_globs: tuple[str, ...]
    release: bool
    expected_version: str | None
    policies: tuple[Policy, ...]

    def provided(self) -> set[str]:
        """Names the wheel's own libraries answer to: file names and sonames."""
        names = {posixpath.basename(e.path) for e in self.wheel.elf_files}
        names.update(e.soname for e in self.wheel.elf_files if e.soname)
        return names


def _na(rule_id: str, ctx: _Context, what: str = "the matrix") -> RuleResult:
    if ctx.loaded is None:
        return RuleResult(rule_id, "not-applicable", f"needs {what} (no matrix file given)")
    return RuleResult(
        rule_id, "not-applicable", f"needs a variant: {ctx.wheel.distribution!r} is no variant's distribution"
    )


def _paths_message(items: Sequence[str], limit: int = 6) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def rule_vendored_runtime(ctx: _Context) -> RuleResult:
    rid = "vendored-runtime"
    if ctx.variant is None:
        return _na(rid, ctx, "the variant's runtime excludes")
    if not ctx.runtime_globs:
        return RuleResult(rid, "pass", f"variant {ctx.variant_name} binds no GPU runtime (no excludes)")
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


def rule_missing_runtime_needed(ctx: _Context) -> RuleResult:
    rid = "missing-runtime-needed"
    if ctx.variant is None or ctx.loaded is None:
        return _na(rid, ctx)
    prefixes = ctx.loaded.runtime_needed(ctx.variant)
    if not prefixes:
        return RuleResult(rid, "not-applicable", f"variant {ctx.variant_name} needs no GPU runtime")
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


def rule_duplicate_library(ctx: _Context) -> RuleResult:
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


def rule_debug_info(ctx: _Context) -> RuleResult:
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


def rule_build_path_rpath(ctx: _Context) -> RuleResult:
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


def _wheel_policy(ctx: _Context, claims: Sequence[PlatformTag]) -> Policy | None:
    if claims:
        libc = min(t.libc for t in claims if t.libc is not None)
        return policy_for(ctx.policies, libc)
    if ctx.loaded is not None:
        floor = parse_platform_tag(ctx.loaded.matrix.platform.floor)
        if floor.libc is not None:
            return policy_for(ctx.policies, floor.libc)
    return ctx.policies[-1] if ctx.policies else None


def rule_platform_floor(ctx: _Context) -> RuleResult:
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
    if ctx.loaded is None:
        if claim is None:
            return RuleResult(rid, "warn", f"{tag_text} is no manylinux tag (no matrix: floor not checked)")
        return RuleResult(rid, "pass", f"symbol versions fit {tag_text} (no matrix: floor not checked)")
    floor = parse_platform_tag(ctx.loaded.matrix.platform.floor)
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


def rule_external_dependency(ctx: _Context) -> RuleResult:
    rid = "external-dependency"
    tags = (parse_platform_tag(x.split("-")[-1]) for x in ctx.wheel.tags)
    claims = [t for t in tags if t.family == "manylinux"]
    policy = _wheel_policy(ctx, claims)
    allowed = policy.libraries if policy is not None else frozenset()
    system = ctx.loaded.matrix.platform.system_libraries if ctx.loaded is not None else ()
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


def rule_device_code(ctx: _Context) -> RuleResult:
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
                f"GPU code objects{archs} in {_paths_message(what)}, but variant {ctx.variant_name} "
                "declares device_code: false",
                tuple(e.path for e in carrying),
            )
        message = f"no GPU code objects (variant {ctx.variant_name}: device_code: false)"
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


def rule_wheel_name(ctx: _Context) -> RuleResult:
    rid = "wheel-name"
    if ctx.loaded is None:
        return _na(rid, ctx)
    problems: list[str] = []
    w = ctx.wheel
    if ctx.variant is None:
        expected = ", ".join(v.distribution for v in ctx.loaded.matrix.variants.values())
        problems.append(f"distribution {w.distribution!r} is no variant's (expected one of: {expected})")
    elif canonicalize_name(w.distribution) != canonicalize_name(ctx.variant.distribution):
        expected = ctx.variant.distribution
        problems.append(f"distribution {w.distribution!r} is not variant {ctx.variant_name}'s {expected!r}")
    pythons = ctx.loaded.matrix.python
    for interpreter in sorted({t.split("-")[0] for t in w.tags}):
        version = _python_tag_version(interpreter)
        if version not in pythons:
            problems.append(f"python tag {interpreter} is not one of the matrix's ({', '.join(pythons)})")
    if ctx.expected_version is not None:
        try:
            same = Version(ctx.expected_version.lstrip("v")) == Version(w.version)
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


def rule_non_executable_script(ctx: _Context) -> RuleResult:
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


def rule_variant_conflict(ctx: _Context) -> RuleResult:
    rid = "variant-conflict"
    if ctx.loaded is None:
        return _na(rid, ctx)
    m = ctx.loaded.matrix
    if len(m.variants) < 2:
        return RuleResult(rid, "pass", "the matrix has one variant: no other can share the import package")
    target = f"{m.engine.import_name}/__init__.py"
    member = next((x for x in ctx.wheel.members if x.install_path == target), None)
    sharing = ", ".join(v.distribution for v in m.variants.values())
    if member is None:
        return RuleResult(
            rid,
            "fail",
            f"no {target} in the wheel: nothing stops another variant ({sharing}) from overwriting "
            f"{m.engine.import_name}",
        )
    source = ctx.wheel.read(member.name).decode("utf-8", errors="replace")
    if has_metadata_guard(source):
        message = f"{member.name} checks the installed distributions (importlib.metadata)"
        return RuleResult(rid, "pass", message, (member.name,))
    return RuleResult(
        rid,
        "fail",
        f"{member.name} has no guard: variants {sharing} share the import package "
        f"{m.engine.import_name}; check the installed distributions with importlib.metadata "
        "and refuse to load beside another variant",
        (member.name,),
    )


RULES: tuple[Callable[[_Context], RuleResult], ...] = (
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


# --- verifying one wheel -----------------------------------------------------------------------


def _resolve_variant(
    distribution: str, loaded: LoadedMatrix | None, variant: str | None
) -> tuple[str | None, Variant | None]:
    if variant is not None:
        if loaded is None:
            msg = f"--variant {variant} needs a matrix file (--matrix)"
            raise UsageError(msg)
        return variant, loaded.variant(variant)
    if loaded is None:
        return None, None
    canon = canonicalize_name(distribution)
    for name, candidate in loaded.matrix.variants.items():
        if canonicalize_name(candidate.distribution) == canon:
            return name, candidate
    return None, None


def _member_bytes(view: memoryview, path: Path, info: zipfile.ZipInfo, *, elf_only: bool) -> bytes | None:
    """A member's content, inflated in one call from the mapped wheel (zlib releases the GIL, so
    worker threads overlap). With `elf_only`, None for a member that is not an ELF file."""
    start = _data_start(view, info)
    if info.compress_type == zipfile.ZIP_STORED:
        if elf_only and not is_elf(bytes(view[start : start + 4])):
            return None
        data = bytes(view[start : start + info.file_size])
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        if elf_only:
            probe = zlib.decompressobj(-15)
            if not is_elf(probe.decompress(view[start : start + min(info.compress_size, 4096)], 4)):
                return None
        data = zlib.decompress(view[start : start + info.compress_size], -15, max(info.file_size, 1))
    else:
        with zipfile.ZipFile(path) as zf:
            data = zf.read(info)
        if elf_only and not is_elf(data):
            return None
    if len(data) != info.file_size:
        msg = f"{info.filename}: {len(data)} bytes read, {info.file_size} expected"
        raise zipfile.BadZipFile(msg)
    return data


def _data_start(view: memoryview, info: zipfile.ZipInfo) -> int:
    header = bytes(view[info.header_offset : info.header_offset + 30])
    if len(header) != 30 or header[:4] != b"PK\x03\x04":
        msg = f"{info.filename}: bad local file header"
        raise zipfile.BadZipFile(msg)
    if info.flag_bits & 0x1:
        msg = f"{info.filename}: encrypted members are not supported"
        raise zipfile.BadZipFile(msg)
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    start: int = info.header_offset + 30 + name_len + extra_len
    return start


def _member_image(
    view: memoryview, path: Path, info: zipfile.ZipInfo
) -> bytes | SparseImage | None:
    """An ELF member for inspection, or None if it is not one. A large deflated member is streamed
    through zlib keeping only the pieces `wanted_ranges` names (headers, dynamic section, code,
    section table): its bulk data is never held in memory."""
    if info.compress_type != zipfile.ZIP_DEFLATED or info.file_size < _STREAM_ABOVE:
        return _member_bytes(view, path, info, elf_only=True)
    start = _data_start(view, info)
    end = start + info.compress_size
    inflater = zlib.decompressobj(-15)
    pieces: list[tuple[int, bytes]] = []
    ranges: list[tuple[int, int]] | None = None
    offset = 0
    for step in range(start, end, _STREAM_INPUT):
        pending: bytes | memoryview = view[step : min(end, step + _STREAM_INPUT)]
        while pending:
            out = inflater.decompress(pending, _STREAM_OUTPUT)
            pending = inflater.unconsumed_tail
            if not out:
                continue
            if ranges is None:
                if not is_elf(out):
                    return None
                ranges = wanted_ranges(out, info.file_size)
                if ranges is None:
                    return _member_bytes(view, path, info, elf_only=True)
            stop = offset + len(out)
            if any(lo < stop and offset < hi for lo, hi in ranges):
                pieces.append((offset, out))
            offset = stop
    if offset != info.file_size:
        msg = f"{info.filename}: {offset} bytes inflated, {info.file_size} expected"
        raise zipfile.BadZipFile(msg)
    return SparseImage(info.file_size, pieces)


def _may_be_elf(info: zipfile.ZipInfo) -> bool:
    name = info.filename
    return info.file_size >= 64 and not name.endswith(_NOT_ELF) and ".dist-info/" not in name


def _read_wheel(path: Path, device_sections: Sequence[str]) -> _Wheel:
    distribution, version, tags = _parse_name(path)
    with zipfile.ZipFile(path) as zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
    members = [
        Member(i.filename, install_path(i.filename), i.file_size, (i.external_attr >> 16) & 0o7777)
        for i in infos
    ]
    with path.open("rb") as fh:
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if path.stat().st_size else None
    view = memoryview(mapped) if mapped is not None else memoryview(b"")
    try:
        metadata: dict[str, str] = {}
        for info in infos:
            if info.filename.endswith(".dist-info/METADATA") and info.filename.count("/") == 1:
                raw = _member_bytes(view, path, info, elf_only=False) or b""
                metadata = metadata_fields(raw.decode("utf-8", errors="replace"), ("Name", "Version"))
        elf_files: list[ElfInfo] = []
        candidates = iter([i for i in infos if _may_be_elf(i)])
        # Inflate the next members in worker threads while this one is parsed; a small window
        # bounds the memory held for a large wheel.
        with ThreadPoolExecutor(max_workers=2) as pool:

            def submit(info: zipfile.ZipInfo) -> tuple[zipfile.ZipInfo, Future[bytes | SparseImage | None]]:
                return info, pool.submit(_member_image, view, path, info)

            pending = deque(submit(info) for info in itertools.islice(candidates, _READ_AHEAD))
            while pending:
                info, future = pending.popleft()
                following = next(candidates, None)
                if following is not None:
                    pending.append(submit(following))
                data = future.result()
                if data is None:
                    continue
                try:
                    try:
                        elf = inspect_elf(info.filename, data, device_sections=device_sections)
                    except MissingRange:
                        whole = _member_bytes(view, path, info, elf_only=False) or b""
                        elf = inspect_elf(info.filename, whole, device_sections=device_sections)
                except ElfReadError as exc:
                    msg = f"{path.name}: {exc}"
                    raise VerifyError(msg) from None
                elf_files.append(elf)
                del data
    except (zipfile.BadZipFile, zlib.error) as exc:
        msg = f"{path.name}: cannot read the wheel ({exc})"
        raise VerifyError(msg) from None
    finally:
        view.release()
        if mapped is not None:
            with contextlib.suppress(BufferError):
                mapped.close()
    by_name = {i.filename: i for i in infos}

    def read(member: str) -> bytes:
        with zipfile.ZipFile(path) as zf:
            return zf.read(by_name[member])

    return _Wheel(path, distribution, version, tags, members, elf_files, read, metadata)


def verify_wheel(
    wheel: Path,
    *,
    loaded: LoadedMatrix | None = None,
    variant: str | None = None,
    release: bool = False,
    expected_version: str | None = None,
) -> VerifyReport:
    """Inspect one wheel and apply every rule. Rules that need the matrix (or a variant the wheel
    maps to) say `not-applicable` when it is missing; `release` turns the floor warning into a
    failure; `expected_version` (a release tag like v1.2.0 or a version) is checked by wheel-name."""
    wheel = Path(wheel)
    if not wheel.is_file():
        msg = f"{wheel}: no such wheel file"
        raise UsageError(msg)
    distribution, _version, _tags = _parse_name(wheel)
    variant_name, chosen = _resolve_variant(distribution, loaded, variant)
    backend = loaded.backend(chosen) if loaded is not None and chosen is not None else None
    backends: tuple[Backend | _RuntimeKnowledge, ...] = (
        tuple(loaded.backends.values()) if loaded is not None else _known_backends()
    )
    if chosen is not None and backend is not None:
        globs = tuple(dict.fromkeys((*chosen.exclude, *backend.exclude)))
        sections: tuple[str, ...] = backend.device_code_sections
    else:
        globs = tuple(dict.fromkeys(g for b in backends for g in b.runtime_libraries))
        sections = tuple(dict.fromkeys(s for b in backends for s in b.device_code_sections))

    try:
        contents = _read_wheel(wheel, sections)
        ctx = _Context(
            wheel=contents,
            loaded=loaded,
            variant_name=variant_name,
            variant=chosen,
            backend=backend,
            runtime_globs=globs,
            release=release,
            expected_version=expected_version,
            policies=manylinux_policies(),
        )
        results = tuple(rule(ctx) for rule in RULES)
    except (zipfile.BadZipFile, OSError) as exc:
        msg = f"{wheel.name}: cannot read the wheel ({exc})"
        raise VerifyError(msg) from None
    runtime_bound = sorted({n for e in contents.elf_files for n in e.needed if matches(n, globs)})
    return VerifyReport(
        wheel=wheel,
        size=wheel.stat().st_size,
        unpacked_size=sum(m.size for m in contents.members),
        distribution=contents.distribution,
        version=contents.version,
        tags=contents.tags,
        platform_tags=tuple(sorted({t.split("-")[-1] for t in contents.tags})),
        variant=variant_name,
        matrix=str(loaded.path) if loaded is not None else None,
        release_mode=release,
        runtime_bound=tuple(runtime_bound),
        elf_files=tuple(contents.elf_files),
        rules=results,
    )


# --- the command -------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("wheels", nargs="+", metavar="WHEEL", help="wheel files, or directories of wheels")
    parser.add_argument("--json", action="store_true", help="print the versioned JSON report instead")
    parser.add_argument(
        "--release", action="store_true", help="release mode: a tag newer than the matrix floor fails"
    )
    parser.add_argument("--variant", help="the matrix variant to check against (default: from the name)")
    parser.add_argument(
        "--version", dest="expected_version", metavar="VERSION", help="the version (or tag vX.Y.Z) expected"
    )
    parser.add_argument(
        "--write-reports", action="store_true", help="also write <wheel>.verify.json beside each wheel"
    )


def _collect(arguments: Sequence[str]) -> list[Path]:
    wheels: list[Path] = []
    for argument in arguments:
        path = Path(argument)
        if path.is_dir():
            found = sorted(path.rglob("*.whl"))
            if not found:
                msg = f"{path}: no wheels in this directory"
                raise UsageError(msg)
            wheels.extend(found)
        elif path.is_file():
            wheels.append(path)
        else:
            msg = f"{path}: no such wheel file or directory"
            raise UsageError(msg)
    return wheels


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{n} B"


def render_report(report: VerifyReport) -> str:
    """The readable report: a header, then one line per rule."""
    variant = report.variant or "-"
    lines = [
        report.wheel.name,
        f"  variant {variant}  tags {', '.join(report.tags)}  size {_size(report.size)} "
        f"({_size(report.unpacked_size)} unpacked, {len(report.elf_files)} ELF files)",
        f"  runtime bound: {', '.join(report.runtime_bound) or 'none'}",
    ]
    width = max(len(r) for r in RULE_IDS)
    lines.extend(f"  {_LABEL[r.status]:<4}  {r.id:<{width}}  {r.message}" for r in report.rules)
    if not report.ok:
        failed = [r.id for r in report.rules if r.status == "fail"]
        verdict = f"FAILED ({', '.join(failed)})"
    elif not report.releasable:
        verdict = "ok, not releasable (see WARN)"
    else:
        verdict = "ok, releasable"
    lines.append(f"  result: {verdict}")
    return "\n".join(lines)


def run(args: argparse.Namespace, loaded: LoadedMatrix | None) -> int:
    wheels = _collect(args.wheels)
    reports: list[VerifyReport] = []
    for wheel in wheels:
        report = verify_wheel(
            wheel,
            loaded=loaded,
            variant=args.variant,
            release=args.release,
            expected_version=args.expected_version,
        )
        reports.append(report)
        if args.write_reports:
            write_report(report)
        if not args.json:
            print(render_report(report), flush=True)
    if args.json:
        document: object = reports[0].to_json() if len(reports) == 1 else [r.to_json() for r in reports]
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    failed = [r for r in reports if not r.ok]
    if failed:
        names = "; ".join(
            f"{r.wheel.name}: {', '.join(x.id for x in r.rules if x.status == 'fail')}" for r in failed
        )
        msg = f"{len(failed)} of {len(reports)} wheels failed verification: {names}"
        raise VerifyError(msg)
    return 0
