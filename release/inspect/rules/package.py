"""Rules about the package as installed: its name and tags, its scripts, and the guard that keeps
two variants of one import package apart."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from release.inspect.rules.registry import Finding, RuleContext, listing, not_applicable, rule
from release.plan.version import tag_version
from release.wheel.names import interpreters_of, tag_python

# Calls of importlib.metadata that can see the other installed distributions.
_GUARD_CALLS = frozenset({"distributions", "packages_distributions", "distribution", "metadata"})
_METADATA_MODULES = frozenset({"importlib.metadata", "importlib_metadata"})
MAX_GUARD_SOURCE = 1 << 20
"""An `__init__.py` larger than this is not parsed for the guard (no real one comes close)."""
DEFAULT_SIZE_LIMIT = 100 << 20
"""PyPI's upload limit per file (100 MiB) unless the project was granted more."""


def _same_version(a: str | None, b: str) -> bool:
    try:
        return a is not None and Version(a) == Version(b)
    except InvalidVersion:
        return False


@rule("wheel-name")
def wheel_name(ctx: RuleContext) -> Finding:
    """Distribution name, version or tag not what the matrix expects."""
    if ctx.variant is None:
        return not_applicable(ctx)
    problems: list[str] = []
    w = ctx.wheel
    if canonicalize_name(w.distribution) != canonicalize_name(ctx.variant.distribution):
        expected = ctx.variant.distribution
        problems.append(f"distribution {w.distribution!r} is not variant {ctx.variant.name}'s {expected!r}")
    pythons = ctx.variant.pythons
    for interpreter in interpreters_of(w.tags):
        version = tag_python(interpreter)
        if version is None or f"{version[0]}.{version[1]}" not in pythons:
            problems.append(f"python tag {interpreter} is not one of the matrix's ({', '.join(pythons)})")
    if ctx.expected_version is not None and not _same_version(
        tag_version(ctx.expected_version, ctx.variant.tag_pattern), w.version
    ):
        problems.append(f"version {w.version} is not the expected {ctx.expected_version}")
    meta_name, meta_version = w.metadata.get("Name"), w.metadata.get("Version")
    if meta_name is None or canonicalize_name(meta_name) != canonicalize_name(w.distribution):
        problems.append(f"METADATA Name {meta_name!r} does not match the file name's {w.distribution!r}")
    if meta_version != w.version and not _same_version(meta_version, w.version):
        problems.append(f"METADATA Version {meta_version!r} does not match the file name's {w.version!r}")
    if problems:
        return Finding("fail", "; ".join(problems))
    return Finding("pass", f"{w.distribution} {w.version} for {', '.join(w.tags)} is what the matrix expects")


@rule("non-executable-script")
def non_executable_script(ctx: RuleContext) -> Finding:
    """A shipped binary or script without its run bit."""
    executables = {e.path for e in ctx.wheel.elf_files if e.executable}
    checked = [
        m for m in ctx.wheel.members if m.install_path.startswith("<scripts>/") or m.name in executables
    ]
    bad = [m.name for m in checked if not (m.mode & 0o111)]
    if bad:
        return Finding(
            "fail", f"no run bit in the zip for {listing(bad)}: installed, it cannot be executed", tuple(bad)
        )
    if not checked:
        return Finding("pass", "no scripts or executables in the wheel")
    return Finding("pass", f"{len(checked)} scripts/executables carry the run bit")


@dataclass
class _MetadataNames:
    """The local names a module binds, by its imports, to what the guard calls go through."""

    modules: set[str] = field(default_factory=set)  # bound to importlib.metadata
    functions: set[str] = field(default_factory=set)  # bound to one of the guard calls
    importlib: set[str] = field(default_factory=set)  # bound to the importlib package

    def add_import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name in _METADATA_MODULES and alias.asname:
                self.modules.add(alias.asname)
            elif alias.name == "importlib_metadata":
                self.modules.add("importlib_metadata")
            elif alias.name.startswith("importlib"):
                self.importlib.add(alias.asname or "importlib")

    def add_import_from(self, node: ast.ImportFrom) -> None:
        if node.level != 0:
            return
        if node.module in _METADATA_MODULES:
            self.functions.update(a.asname or a.name for a in node.names if a.name in _GUARD_CALLS)
        elif node.module == "importlib":
            self.modules.update(a.asname or a.name for a in node.names if a.name == "metadata")

    def is_metadata_module(self, expr: ast.expr) -> bool:
        if isinstance(expr, ast.Name):
            return expr.id in self.modules
        return (
            isinstance(expr, ast.Attribute)
            and expr.attr == "metadata"
            and isinstance(expr.value, ast.Name)
            and expr.value.id in self.importlib
        )

    def is_guard_call(self, node: ast.Call) -> bool:
        func = node.func
        if isinstance(func, ast.Name) and func.id in self.functions:
            return True
        return (
            isinstance(func, ast.Attribute)
            and func.attr in _GUARD_CALLS
            and self.is_metadata_module(func.value)
        )


def has_metadata_guard(source: str) -> bool:
    """Whether Python source calls importlib.metadata's `distributions`, `packages_distributions`,
    `distribution` or `metadata` (however imported): the guard against a second variant."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    names = _MetadataNames()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.add_import(node)
        elif isinstance(node, ast.ImportFrom):
            names.add_import_from(node)
    return any(isinstance(node, ast.Call) and names.is_guard_call(node) for node in ast.walk(tree))


@rule("variant-conflict")
def variant_conflict(ctx: RuleContext) -> Finding:
    """The import package is not guarded against another variant being installed beside it."""
    if ctx.variant is None:
        return not_applicable(ctx)
    import_name = ctx.variant.import_name
    if len(ctx.variant.sharing) < 2:
        if len(ctx.variant.siblings) < 2:
            return Finding("pass", "the matrix has one variant: no other can share the import package")
        return Finding("pass", f"no other variant of the matrix ships {import_name} (its own import package)")
    target = f"{import_name}/__init__.py"
    member = next((x for x in ctx.wheel.members if x.install_path == target), None)
    sharing = ", ".join(ctx.variant.sharing)
    if member is None:
        return Finding(
            "fail",
            f"no {target} in the wheel: nothing stops another variant ({sharing}) from overwriting "
            f"{import_name}",
        )
    if member.size > MAX_GUARD_SOURCE:
        return Finding(
            "fail",
            f"{member.name} is {member.size} bytes: too large to be checked for the guard",
            (member.name,),
        )
    source = ctx.wheel.read(member.name).decode("utf-8", errors="replace")
    if has_metadata_guard(source):
        return Finding(
            "pass", f"{member.name} checks the installed distributions (importlib.metadata)", (member.name,)
        )
    return Finding(
        "fail",
        f"{member.name} has no guard: variants {sharing} share the import package "
        f"{import_name}; check the installed distributions with importlib.metadata "
        "and refuse to load beside another variant",
        (member.name,),
    )


@rule("size-limit")
def size_limit(ctx: RuleContext) -> Finding:
    """The wheel is larger than the index takes per file."""
    size = ctx.wheel.size
    variant = ctx.variant
    limit = variant.size_limit if variant is not None else DEFAULT_SIZE_LIMIT
    which = (
        f"the {limit / 2**20:.0f} MiB a file the matrix grants {variant.distribution}"
        if variant is not None and limit != DEFAULT_SIZE_LIMIT
        else "PyPI's default 100 MiB a file"
    )
    if size <= limit:
        return Finding("pass", f"{size / 1e6:.1f} MB, within {which}")
    if ctx.variant is None:
        message = f"{size / 1e6:.1f} MB is over {which}: its project needs a larger limit (no matrix)"
        return Finding("warn", message)
    return Finding(
        "fail",
        f"{size / 1e6:.1f} MB is over {which}: the index refuses the upload (ask PyPI for a larger limit "
        "and declare it as publish.size_limit or the variant's size_limit, or make the wheel smaller)",
    )
