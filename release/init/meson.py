"""Reading a meson-python project for `release init`: its options (`meson.options`, or
`meson_options.txt` before meson 1.1), the option that names a per-variant import package, and the
`dependency()` calls of its `meson.build` files (system packages, through `release.init.sysdeps`).

Options reach the build as `setup-args=-DNAME=value` (the matrix's `cmake_defines` of a variant).
An option is taken to name the import package when its description says so ("the variant: names
the import package") and a `meson.build` builds the package name from it
(`'mylib_' + get_option('variant')`); each variant then ships `mylib_<its value>`, and no variant
guard is needed: no two variants share a package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MAX_BYTES = 1 << 20
OPTION_FILES = ("meson.options", "meson_options.txt")
_STRING = r"'(?:[^'\\\n]|\\.)*'"
_OPTION = re.compile(rf"\boption\s*\(\s*'([A-Za-z0-9_-]+)'((?:{_STRING}|[^')])*)\)")
_KEYWORD = re.compile(rf"\b(type|value|description|choices)\s*:\s*({_STRING}|\[[^\]]*\]|[A-Za-z0-9_.-]+)")
_NAMES_PACKAGE = re.compile(r"\bimport (?:package|name)", re.I)
_PREFIX = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)'\s*\+\s*get_option\s*\(\s*'([A-Za-z0-9_-]+)'\s*\)")
_DEPENDENCY = re.compile(r"\bdependency\s*\(\s*'([A-Za-z0-9_.+-]+)'")
_COMMENT = re.compile(r"#[^\n]*")


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


def _read(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            return _COMMENT.sub("", handle.read(MAX_BYTES).decode("utf-8", errors="replace"))
    except OSError:
        return ""


def _unquote(text: str) -> str:
    return text[1:-1].replace("\\'", "'") if text.startswith("'") else text


def parse_options(text: str) -> tuple[MesonOption, ...]:
    """The options of a `meson.options` text, in order."""
    found = []
    for match in _OPTION.finditer(text):
        keys = {k: v for k, v in _KEYWORD.findall(match.group(2))}
        choices = tuple(_unquote(c.strip()) for c in keys.get("choices", "[]")[1:-1].split(",") if c.strip())
        found.append(
            MesonOption(
                name=match.group(1),
                type=_unquote(keys.get("type", "'string'")),
                value=_unquote(keys.get("value", "''")),
                description=" ".join(_unquote(keys.get("description", "''")).split()),
                choices=choices,
            )
        )
    return tuple(found)


def is_meson(project_dir: Path, build_backend: str) -> bool:
    return build_backend.startswith("mesonpy") and (project_dir / "meson.build").is_file()


def read_options(project_dir: Path) -> tuple[MesonOption, ...]:
    for name in OPTION_FILES:
        if (project_dir / name).is_file():
            return parse_options(_read(project_dir / name))
    return ()


def meson_files(project_dir: Path) -> list[Path]:
    """The project's `meson.build` files outside subprojects and build directories (bounded)."""
    found: list[Path] = []
    for path in sorted(project_dir.rglob("meson.build")):
        parts = path.relative_to(project_dir).parts[:-1]
        if any(p in ("subprojects", ".git") or p.startswith(("build", ".")) for p in parts):
            continue
        found.append(path)
        if len(found) >= 500:
            break
    return found


def variant_package(project_dir: Path, options: tuple[MesonOption, ...]) -> VariantPackage | None:
    """The option whose description says it names the import package, with the prefix a
    `meson.build` joins it to; None when no option does."""
    named = [o for o in options if _NAMES_PACKAGE.search(o.description)]
    if not named:
        return None
    for path in meson_files(project_dir):
        for prefix, option in _PREFIX.findall(_read(path)):
            chosen = next((o for o in named if o.name == option), None)
            if chosen is not None:
                return VariantPackage(chosen.name, prefix, chosen.choices)
    return None


def dependencies(project_dir: Path) -> list[tuple[str, str]]:
    """Every `dependency('name')` of the project's meson.build files: (name, `path:line`)."""
    found: dict[str, tuple[str, str]] = {}
    for path in meson_files(project_dir):
        text = _read(path)
        shown = path.relative_to(project_dir).as_posix()
        for match in _DEPENDENCY.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.setdefault(match.group(1).lower(), (match.group(1), f"{shown}:{line}"))
    return list(found.values())
