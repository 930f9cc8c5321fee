"""wheel-integrity: what pip and other installers check before they install a wheel.

Every path stays inside the wheel root (no `..`, no absolute or drive path, no backslash, no NUL),
no member is a symbolic link, no name is there twice or is both a file and a directory, there is
one `.dist-info` directory named for the wheel, WHEEL has a supported version and the file name's
tags, RECORD lists every file with its sha256 and size (and nothing else), and the tags agree with
the ELF files inside: no `any` platform with native code, no native code for another architecture.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from release.inspect.contents import Member, WheelContents
from release.inspect.rules.registry import Finding, RuleContext, listing, rule
from release.wheel.archive import (
    SIGNATURES,
    RecordEntry,
    WheelReadError,
    dist_info_dirs,
    parse_metadata,
    parse_record,
)
from release.wheel.names import parse_platform_tag, split_tag

_DRIVE = re.compile(r"^[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f]")
_PARENT = re.compile(r"(^|/)\.\.(/|$)")
_SUSPECT = re.compile(r"[\x00-\x1f\\]|^/|^[A-Za-z]:|(^|/)\.\.(/|$)")
_STRONG = frozenset({"sha384", "sha512"})
"""RECORD digests installers accept that verify does not recompute (it hashes sha256 only)."""


def path_problem(name: str) -> str | None:
    """Why a member or RECORD path would not install inside the wheel root, or None."""
    if not _SUSPECT.search(name):
        return None
    if _CONTROL.search(name):
        return "a control character or NUL in the name"
    if "\\" in name:
        return "a backslash in the name"
    if name.startswith("/") or _DRIVE.match(name):
        return "an absolute path"
    if _PARENT.search(name):
        return "a '..' component"
    return None


def _names(wheel: WheelContents) -> Iterator[str]:
    for member in wheel.members:
        problem = path_problem(member.name)
        if problem:
            yield f"{member.name!r}: {problem}"
        if member.symlink:
            yield f"{member.name}: a symbolic link"
    for name, count in Counter(m.name for m in wheel.members).items():
        if count > 1:
            yield f"{name}: {count} entries of that name"
    files = sorted({m.name for m in wheel.members})
    for name in files:
        at = bisect.bisect_left(files, name + "/")
        if at < len(files) and files[at].startswith(name + "/"):
            yield f"{name}: both a file and the directory of {files[at]}"


def _dist_info(wheel: WheelContents) -> Iterator[str]:
    names = [m.name for m in wheel.members] + list(wheel.directories)
    dirs = dist_info_dirs(names)
    if len(dirs) != 1:
        yield f"{len(dirs)} .dist-info directories ({', '.join(dirs) or 'none'}), an installer needs one"
        return
    stem = dirs[0].removesuffix(".dist-info")
    name, _, version = stem.rpartition("-")
    if canonicalize_name(name) != canonicalize_name(wheel.distribution) or not _same(version, wheel.version):
        yield f"{dirs[0]} is not the .dist-info of {wheel.distribution} {wheel.version}"
    for leaf in ("METADATA", "WHEEL", "RECORD"):
        if f"{dirs[0]}/{leaf}" not in wheel.texts:
            yield f"no {dirs[0]}/{leaf}"


def _same(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _wheel_file(wheel: WheelContents) -> Iterator[str]:
    found = wheel.dist_info_text("WHEEL")
    if found is None:
        return
    name, text = found
    headers = parse_metadata(text)
    version = str(headers["Wheel-Version"] or "")
    if not re.fullmatch(r"1(\.[0-9]+)?", version.strip(), re.ASCII):
        yield f"{name}: Wheel-Version {version!r} (installers read 1.x)"
    if str(headers["Root-Is-Purelib"] or "").strip().lower() not in ("true", "false"):
        yield f"{name}: no Root-Is-Purelib: true|false"
    tags = sorted({str(t).strip() for t in headers.get_all("Tag") or []})
    if tags != sorted(wheel.tags):
        yield f"{name}: Tag {', '.join(tags) or 'none'}; the file name says {', '.join(sorted(wheel.tags))}"


def _record(wheel: WheelContents) -> Iterator[str]:
    found = wheel.dist_info_text("RECORD")
    if found is None:
        return
    record_name, text = found
    try:
        entries = parse_record(text)
    except WheelReadError as exc:
        yield str(exc)
        return
    listed: dict[str, RecordEntry] = {}
    for entry in entries:
        problem = path_problem(entry.path)
        if problem:
            yield f"RECORD lists {entry.path!r}: {problem}"
        if entry.path in listed:
            yield f"RECORD lists {entry.path} twice"
        listed[entry.path] = entry
    members: Mapping[str, Member] = {m.name: m for m in wheel.members}
    unsigned = {record_name, *(record_name.rsplit("/", 1)[0] + "/" + s for s in SIGNATURES)}
    for entry in entries:
        member = members.get(entry.path)
        if member is None:
            yield f"RECORD lists {entry.path}, which is not in the wheel"
        elif entry.path not in unsigned:
            yield from _record_entry(entry, member)
    missing = [m.name for m in wheel.members if m.name not in listed and m.name not in unsigned]
    if missing:
        yield f"RECORD does not list {listing(missing, 4)}"


def _record_entry(entry: RecordEntry, member: Member) -> Iterator[str]:
    path, algorithm, digest, size = entry.path, entry.algorithm, entry.digest, entry.size
    if algorithm is None or digest is None:
        yield f"RECORD has no hash for {path}"
    elif algorithm == "sha256":
        if digest != member.digest:
            yield f"RECORD's sha256 of {path} is not its content's"
    elif algorithm not in _STRONG:
        yield f"RECORD hashes {path} with {algorithm} (installers need sha256 or stronger)"
    if size is not None and size != member.size:
        yield f"RECORD gives {path} {size} bytes; it has {member.size}"


def _native_code(ctx: RuleContext) -> Iterator[str]:
    elves = ctx.wheel.elf_files
    if not elves:
        return
    tags = [parse_platform_tag(split_tag(t)[2]) for t in sorted(set(ctx.wheel.tags))]
    if any(t.family == "any" for t in tags):
        yield f"platform 'any', yet it carries native code ({listing([e.path for e in elves], 3)})"
        return
    arches = {t.arch for t in tags if t.family in ("manylinux", "musllinux", "linux")}
    if not arches:
        yield f"ELF files in a wheel for {', '.join(t.text for t in tags)}"
        return
    wrong = [f"{e.path} ({e.machine})" for e in elves if e.machine not in arches]
    if wrong:
        yield f"native code for another architecture than {', '.join(sorted(arches))}: {listing(wrong, 4)}"


def integrity_problems(ctx: RuleContext) -> Sequence[str]:
    """Every problem an installer would refuse, in the order they are checked."""
    wheel = ctx.wheel
    return [*_names(wheel), *_dist_info(wheel), *_wheel_file(wheel), *_record(wheel), *_native_code(ctx)]


@rule("wheel-integrity")
def wheel_integrity(ctx: RuleContext) -> Finding:
    """What installers check: paths, links, duplicates, dist-info, WHEEL, RECORD, tags vs ELF files."""
    problems = integrity_problems(ctx)
    if problems:
        return Finding("fail", f"not what installers expect: {listing(problems, 5)}")
    count = len(ctx.wheel.members)
    return Finding("pass", f"{count} files inside the wheel root, each in RECORD with its sha256; tags fit")
