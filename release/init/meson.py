"""Reading a meson-python project for `release init`: its options (`meson.options`, or
`meson_options.txt` before meson 1.1), the option that names a per-variant import package, and what
its root build asks the system for (`dependency()` and `find_library()`, through
`release.init.sysdeps`).

init follows the root `meson.build` the way meson does: into the `subdir()`s it names, not into
`test/`, `benchmark/` or `examples/` (a release build does not configure them), never into
`subprojects/`. A `dependency()` counts when the build requires it: not `required: false`, and a
`required: get_option(...)` only when that option is on by default or is the variant's own.

Options reach the build as `setup-args=-DNAME=value` (the matrix's `cmake_defines` of a variant).
An option names the import package when the package a `meson.build` installs into
(`subdir:` of `py.extension_module` / `py.install_sources`) is built from it, directly or through
variables: `pkg = 'mylib_' + get_option('variant')`. Each variant then ships `mylib_<its value>`,
and no variant guard is needed: no two variants share a package.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from release.init.meson_code import Code, Part, Token, evaluate, parse, string_value, variables
from release.init.sources import read_source

MAX_BYTES = 1 << 20
MAX_FILES = 500
OPTION_FILES = ("meson.options", "meson_options.txt")
SKIPPED_SUBDIRS = frozenset({
    "test", "tests", "testing", "benchmark", "benchmarks", "bench", "example", "examples", "doc", "docs",
    "subprojects", "fuzz", "fuzzing",
})  # fmt: skip
"""Directories a release build does not configure (or that meson fetches itself)."""
_INSTALLERS = ("extension_module", "install_sources", "install_subdir", "install_data")


@dataclass(frozen=True)
class MesonOption:
    """One `option('name', type: ..., value: ..., description: ...)` of the project."""

    name: str
    type: str
    value: str
    description: str
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class VariantPackage:
    """The option that names each variant's import package, and the package's fixed prefix."""

    option: str
    prefix: str
    choices: tuple[str, ...] = ()

    def import_name(self, value: str) -> str:
        return f"{self.prefix}{value}"

    @property
    def family(self) -> str:
        """The packages' common name (`mylib` of `mylib_cpu`, `mylib_rocm`): the engine's import
        name and the distributions' base."""
        return self.prefix.rstrip("_") or self.prefix


@dataclass(frozen=True)
class MesonFile:
    path: Path
    shown: str
    code: Code


def _text(tokens: Sequence[Token]) -> str:
    """A keyword's value as written in meson.options: a string's value, a list's items joined."""
    if len(tokens) == 1:
        value = string_value(tokens[0])
        return tokens[0].text if value is None else value
    return " ".join(t.text for t in tokens)


def parse_options(text: str) -> tuple[MesonOption, ...]:
    """The options of a `meson.options` text, in order."""
    code = parse(text[: MAX_BYTES * 4])
    found = []
    for call in code.calls_of("option"):
        args = code.arguments(call)
        if args is None or not args.positional:
            continue
        name = string_value(args.positional[0][0]) if len(args.positional[0]) == 1 else None
        if not name:
            continue
        keys = args.keywords
        choices = tuple(value for t in keys.get("choices", ()) if (value := string_value(t)) is not None)
        found.append(
            MesonOption(
                name=name,
                type=_text(keys["type"]) if "type" in keys else "string",
                value=_text(keys["value"]) if "value" in keys else "",
                description=" ".join(_text(keys.get("description", ())).split()),
                choices=choices,
            )
        )
    return tuple(found)


def is_meson(project_dir: Path, build_backend: str) -> bool:
    return build_backend.startswith("mesonpy") and (project_dir / "meson.build").is_file()


def read_options(project_dir: Path) -> tuple[MesonOption, ...]:
    for name in OPTION_FILES:
        text = read_source(project_dir / name, MAX_BYTES)
        if text is not None:
            return parse_options(text)
    return ()


def build_files(project_dir: Path) -> list[MesonFile]:
    """The root `meson.build` and those its `subdir()` calls reach, in the order meson reads them
    (bounded: `MAX_FILES`; a subdir outside the project, through `..` or a link, is not followed)."""
    root = project_dir.resolve()
    found: list[MesonFile] = []
    queue = [root]
    seen: set[Path] = set()
    known: dict[str, tuple[Part, ...]] = {}
    while queue and len(found) < MAX_FILES:
        directory = queue.pop(0)
        if directory in seen:
            continue
        seen.add(directory)
        text = read_source(directory / "meson.build", MAX_BYTES)
        if text is None:
            continue
        code = parse(text)
        shown = (directory / "meson.build").relative_to(root).as_posix()
        found.append(MesonFile(directory / "meson.build", shown, code))
        known = variables(code, known)
        for call in code.calls_of("subdir"):
            args = code.arguments(call)
            if args is None or not args.positional:
                continue
            parts = evaluate(args.positional[0], known)
            if parts is None or not all(isinstance(p, str) for p in parts):
                continue
            relative = "".join(str(p) for p in parts)
            if not relative or relative.split("/", 1)[0] in SKIPPED_SUBDIRS:
                continue
            below = (directory / relative).resolve()
            if below.is_relative_to(root) and below != root:
                queue.append(below)
    return found


def meson_files(project_dir: Path) -> list[Path]:
    """The `meson.build` files the root build reads."""
    return [f.path for f in build_files(project_dir)]


def _all_variables(files: Sequence[MesonFile]) -> dict[str, tuple[Part, ...]]:
    known: dict[str, tuple[Part, ...]] = {}
    for file in files:
        known = variables(file.code, known)
    return known


def _package_of(parts: tuple[Part, ...], named: Mapping[str, MesonOption]) -> VariantPackage | None:
    """`('mylib_', ('option', 'variant'))` (and anything after a `/`) as the variant's package."""
    if len(parts) < 2 or not isinstance(parts[0], str) or not isinstance(parts[1], tuple):
        return None
    prefix, (_, option) = parts[0], parts[1]
    rest = "".join(p if isinstance(p, str) else "?" for p in parts[2:])
    if "/" in prefix or not prefix.replace("_", "a").isalnum() or (rest and not rest.startswith("/")):
        return None
    chosen = named.get(option)
    return VariantPackage(option, prefix, chosen.choices) if chosen is not None else None


def variant_package(project_dir: Path, options: tuple[MesonOption, ...]) -> VariantPackage | None:
    """The option the installed package's name is built from (`subdir: 'mylib_' + get_option(...)`,
    through variables too), with its prefix; else an option whose description says it names the
    import package and a string built from it; None when neither."""
    by_name = {o.name: o for o in options}
    files = build_files(project_dir)
    known = _all_variables(files)
    for file in files:
        for call in file.code.calls_of(*_INSTALLERS):
            args = file.code.arguments(call)
            value = args.keywords.get("subdir") if args is not None else None
            parts = evaluate(value, known) if value else None
            found = _package_of(parts, by_name) if parts else None
            if found is not None:
                return found
    described = {o.name: o for o in options if "import package" in o.description.lower()
                 or "import name" in o.description.lower()}  # fmt: skip
    for parts in known.values():
        found = _package_of(parts, described)
        if found is not None:
            return found
    return None


def _required(
    value: Sequence[Token] | None, options: Mapping[str, MesonOption], variant_option: str | None
) -> bool:
    """Whether a `required:` value makes the dependency needed by a release build: absent or
    `true`; `get_option(x)` when x is on by default; any expression of the variant's option."""
    if not value:
        return True
    words = [t.text for t in value if t.text != "\n"]
    if words == ["true"]:
        return True
    if words == ["false"]:
        return False
    named = {string_value(t) for t in value if t.is_string}
    if variant_option is not None and variant_option in named:
        return True
    if words[:2] == ["get_option", "("] and len(words) == 4 and len(named) == 1:
        option = options.get(next(iter(named)) or "")
        return option is not None and option.value in ("enabled", "true")
    return False


def dependencies(project_dir: Path) -> list[tuple[str, str, str]]:
    """The `dependency('name')` and `find_library('name')` calls the root build requires:
    (kind, name, `path:line`), first mention each."""
    options = {o.name: o for o in read_options(project_dir)}
    package = variant_package(project_dir, tuple(options.values()))
    variant_option = package.option if package is not None else None
    found: dict[tuple[str, str], tuple[str, str, str]] = {}
    for file in build_files(project_dir):
        for call in file.code.calls_of("dependency", "find_library"):
            args = file.code.arguments(call)
            if args is None or not args.positional or len(args.positional[0]) != 1:
                continue
            name = string_value(args.positional[0][0])
            if not name or not _required(args.keywords.get("required"), options, variant_option):
                continue
            kind = "dependency" if call.name == "dependency" else "find_library"
            found.setdefault((kind, name.lower()), (kind, name, f"{file.shown}:{call.line}"))
    return list(found.values())
