"""`development-files`: what a runtime wheel carries for building against it, not for running.

Headers, pkg-config files, static archives and CMake package configs in a runtime wheel are
usually a build's install step let through (a meson subproject installed 650 headers and a `.pc`
under `.data/`, issue 43): weight for every user and nothing they run. A few are often meant (a
plugin API header), so the rule warns only beyond a small allowance, naming the largest; a variant
that ships them on purpose declares `development_files` (bytes), and `--release` fails beyond it.
"""

from __future__ import annotations

import posixpath

from release.inspect.rules.registry import Finding, RuleContext, rule

ALLOWANCE = 64 * 1024
"""Bytes of development files any wheel may carry without a word (a plugin API header or two)."""
SHOWN = 5
HEADERS = (".h", ".hh", ".hpp", ".hxx", ".h++", ".cuh", ".inl", ".tcc")
CMAKE_CONFIG = ("config.cmake", "configversion.cmake", "-config-version.cmake", "targets.cmake")


def kind_of(member: str) -> str | None:
    """What kind of development file `member` is (its path in the wheel), or None."""
    name = posixpath.basename(member).lower()
    if name.endswith(HEADERS):
        return "headers"
    if name.endswith(".pc"):
        return ".pc files"
    if name.endswith(".a") and not name.endswith(".dll.a"):
        return "static archives"
    parts = member.lower().split("/")
    in_cmake_dir = "cmake" in parts[:-1]
    if name.endswith(CMAKE_CONFIG) or (in_cmake_dir and name.endswith(".cmake")) or "-targets-" in name:
        return "CMake config"
    return None


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


@rule("development-files")
def development_files(ctx: RuleContext) -> Finding:
    """Headers, .pc files, static archives and CMake config beyond a small allowance (warn), or
    beyond the variant's declared `development_files` (fail with --release)."""
    found = [(m.size, m.name, kind) for m in ctx.wheel.members if (kind := kind_of(m.name)) is not None]
    total = sum(size for size, _, _ in found)
    declared = ctx.variant.development_files if ctx.variant is not None else None
    limit = declared if declared is not None else ALLOWANCE
    if not found:
        return Finding("pass", "no headers, .pc files, static archives or CMake config")
    kinds = sorted({kind for _, _, kind in found})
    what = f"{len(found)} development files ({', '.join(kinds)}), {_size(total)}"
    if total <= limit:
        within = "the variant's development_files" if declared is not None else "the allowance"
        return Finding("pass", f"{what}, within {within} ({_size(limit)})")
    largest = sorted(found, key=lambda f: (-f[0], f[1]))[:SHOWN]
    named = ", ".join(f"{name} ({_size(size)})" for size, name, _ in largest)
    paths = tuple(name for _, name, _ in largest)
    if declared is not None:
        message = f"{what}, over the variant's development_files ({_size(declared)}); the largest: {named}"
        return Finding("fail" if ctx.release else "warn", message, paths)
    fix = (
        "leave them out of the install (a subproject's install: false, wheel.exclude), or declare "
        "the variant's development_files (bytes) if they are meant to ship"
    )
    message = f"{what} in a runtime wheel, beyond {_size(ALLOWANCE)}; the largest: {named}: {fix}"
    return Finding("warn", message, paths)
