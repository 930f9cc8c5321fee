"""sbom-lists-grafted: a wheel that grafts libraries names each one in a PEP 770 SBOM.

auditwheel copies a library into `<name>.libs/` as `libfoo-1a2b3c4d.so.1` and, when a distribution
package owns it, writes the package into the dist-info's `sboms/auditwheel.cdx.json`: one library
component per grafted file, whose bom-ref ends in `#` and the sha256 of the file's original path.
The rule finds which grafted file each component is by hashing the likely original paths (the
library's pre-graft name in the directories the loader searches); a component under another path
still counts towards the number listed, so a library is reported only when the SBOM lists fewer
libraries than the wheel grafts. Any other valid PEP 770 SBOM counts too, whoever wrote it
(cargo-cyclonedx, an SPDX tool; CycloneDX makes `metadata.component` optional): a grafted library
is named there when a component or package is called by its name (`libfoo.so.1`, `libfoo`, `foo`).
The rule fails only a grafted library no SBOM names, an SBOM that is not JSON, one not in RECORD,
and one whose PyPI component names another wheel (a rewrite that renamed the wheel must rename it).
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Iterator, Sequence

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from release.inspect.contents import Member, WheelContents
from release.inspect.rules.registry import (
    Finding,
    RuleContext,
    Status,
    is_grafted,
    listing,
    original_name,
    rule,
)
from release.wheel.archive import WheelReadError, parse_record
from release.wheel.sbom import MAX_SBOM, Sbom, SbomError, is_sbom, parse_sbom

LIBRARY_DIRS = (
    "/lib64", "/usr/lib64", "/lib", "/usr/lib",
    "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
    "/usr/local/lib", "/usr/local/lib64",
)  # fmt: skip
"""Where the libraries auditwheel grafts usually come from (manylinux images: `/lib64`; Debian:
the multiarch directories): the original paths tried for each grafted file."""
FIX = (
    "auditwheel names a grafted library only when a distribution package owns it: install it with "
    "the image's package manager, dnf or apt, rather than from source, or keep it out of the wheel "
    "with the variant's exclude or platform.system_libraries"
)


def grafted(wheel: WheelContents) -> list[str]:
    """The libraries auditwheel grafted: `<name>.libs/<lib>-<8 hex>.so*`, directly in that directory."""
    found = []
    for member in wheel.members:
        folder, _, leaf = member.install_path.rpartition("/")
        if folder.endswith(".libs") and "/" not in folder and is_grafted(leaf):
            found.append(member.name)
    return found


def path_hashes(member: str) -> set[str]:
    """sha256 of each path the grafted `member` likely had before auditwheel copied it."""
    name = original_name(posixpath.basename(member))
    return {hashlib.sha256(f"{d}/{name}".encode()).hexdigest() for d in LIBRARY_DIRS}


def library_names(member: str) -> set[str]:
    """What an SBOM may call the grafted `member`: `libfoo.so.1`, `libfoo.so`, `libfoo`, `foo`."""
    name = original_name(posixpath.basename(member)).lower()
    stem = name.partition(".so")[0]
    return {name, f"{stem}.so", stem, stem.removeprefix("lib")} - {""}


def unlisted(libraries: Sequence[str], sboms: Sequence[Sbom]) -> tuple[list[str], int]:
    """(the grafted libraries no component is found for by its path's hash or its name, how many
    libraries the SBOMs name too few): the second is 0 when the components found by no path are
    at least as many as the libraries left over."""
    refs = [ref for sbom in sboms for ref in sbom.listed]
    fragments = {ref.rpartition("#")[2] for ref in refs if "#" in ref}
    named = set().union(*(sbom.named for sbom in sboms)) if sboms else set()
    matched = {lib: path_hashes(lib) & fragments for lib in libraries}
    left = [lib for lib, hit in matched.items() if not hit and not library_names(lib) & named]
    spare = len(refs) - len(set().union(*matched.values()))
    return left, max(0, len(left) - spare)


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _names_the_wheel(sbom: Sbom, member: str, wheel: WheelContents) -> Iterator[str]:
    own = sbom.own
    if own is None:
        return
    named = f"{own.name} {own.version or '(no version)'}"
    if canonicalize_name(own.name) != canonicalize_name(wheel.distribution):
        yield f"{member} names {named}, not {wheel.distribution}"
    elif own.version is None or not _same_version(own.version, wheel.version):
        yield f"{member} names {named}, not version {wheel.version}"
    file_name = own.qualifiers.get("file_name")
    if file_name is not None and file_name != wheel.path.name:
        yield f"{member} names the file {file_name}, not {wheel.path.name}"


def _recorded(wheel: WheelContents) -> set[str] | None:
    """The paths RECORD lists, or None when it cannot be read (wheel-integrity says why)."""
    found = wheel.dist_info_text("RECORD")
    if found is None:
        return None
    try:
        return {entry.path for entry in parse_record(found[1])}
    except WheelReadError:
        return None


def _read(member: Member, wheel: WheelContents, recorded: set[str] | None) -> tuple[Sbom | None, list[str]]:
    if member.size > MAX_SBOM:
        return None, [f"{member.name}: {member.size} bytes, more than verify reads ({MAX_SBOM})"]
    problems = [] if recorded is None or member.name in recorded else [f"{member.name} is not in RECORD"]
    try:
        sbom = parse_sbom(wheel.read(member.name))
    except SbomError as exc:
        return None, [*problems, f"{member.name}: {exc}"]
    return sbom, [*problems, *_names_the_wheel(sbom, member.name, wheel)]


@rule("sbom-lists-grafted")
def sbom_lists_grafted(ctx: RuleContext) -> Finding:
    """A wheel with grafted libraries carries a PEP 770 SBOM that names the wheel and each library."""
    wheel = ctx.wheel
    libraries = grafted(wheel)
    members = [m for m in wheel.members if is_sbom(m.name)]
    if not libraries and not members:
        return Finding("not-applicable", "grafts no library: no SBOM needed")
    recorded = _recorded(wheel)
    sboms: list[Sbom] = []
    problems: list[str] = []
    for member in members:
        sbom, found = _read(member, wheel, recorded)
        problems.extend(found)
        if sbom is not None:
            sboms.append(sbom)
    if problems:
        return Finding(
            "fail",
            f"{wheel.path.name}: its SBOM is wrong: {listing(problems, 4)} (an SBOM is JSON listed in "
            "RECORD; a rewrite that renames the wheel must rename the SBOM's component too, as "
            "`release variants` does)",
            tuple(m.name for m in members),
        )
    if not libraries:
        return Finding("pass", f"grafts no library; {_count_sboms(members)} read")
    status: Status = "fail" if ctx.release else "warn"
    if not sboms:
        return Finding(
            status,
            f"{wheel.path.name} grafts {_count(libraries)} ({listing(libraries, 4)}) and carries no "
            f"CycloneDX SBOM in its dist-info's sboms/ to name their packages ({FIX})",
            tuple(libraries),
        )
    left, short = unlisted(libraries, sboms)
    if short:
        which = "" if short == len(left) else f" ({short} of these)"
        return Finding(
            status,
            f"{wheel.path.name}: its SBOM does not name the package of {short} of the "
            f"{_count(libraries)} it grafts: {listing(left, 4)}{which} ({FIX})",
            tuple(left),
        )
    return Finding("pass", f"the SBOM names the package of each grafted library ({len(libraries)})")


def _count_sboms(members: Sequence[Member]) -> str:
    return "its SBOM" if len(members) == 1 else f"its {len(members)} SBOMs"


def _count(libraries: Sequence[str]) -> str:
    return f"{len(libraries)} {'library' if len(libraries) == 1 else 'libraries'}"
