"""Reading a project for `release init`: its pyproject.toml, its CMake options, and built wheels."""

from __future__ import annotations

import configparser
import os
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from release.errors import UsageError
from release.init.meson import MesonOption, VariantPackage, is_meson, read_options, variant_package
from release.init.sources import read_source
from release.init.sysdeps import cmake_files
from release.inspect.elf import ElfReadError, inspect_elf, is_elf
from release.wheel.archive import MAX_TEXT_MEMBER, is_dist_info
from release.wheel.inflate import Budget, budget_for, pieces, read_member
from release.wheel.zip import Archive, read_directory

SKBUILD = "scikit_build_core"


LOADER_GLOBS = ("ld-linux*.so*", "ld64.so*")


_NOT_PACKAGES = {"test", "tests", "docs", "doc", "examples", "benchmarks", "build", "scripts", "tools"}


@dataclass(frozen=True)
class CMakeOption:
    """One `option(NAME "help" DEFAULT)` of the project's CMake files."""

    name: str
    help: str
    default: str


@dataclass(frozen=True, kw_only=True)
class Project:
    """What `pyproject.toml` and the project tree say."""

    path: Path
    name: str
    version: str | None
    description: str | None
    build_backend: str
    requires_python: str | None
    console_scripts: tuple[str, ...]
    import_name: str
    cmake: bool
    cmake_backend_variable: str | None = None
    cmake_backend_values: tuple[str, ...] = ()
    cmake_options: tuple[CMakeOption, ...] = ()
    package_dir: Path | None = None
    readme: bool = True
    meson: bool = False
    """A meson-python project with a meson.build (its options are `meson_options`)."""
    meson_options: tuple[MesonOption, ...] = ()
    variant_package: VariantPackage | None = None
    """The meson option that names each variant's own import package (`mylib_<value>`)."""
    own_libraries: tuple[str, ...] = ()
    """Globs of the shared libraries the CMake files build (`add_library(x SHARED)`, its
    `OUTPUT_NAME`): `libasio*` for Mooncake's `asio_shared`."""


@dataclass(frozen=True, kw_only=True)
class WheelFacts:
    """What built wheels of the project carry."""

    names: tuple[str, ...] = ()
    needed: tuple[str, ...] = ()
    provided: tuple[str, ...] = ()
    scripts: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()


Spellings = Mapping[str, Sequence[str]]
"""Backend name -> how CMake projects name it (`Backend.spellings`, from the backend data)."""


def cmake_value(backend: str, values: Sequence[str], spellings: Spellings) -> str:
    """The value a CMake backend switch takes for a toolkit backend (rocm -> hip when it says hip)."""
    if not values or backend in values:
        return backend
    for spelling in spellings.get(backend, ()):
        if spelling in values:
            return spelling
    return backend


def parse_cmake_backend(text: str) -> tuple[str | None, tuple[str, ...]]:
    """A `<X>_BACKEND` cache variable of a CMakeLists.txt and the values its STRINGS property lists.
    Linear in the text: `[^()]*` stops at the next parenthesis (`[^)]*` rescanned the rest of the
    file from every `set(`: 80 s for 280 KB)."""
    match = re.search(r"\bset\s*\(\s*([A-Za-z][A-Za-z0-9_]*_BACKEND)\b[^()]*\bCACHE\b", text)
    if match is None:
        match = re.search(r"\boption\s*\(\s*([A-Za-z][A-Za-z0-9_]*_BACKEND)\b", text)
    if match is None:
        return None, ()
    name = match.group(1)
    strings = re.search(
        rf"set_property\s*\(\s*CACHE\s+{re.escape(name)}\s+PROPERTY\s+STRINGS\s+([^()]*)\)", text
    )
    values = tuple(v.strip("\"'") for v in strings.group(1).replace(";", " ").split()) if strings else ()
    return name, values


_OPTION = re.compile(
    r"""\boption\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s+"([^"]*)"(?:\s+([A-Za-z0-9_${}]+))?\s*\)"""
)
_SWITCH_VERBS = {"use", "with", "enable", "build", "have"}


def parse_cmake_options(text: str) -> tuple[CMakeOption, ...]:
    """The `option()`s of CMake text, in order, each once (a later one does not redefine it)."""
    seen: dict[str, CMakeOption] = {}
    for match in _OPTION.finditer(text):
        name, help_text, default = match.group(1), match.group(2), (match.group(3) or "OFF")
        seen.setdefault(name, CMakeOption(name, " ".join(help_text.split()), default.upper()))
    return tuple(seen.values())


def option_backend(name: str, spellings: Spellings) -> str | None:
    """The backend an option switches on, by its name: `USE_CUDA`, `WITH_HIP`, `FOO_ENABLE_MUSA`;
    None for other options (`USE_CUDA_GRAPHS` tunes CUDA, it does not select it)."""
    words = name.lower().split("_")
    if len(words) < 2 or words[-2] not in _SWITCH_VERBS:
        return None
    return next((backend for backend, names in spellings.items() if words[-1] in names), None)


def find_package_dir(project_dir: Path, pyproject: Mapping[str, Any], import_name: str) -> Path | None:
    """The directory of the import package in the source tree, where its `__init__.py` lives."""
    candidates: list[Path] = []
    skbuild = _table(pyproject, "tool", "scikit-build", "wheel").get("packages")
    if isinstance(skbuild, list):
        named = [str(p) for p in skbuild if posixpath.basename(str(p).rstrip("/")) == import_name]
        candidates += [project_dir / p for p in named]
    package_dir = _table(pyproject, "tool", "setuptools").get("package-dir")
    if isinstance(package_dir, Mapping):
        if isinstance(package_dir.get(import_name), str):
            candidates.append(project_dir / package_dir[import_name])
        if isinstance(package_dir.get(""), str):
            candidates.append(project_dir / package_dir[""] / import_name)
    candidates += [project_dir / where / import_name for where in (".", "src", "python", "py")]
    return next((c for c in candidates if c.is_dir()), None)


def _table(data: Mapping[str, Any], *keys: str) -> Mapping[str, Any]:
    current: Any = data
    for key in keys:
        current = current.get(key, {}) if isinstance(current, Mapping) else {}
    return current if isinstance(current, Mapping) else {}


def find_import_name(project_dir: Path, pyproject: Mapping[str, Any], name: str) -> str:
    """The top-level package: from the backend's package settings, else the tree, else the name."""
    wanted = re.sub(r"[-.]+", "_", name).lower()
    skbuild = _table(pyproject, "tool", "scikit-build", "wheel").get("packages")
    if isinstance(skbuild, list) and skbuild:
        return posixpath.basename(str(skbuild[0]).rstrip("/"))
    packages = _table(pyproject, "tool", "setuptools").get("packages")
    if isinstance(packages, list):
        tops = [str(p) for p in packages if "." not in str(p)]
        if tops:
            return tops[0]
    found: list[str] = []
    for where in (project_dir, project_dir / "src", project_dir / "python"):
        if where.is_dir():
            found += sorted(
                p.parent.name
                for p in where.glob("*/__init__.py")
                if p.parent.name.isidentifier() and p.parent.name not in _NOT_PACKAGES
            )
    for candidate in found:
        if wanted.startswith(candidate.lower()) or candidate.lower().startswith(wanted):
            return candidate
    return found[0] if found else wanted


def read_project(project_dir: Path) -> Project:
    file = project_dir / "pyproject.toml"
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        msg = f"{file}: cannot read ({exc.strerror}); init needs a PEP 517 project with a pyproject.toml"
        raise UsageError(msg) from None
    try:
        data: dict[str, Any] = tomlkit.parse(text).unwrap()
    except TOMLKitError as exc:
        msg = f"{file}: invalid TOML ({exc})"
        raise UsageError(msg) from None
    project = _table(data, "project")
    name = project.get("name")
    if not isinstance(name, str) or not name:
        msg = f"{file}: no [project] name (PEP 621): the toolkit names every variant from it"
        raise UsageError(msg)
    backend = str(_table(data, "build-system").get("build-backend") or "setuptools.build_meta:__legacy__")
    skbuild = backend.startswith(SKBUILD)
    cmake_dir = project_dir / str(_table(data, "tool", "scikit-build", "cmake").get("source-dir", "."))
    cmake = (cmake_dir / "CMakeLists.txt").is_file() and (skbuild or cmake_dir == project_dir / ".")
    cmake_text = _cmake_text(cmake_dir) if cmake else ""
    variable, values = parse_cmake_backend(cmake_text) if cmake else (None, ())
    scripts = _table(data, "project", "scripts")
    version = project.get("version")
    description = project.get("description")
    requires = project.get("requires-python")
    meson = is_meson(project_dir, backend)
    options = read_options(project_dir) if meson else ()
    per_variant = variant_package(project_dir, options) if meson else None
    import_name = per_variant.family if per_variant else find_import_name(project_dir, data, name)
    return Project(
        path=project_dir,
        name=name,
        version=str(version) if isinstance(version, str) else None,
        description=str(description) if isinstance(description, str) else None,
        build_backend=backend,
        requires_python=str(requires) if isinstance(requires, str) else None,
        console_scripts=tuple(str(s) for s in scripts),
        import_name=import_name,
        cmake=cmake,
        cmake_backend_variable=variable,
        cmake_backend_values=values,
        cmake_options=parse_cmake_options(cmake_text),
        package_dir=find_package_dir(project_dir, data, import_name),
        readme="readme" in project or "readme" in project.get("dynamic", ()),
        meson=meson,
        meson_options=options,
        variant_package=per_variant,
        own_libraries=own_library_globs(cmake_dir) if cmake else (),
    )


MAX_INCLUDES = 200
_INCLUDE = re.compile(r"\binclude\s*\(\s*\"?([A-Za-z0-9_./${}+-]+)\"?[^()]*\)", re.IGNORECASE)
_SOURCE_DIRS = ("${CMAKE_CURRENT_SOURCE_DIR}/", "${CMAKE_CURRENT_LIST_DIR}/", "${PROJECT_SOURCE_DIR}/",
                "${CMAKE_SOURCE_DIR}/")  # fmt: skip
_CMAKE_COMMENT = re.compile(r"#[^\n]*")


def _included(name: str, here: Path, root: Path) -> Path | None:
    """The file an `include(name)` reads, where init can tell: a path relative to the including
    file's directory (or one of the source-directory variables), or a module in `cmake/`."""
    for prefix in _SOURCE_DIRS:
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    if "$" in name:
        return None
    if name.endswith(".cmake"):
        candidates = [here / name, root / name]
    else:
        candidates = [here / "cmake" / f"{name}.cmake", root / "cmake" / f"{name}.cmake"]
    for candidate in candidates:
        resolved = candidate.resolve()
        if resolved.is_relative_to(root) and resolved.is_file():
            return resolved
    return None


def _cmake_text(directory: Path) -> str:
    """The top-level CMakeLists.txt, the files it `include()`s (followed, each once, bounded), and
    `cmake/*.cmake`: where a project's options and its backend switch are."""
    root = directory.resolve()
    queue = [root / "CMakeLists.txt", *sorted((root / "cmake").glob("*.cmake"))[:MAX_INCLUDES]]
    seen: set[Path] = set()
    texts: list[str] = []
    while queue and len(seen) < MAX_INCLUDES:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        text = read_source(path)
        if text is None:
            continue
        text = _CMAKE_COMMENT.sub("", text)
        texts.append(text)
        for match in _INCLUDE.finditer(text):
            found = _included(match.group(1), path.parent, root)
            if found is not None and found not in seen:
                queue.append(found)
    return "\n".join(texts)


_SHARED = re.compile(r"\badd_library\s*\(\s*([A-Za-z0-9_.+-]+)\s+(?:SHARED|MODULE)\b", re.IGNORECASE)
_OUTPUT_NAME = re.compile(
    r"\bset_target_properties\s*\(\s*([A-Za-z0-9_.+-]+)\b[^()]*?\bOUTPUT_NAME\s+\"?([A-Za-z0-9_.+-]+)",
    re.IGNORECASE,
)


def own_library_globs(directory: Path) -> tuple[str, ...]:
    """`lib<name>*` for each shared library the project's CMake files add (`add_library(x SHARED)`),
    by its `OUTPUT_NAME` where one is set."""
    shared: list[str] = []
    renamed: dict[str, str] = {}
    for path in cmake_files(directory):
        text = read_source(path)
        if text is None:
            continue
        text = _CMAKE_COMMENT.sub("", text)
        shared += [m.group(1) for m in _SHARED.finditer(text)]
        renamed.update((m.group(1), m.group(2)) for m in _OUTPUT_NAME.finditer(text))
    names = [renamed.get(target, target) for target in shared if "$" not in renamed.get(target, target)]
    return tuple(dict.fromkeys(f"lib{name.removeprefix('lib')}*" for name in names))


def read_wheels(wheels: Sequence[Path]) -> WheelFacts:
    """NEEDED names, names the wheels provide, scripts and top-level packages of built wheels."""
    needed: set[str] = set()
    provided: set[str] = set()
    scripts: set[str] = set()
    packages: set[str] = set()
    for wheel in wheels:
        try:
            with wheel.open("rb") as fh:
                archive = Archive(fh.fileno(), os.fstat(fh.fileno()).st_size)
                budget = Budget(budget_for(archive.size))
                for entry in read_directory(archive):
                    member = entry.name
                    top = member.split("/", 1)[0]
                    if member.endswith("/__init__.py") and member.count("/") == 1:
                        packages.add(top)
                    if re.match(r"^[^/]+\.data/scripts/[^/]+$", member):
                        scripts.add(posixpath.basename(member))
                    if is_dist_info(member, "entry_points.txt"):
                        text = read_member(archive, entry, budget, most=MAX_TEXT_MEMBER)
                        scripts.update(_console_scripts(text.decode("utf-8", "replace")))
                    if entry.is_dir or entry.is_symlink or entry.size < 64:
                        continue
                    data = b"".join(pieces(archive, entry, budget))
                    if not is_elf(data[:4]):
                        continue
                    try:
                        elf = inspect_elf(member, data)
                    except ElfReadError:
                        continue
                    needed.update(elf.needed)
                    provided.add(posixpath.basename(member))
                    if elf.soname:
                        provided.add(elf.soname)
        except (OSError, ValueError) as exc:  # ZipError is a ValueError
            msg = f"--wheel {wheel}: not a readable wheel ({exc})"
            raise UsageError(msg) from None
    return WheelFacts(
        names=tuple(w.name for w in wheels),
        needed=tuple(sorted(needed)),
        provided=tuple(sorted(provided)),
        scripts=tuple(sorted(scripts)),
        packages=tuple(sorted(packages)),
    )


def _console_scripts(text: str) -> list[str]:
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    return list(parser["console_scripts"]) if parser.has_section("console_scripts") else []


def policy_libraries(floor: str) -> frozenset[str]:
    """The libraries auditwheel's policy for the floor allows (e.g. manylinux_2_28)."""
    from release.inspect.verify import manylinux_policies  # noqa: PLC0415 (auditwheel's data, read on use)

    name = re.sub(r"_(x86_64|aarch64|i686|ppc64le|s390x|armv7l)$", "", floor)
    for policy in manylinux_policies():
        if policy.name == name:
            return policy.libraries
    msg = f"auditwheel has no {name} policy"
    raise UsageError(msg)
