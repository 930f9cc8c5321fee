"""Rules about the libraries a wheel ships: each once, stripped, and found through paths inside it."""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from typing import Literal

from release.inspect.rules.registry import Finding, RuleContext, listing, rule


@rule("duplicate-library")
def duplicate_library(ctx: RuleContext) -> Finding:
    """The same library shipped twice, under any names."""
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
        return Finding("fail", "the same library is shipped twice: " + "; ".join(duplicates), tuple(paths))
    return Finding("pass", f"{len(ctx.wheel.elf_files)} ELF files, no library shipped twice")


@rule("debug-info")
def debug_info(ctx: RuleContext) -> Finding:
    """Unstripped debug sections."""
    found = [e for e in ctx.wheel.elf_files if e.debug_sections]
    if found:
        names = [f"{e.path} ({len(e.debug_sections)} .debug sections)" for e in found]
        return Finding(
            "fail",
            f"unstripped debug info: {listing(names)} (strip with `strip --strip-debug`)",
            tuple(e.path for e in found),
        )
    return Finding("pass", "no .debug_* sections")


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


@rule("build-path-rpath")
def build_path_rpath(ctx: RuleContext) -> Finding:
    """RPATH/RUNPATH pointing outside the wheel."""
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
        return Finding(
            "fail",
            f"RPATH/RUNPATH outside the wheel: {listing(bad)} "
            "(only $ORIGIN-relative paths inside the wheel are portable)",
            tuple(paths),
        )
    return Finding("pass", "every RPATH/RUNPATH is $ORIGIN-relative inside the wheel")


PADDING_SHARE = 0.5
PADDING_LEAST = 1 << 20
"""A library is flagged when more than half of it, and at least 1 MiB, is padding."""


@rule("padding")
def padding(ctx: RuleContext) -> Finding:
    """A library whose bytes are mostly alignment padding (a relink or patchelf with a large page size)."""
    padded = [
        e for e in ctx.wheel.elf_files if e.padding >= PADDING_LEAST and e.padding > PADDING_SHARE * e.size
    ]
    if padded:
        what = [f"{e.path} ({e.padding / e.size:.0%} of {e.size / 1e6:.1f} MB)" for e in padded]
        return Finding(
            "fail",
            f"mostly alignment padding: {listing(what)} (rewritten with a 2 MiB page size, as patchelf does "
            "unless given --page-size 4096; relink or re-run repair with a 4 KiB page size)",
            tuple(e.path for e in padded),
        )
    total = sum(e.padding for e in ctx.wheel.elf_files)
    return Finding("pass", f"{total} bytes of padding in {len(ctx.wheel.elf_files)} ELF files")
