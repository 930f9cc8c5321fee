"""Rules about the Pythons a wheel is for: its interpreter and ABI tags against its extension
modules' file names, libpython, Requires-Python, and the free-threading classifiers.

The tags are parsed by `packaging`, the file names by `release.inspect.abitags`: a `cp314t` wheel
holds `cpython-314t` modules, a `cp315` wheel `cpython-315` ones, an `abi3` wheel `.abi3.so`, an
`abi3.abi3t` wheel (PEP 803, 3.15 on) `.abi3t.so`; a wheel whose abi3 tag admits Pythons below
3.15 holds no `.abi3-<triplet>.so`, which those cannot import.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from release.inspect.abitags import FREE_THREADED_STABLE, AbiTag, abi_tags, loads, module_name
from release.inspect.rules.registry import Finding, RuleContext, listing, matches, original_name, rule
from release.wheel.archive import WheelReadError, parse_metadata

LIBPYTHON = ("libpython3*.so*", "libpython*.so*")
FREE_THREADING = "Programming Language :: Python :: Free Threading"
"""The classifiers' prefix (`… :: 3 - Stable`) a free-threaded wheel's project declares."""
_PATCHES = 100
"""Patch releases tried for a minor version (`Requires-Python: >=3.9, !=3.9.0` admits 3.9)."""


def _tag_problems(tags: Sequence[AbiTag]) -> list[str]:
    problems = []
    for tag in tags:
        if tag.abi == "abi3t" and (tag.version is None or tag.version < FREE_THREADED_STABLE):
            problems.append(f"{tag.spelled}: abi3t is the stable ABI of CPython 3.15 and later (PEP 803)")
        if tag.abi_version is not None and tag.version is not None and tag.abi_version != tag.version:
            problems.append(f"{tag.spelled}: the interpreter and ABI tags name different Pythons")
    return problems


@rule("module-suffix")
def module_suffix(ctx: RuleContext) -> Finding:
    """Every extension module's file name is one the Pythons of the wheel's tags import: `cp314t`
    ↔ `cpython-314t`, `cp315` ↔ `cpython-315`, `abi3` ↔ `.abi3.so`, `abi3t` ↔ `.abi3t.so`; no
    `.abi3-<triplet>.so` where the tag admits 3.14 or older; `abi3t` only from cp315."""
    tags = abi_tags(ctx.wheel.tags)
    problems = _tag_problems(tags)
    modules = [m for e in ctx.wheel.elf_files if (m := module_name(e.path)) is not None]
    wrong: list[str] = []
    for module in modules:
        why = next((w for t in tags if (w := loads(t, module))), "")
        if why:
            problems.append(f"{module.path}: {why}")
            wrong.append(module.path)
    if problems:
        return Finding(
            "fail",
            f"{ctx.wheel.path.name}: {listing(problems, 4)} (rename the module as the Python that "
            "built it names it, or tag the wheel for the Pythons its modules are for)",
            tuple(wrong),
        )
    if not modules:
        return Finding("not-applicable", "no extension module names a Python ABI (.cpython-*, .abi3*)")
    spelled = sorted({m.spelled for m in modules})
    return Finding(
        "pass",
        f"{len(modules)} extension module(s) ({', '.join(spelled)}) fit the tags "
        f"{', '.join(t.spelled for t in tags)}",
    )


@rule("libpython")
def libpython(ctx: RuleContext) -> Finding:
    """No libpython is grafted into the wheel or NEEDed by it: an extension takes its Python's
    symbols from the interpreter that loads it (auditwheel grafted one into a cp314t wheel)."""
    grafted = [
        m.name
        for m in ctx.wheel.members
        if matches(original_name(posixpath.basename(m.install_path)), LIBPYTHON)
    ]
    linking = [(e.path, n) for e in ctx.wheel.elf_files for n in e.needed if matches(n, LIBPYTHON)]
    if grafted or linking:
        found = [*(f"{g} is a libpython" for g in grafted), *(f"{p} needs {n}" for p, n in linking)]
        return Finding(
            "fail",
            f"{listing(found, 4)}: an extension module must not link libpython (build it without "
            "-lpython, and do not let repair graft the interpreter's library)",
            tuple(dict.fromkeys([*grafted, *(p for p, _n in linking)])),
        )
    return Finding("pass", "no libpython inside and none NEEDed")


def _metadata(ctx: RuleContext) -> tuple[str, list[str]] | None:
    """(Requires-Python, classifiers) of the wheel's METADATA; None when it cannot be read."""
    found = ctx.wheel.dist_info_text("METADATA")
    if found is None:
        return None
    try:
        headers = parse_metadata(found[1])
    except (WheelReadError, ValueError):
        return None
    return str(headers.get("Requires-Python") or ""), [str(c) for c in headers.get_all("Classifier") or []]


def _admits(spec: SpecifierSet, minor: tuple[int, int]) -> bool:
    return any(Version(f"{minor[0]}.{minor[1]}.{patch}") in spec for patch in range(_PATCHES))


@rule("requires-python")
def requires_python(ctx: RuleContext) -> Finding:
    """The METADATA's Requires-Python admits every Python the wheel is tagged for (the oldest one of
    a stable-ABI tag): pip never installs a wheel on a Python its metadata refuses."""
    read = _metadata(ctx)
    if read is None:
        return Finding("not-applicable", "no METADATA to read (wheel-integrity says why)")
    text = read[0].strip()
    if not text:
        return Finding("not-applicable", "the METADATA declares no Requires-Python")
    try:
        spec = SpecifierSet(text)
    except InvalidSpecifier:
        return Finding(
            "fail", f"{ctx.wheel.path.name}: Requires-Python {text[:80]!a} is not a version specifier"
        )
    refused = []
    for tag in abi_tags(ctx.wheel.tags):
        if tag.version is None:
            continue
        if tag.abi_version is not None:
            ok = _admits(spec, tag.version)
        else:  # a stable ABI: some Python from the tag's on
            ok = any(_admits(spec, (tag.version[0], tag.version[1] + n)) for n in range(20))
        if not ok:
            refused.append(tag.spelled)
    if refused:
        return Finding(
            "fail",
            f"{ctx.wheel.path.name}: Requires-Python {text[:80]!a} refuses {', '.join(refused)}, which the "
            "wheel is tagged for (widen Requires-Python or drop the tag)",
        )
    return Finding("pass", f"Requires-Python {text[:80]!a} admits every tag")


@rule("free-threading-classifier")
def free_threading_classifier(ctx: RuleContext) -> Finding:
    """A free-threaded wheel (`cp314t`, `abi3t`) has its project's `Programming Language :: Python
    :: Free Threading` classifier (a warning: the index shows it, no installer reads it)."""
    tags = abi_tags(ctx.wheel.tags)
    threaded = [t.spelled for t in tags if t.free_threaded]
    read = _metadata(ctx)
    declared = [c for c in (read[1] if read else []) if c.startswith(FREE_THREADING)]
    if not threaded:
        if declared:
            return Finding("pass", f"a GIL-enabled wheel of a project that declares {declared[0]!a}")
        return Finding("not-applicable", "not a free-threaded wheel")
    if not declared:
        return Finding(
            "warn",
            f"{ctx.wheel.path.name} is free-threaded ({', '.join(threaded)}) but its METADATA has no "
            f"'{FREE_THREADING} :: …' classifier (add the one for its support level)",
        )
    return Finding("pass", f"free-threaded ({', '.join(threaded)}), classified {declared[0]!a}")
