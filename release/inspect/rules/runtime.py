"""Rules about the GPU runtime: bound at load time, never vendored, and really linked."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping

from release.inspect.elf import ElfInfo
from release.inspect.rules.registry import Finding, RuleContext, listing, matches, not_applicable, rule

_EXTENSION = re.compile(r"(\.cpython-[^/]*|\.abi3|\.pypy[^/]*)?\.so$")


@rule("vendored-runtime")
def vendored_runtime(ctx: RuleContext) -> Finding:
    """An excluded runtime library is inside the wheel."""
    if ctx.variant is None:
        return not_applicable(ctx, "the variant's runtime excludes")
    if not ctx.excludes:
        return Finding("pass", f"variant {ctx.variant.name} binds no GPU runtime (no excludes)")
    sonames = {e.path: e.soname for e in ctx.wheel.elf_files}
    found = [
        m.name
        for m in ctx.wheel.members
        if matches(posixpath.basename(m.name), ctx.excludes)
        or ((soname := sonames.get(m.name)) is not None and matches(soname, ctx.excludes))
    ]
    if found:
        return Finding(
            "fail",
            f"excluded runtime library vendored into the wheel: {listing(found)} "
            f"(repair must exclude {', '.join(ctx.excludes)} so the loader binds the image's runtime)",
            tuple(found),
        )
    return Finding("pass", f"no library matching {', '.join(ctx.excludes)} is inside the wheel")


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


def is_extension(path: str) -> bool:
    """A Python extension module (`_x.cpython-312-x86_64-linux-gnu.so`, `_x.abi3.so`, `_x.so`),
    not a library (`lib*.so`)."""
    name = posixpath.basename(path)
    return _EXTENSION.search(name) is not None and not name.startswith("lib")


@rule("missing-runtime-needed")
def missing_runtime_needed(ctx: RuleContext) -> Finding:
    """A GPU variant whose extension does not link its runtime: a silent CPU fallback."""
    if ctx.variant is None:
        return not_applicable(ctx)
    prefixes = ctx.variant.runtime_needed
    if not prefixes:
        return Finding("not-applicable", f"variant {ctx.variant.name} needs no GPU runtime")
    by_name: dict[str, ElfInfo] = {}
    for info in ctx.wheel.elf_files:
        by_name[posixpath.basename(info.path)] = info
        if info.soname:
            by_name[info.soname] = info
    extensions = [e for e in ctx.wheel.elf_files if is_extension(e.path)]
    candidates = extensions or ctx.wheel.elf_files
    if not candidates:
        return Finding("fail", f"no ELF file in the wheel, so nothing links {', '.join(prefixes)}")
    linked = [e.path for e in candidates if any(n.startswith(prefixes) for n in _closure(e, by_name))]
    if linked:
        return Finding("pass", f"{listing(linked)} NEED {' or '.join(prefixes)}*", tuple(linked))
    missing = [e.path for e in candidates]
    what = "extension" if extensions else "ELF file"
    return Finding(
        "fail",
        f"no {what} NEEDs {' or '.join(prefixes)}* (directly or through the wheel's libraries): "
        f"{listing(missing)} would run without the GPU (a silent CPU fallback)",
        tuple(missing),
    )


@rule("runtime-abi")
def runtime_abi(ctx: RuleContext) -> Finding:
    """NEEDED runtime sonames are the ones the declared toolkit provides (ROCm 7.x and 10.x: .so.7)."""
    if ctx.variant is None:
        return not_applicable(ctx)
    expected = ctx.variant.runtime_sonames
    prefixes = ctx.variant.runtime_needed
    if not expected or not prefixes:
        return Finding("not-applicable", f"variant {ctx.variant.name} declares no toolkit runtime to check")
    bound = sorted({n for e in ctx.wheel.elf_files for n in e.needed if n.startswith(prefixes)})
    # The driver's libraries (libcuda.so.1) are no toolkit's runtime: a driver-API extension that
    # binds only them works with any install of the declared toolkit's major.
    drivers = [n for n in bound if n in ctx.variant.backend.driver_sonames]
    wrong = [n for n in bound if n not in expected and n not in drivers]
    releases = ctx.variant.backend.releases_providing(expected[0])
    declared = f"{ctx.variant.backend_name} {ctx.variant.toolkit} ({', '.join(expected)}: {releases})"
    if not wrong:
        runtime = [n for n in bound if n not in drivers]
        if drivers and not runtime:
            driver = ctx.variant.backend.driver_name
            return Finding("pass", f"binds {', '.join(drivers)} alone ({driver}), no toolkit runtime")
        shown = ", ".join(bound) or "nothing of the runtime"
        return Finding("pass", f"binds {shown}, as {declared} provides")
    message = f"binds {', '.join(wrong)}, but the matrix declares {declared}"
    if ctx.toolkit_override and not ctx.release:
        return Finding("warn", f"{message}: built with --allow-toolkit-mismatch ({ctx.toolkit_override})")
    return Finding("fail", f"{message}: a user of that runtime gets an import error")
