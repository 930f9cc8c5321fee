"""What system build dependencies `release init` proposes: read from the project's build files.

`find_package(glog ...)`, `pkg_check_modules(RDMA REQUIRED libibverbs librdmacm)`, a bare library
name in `target_link_libraries(engine PRIVATE ibverbs numa)`, `find_path(ASIO_INCLUDE asio.hpp)`
and `find_library(AIO aio)` name what a CMake build needs from the system; meson's `dependency()`
and `find_library()` what a meson build needs (`release.init.meson`). Those the toolkit's table
knows (`system-packages.json`, beside this module) become `engine.system_packages` entries with
their dnf and apt packages and a probe; the others are listed as comments for the maintainer.
Build files are read through `release.init.sources` (regular files, capped, a bounded walk).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from release.config.sysdeps import SystemPackage
from release.init.meson import dependencies as meson_dependencies
from release.init.sources import LineIndex, read_source, walk

TABLE = Path(__file__).with_name("system-packages.json")
MAX_FILES = 2000
MAX_FILE_BYTES = 1 << 20
_SKIP_DIRS = {".git", "build", "_build", "_deps", "third_party", "thirdparty", "3rdparty", "extern",
              "external", "vendor", "node_modules", ".venv", "venv", "dist", "wheelhouse"}  # fmt: skip
_COMMENT = re.compile(r"#[^\n]*")
_FIND_PACKAGE = re.compile(r"\bfind_package\s*\(\s*([A-Za-z0-9_.+-]+)", re.IGNORECASE)
_PKG_CHECK = re.compile(r"\bpkg_(?:check|search)_module(?:s)?\s*\(([^()]*)\)", re.IGNORECASE)
_MESON_BUILTIN = {"dl", "m", "rt", "intl", "iconv", "atomic", "mpi", "blas", "lapack", "cuda", "hip",
                  "python", "python3", "pybind11", "nanobind", "numpy", "threads", "openmp"}  # fmt: skip
"""meson's own dependencies (`dependency('threads')`) and the toolchain's: nothing to install."""
_PKG_KEYWORDS = {"REQUIRED", "QUIET", "NO_CMAKE_PATH", "NO_CMAKE_ENVIRONMENT_PATH", "IMPORTED_TARGET",
                 "GLOBAL"}  # fmt: skip


@dataclass(frozen=True)
class Request:
    """One dependency the CMake files ask for, and where."""

    kind: str
    """`find_package`, `pkg_check_modules` or (meson) `dependency`."""
    name: str
    where: str
    """`path/CMakeLists.txt:12`, relative to the project."""


@dataclass(frozen=True)
class Proposal:
    """What init writes: known entries by name, and the requests it has no packages for."""

    known: Mapping[str, tuple[SystemPackage, Request]]
    unknown: tuple[Request, ...]


def _enter(name: str) -> bool:
    return name not in _SKIP_DIRS and not name.startswith("build")


def cmake_files(project_dir: Path) -> list[Path]:
    """The project's CMakeLists.txt and *.cmake files, outside build and vendored directories
    (a bounded walk that follows no link: at most `MAX_FILES`)."""
    return walk(
        project_dir,
        wanted=lambda name: name == "CMakeLists.txt" or name.endswith(".cmake"),
        enter=_enter,
        most=MAX_FILES,
    )


_LINKED = re.compile(r"\btarget_link_libraries\s*\(([^()]*)\)", re.IGNORECASE)
_FIND_PATH = re.compile(r"\bfind_(path|library)\s*\(([^()]*)\)", re.IGNORECASE)
_ADD_LIBRARY = re.compile(r"\badd_(?:library|executable)\s*\(\s*([A-Za-z0-9_.+-]+)", re.IGNORECASE)
_LINK_KEYWORDS = {"PRIVATE", "PUBLIC", "INTERFACE", "LINK_PRIVATE", "LINK_PUBLIC", "LINK_INTERFACE_LIBRARIES",
                  "DEBUG", "OPTIMIZED", "GENERAL"}  # fmt: skip
_FIND_KEYWORDS = {"NAMES", "HINTS", "PATHS", "PATH_SUFFIXES", "DOC", "REQUIRED", "NO_DEFAULT_PATH",
                  "NAMES_PER_DIR", "NO_CACHE", "ENV", "OPTIONAL"}  # fmt: skip
_BARE = re.compile(r"^(?:-l)?([a-z][a-z0-9_+-]*)$")


def _words(text: str, match: re.Match[str], kind: str, targets: set[str]) -> list[tuple[str, str]]:
    """(kind, name) of what one CMake call asks the system for."""
    found: list[tuple[str, str]] = []
    if kind == "find_package":
        return [(kind, match.group(1))]
    if kind == "pkg_check_modules":
        for word in match.group(1).split()[1:]:  # the first word is the result prefix
            module = re.split(r"[<>=]", word, maxsplit=1)[0]
            if module and word not in _PKG_KEYWORDS and not word.startswith("$"):
                found.append((kind, module))
    elif kind == "target_link_libraries":
        for word in match.group(1).split()[1:]:  # the first word is the target
            bare = _BARE.match(word)
            if bare is not None and word.upper() not in _LINK_KEYWORDS and bare.group(1) not in targets:
                found.append((kind, bare.group(1)))
    else:
        which = "find_path" if match.group(1).lower() == "path" else "find_library"
        for word in match.group(2).split()[1:]:  # the first word is the result variable
            if word.startswith(("$", "/", '"')):
                break  # paths and hints follow the names
            if word.upper() not in _FIND_KEYWORDS:
                found.append((which, word))
    return found


def _cmake_requests(path: Path, shown: str, found: dict[tuple[str, str], Request], targets: set[str]) -> None:
    text = read_source(path)
    if text is None:
        return
    text = _COMMENT.sub(lambda m: " " * len(m.group(0)), text)
    lines = LineIndex(text)
    patterns = (
        ("find_package", _FIND_PACKAGE),
        ("pkg_check_modules", _PKG_CHECK),
        ("target_link_libraries", _LINKED),
        ("find", _FIND_PATH),
    )
    for kind, pattern in patterns:
        for match in pattern.finditer(text):
            for which, name in _words(text, match, kind, targets):
                where = f"{shown}:{lines.line(match.start())}"
                found.setdefault((which, name.lower()), Request(which, name, where))


def project_targets(project_dir: Path) -> set[str]:
    """The names of the libraries and executables the project's CMake files define."""
    names: set[str] = set()
    for path in cmake_files(project_dir):
        text = read_source(path)
        if text is not None:
            names.update(m.group(1) for m in _ADD_LIBRARY.finditer(_COMMENT.sub("", text)))
    return names


def requests(project_dir: Path) -> tuple[Request, ...]:
    """Every system request of the project's build files, first mention each: CMake's
    `find_package`, `pkg_check_modules`, bare `target_link_libraries` names, `find_path` and
    `find_library`; meson's required `dependency()` and `find_library()`."""
    found: dict[tuple[str, str], Request] = {}
    paths = sorted(cmake_files(project_dir))
    targets = project_targets(project_dir) if paths else set()
    for path in paths:
        _cmake_requests(path, path.relative_to(project_dir).as_posix(), found, targets)
    for kind, name, where in meson_dependencies(project_dir):
        found.setdefault((kind, name.lower()), Request(kind, name, where))
    return tuple(found.values())


def _entry(data: Mapping[str, Any]) -> SystemPackage:
    return SystemPackage(
        dnf=tuple(data.get("dnf", ())),
        apt=tuple(data.get("apt", ())),
        pkg_config=tuple(data.get("pkg_config", ())),
        headers=tuple(data.get("headers", ())),
        libraries=tuple(data.get("libraries", ())),
    )


_LINKER_OWN = {"pthread", "dl", "m", "rt", "c", "stdc++", "gcc", "gcc_s", "atomic", "util", "z"}
"""Libraries of the C runtime and the compiler: nothing to install (zlib's `z` is named by find_package)."""


@dataclass(frozen=True)
class Table:
    """`system-packages.json`, by the kind of name each section maps."""

    ignore: frozenset[str]
    by_package: Mapping[str, tuple[str, Mapping[str, Any]]]
    by_module: Mapping[str, Mapping[str, Any]]
    by_library: Mapping[str, Mapping[str, Any]]
    by_header: Mapping[str, Mapping[str, Any]]
    prefixes: Mapping[str, Mapping[str, Any]]

    @classmethod
    def read(cls, path: Path, own: Iterable[str]) -> Table:
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(
            ignore=frozenset(data["ignore"]) | {name.lower() for name in own},
            by_package={k.lower(): (k, v) for k, v in data["find_package"].items()},
            by_module={k.lower(): v for k, v in data["pkg_config"].items()},
            by_library={k.lower(): v for k, v in data["library"].items()},
            by_header={k.lower(): v for k, v in data["header"].items()},
            prefixes={k.lower(): v for k, v in data["pkg_config_prefix"].items()},
        )

    def lookup(self, request: Request) -> tuple[str, Mapping[str, Any]] | bool | None:
        """(entry name, entry) for a known request; False for one that needs nothing (a toolkit,
        the C runtime, a bare name that is most often another target's); None for an unknown one."""
        key = request.name.lower()
        if request.kind == "find_package":
            if key in self.ignore or key.startswith(("python", "hip", "cuda", "rocm", "musa", "torch")):
                return False
            return self.by_package.get(key)
        if request.kind == "dependency":  # meson: a pkg-config name, else a CMake package's
            if key in self.ignore or key in _MESON_BUILTIN:
                return False
            module = self.by_module.get(key)
            if module is not None:
                return module["name"], module
            prefixed = next((v for p, v in self.prefixes.items() if key.startswith(p)), None)
            hit = self.by_package.get(key)
            return hit or ((prefixed["name"], prefixed) if prefixed is not None else None)
        if request.kind in ("target_link_libraries", "find_library"):
            library = self.by_library.get(key.removeprefix("lib"))
            if library is not None:
                return library["name"], library
            quiet = request.kind == "target_link_libraries" or key in _LINKER_OWN or key in self.ignore
            return False if quiet else None
        if request.kind == "find_path":
            header = self.by_header.get(key)
            return (header["name"], header) if header is not None else False
        module = self.by_module.get(key)
        return (module["name"], module) if module is not None else None


def propose(project_dir: Path, *, own: Iterable[str] = (), table: Path = TABLE) -> Proposal:
    """The system packages init proposes for a project, from its build files and the table;
    `own` names the project's own CMake packages (its core, found from a prebuilt prefix)."""
    known_table = Table.read(table, own)
    known: dict[str, tuple[SystemPackage, Request]] = {}
    unknown: list[Request] = []
    for request in requests(project_dir):
        hit = known_table.lookup(request)
        if hit is None:
            unknown.append(request)
        elif hit is not False and not isinstance(hit, bool):
            known.setdefault(hit[0], (_entry(hit[1]), request))
    return Proposal(known=known, unknown=tuple(unknown))
