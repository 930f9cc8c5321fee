"""What system build dependencies `release init` proposes: read from the project's CMake files.

`find_package(glog ...)` and `pkg_check_modules(RDMA REQUIRED libibverbs librdmacm)` name what the
build needs from the system. Those the toolkit's table knows (`system-packages.json`, beside this
module) become `engine.system_packages` entries with their dnf and apt packages and a probe; the
others are listed as comments for the maintainer to fill in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from release.config.sysdeps import SystemPackage
from release.init.meson import dependencies as meson_dependencies

TABLE = Path(__file__).with_name("system-packages.json")
MAX_FILES = 2000
MAX_FILE_BYTES = 1 << 20
_SKIP_DIRS = {".git", "build", "_build", "_deps", "third_party", "thirdparty", "3rdparty", "extern",
              "external", "vendor", "node_modules", ".venv", "venv", "dist", "wheelhouse"}  # fmt: skip
_COMMENT = re.compile(r"#[^\n]*")
_FIND_PACKAGE = re.compile(r"\bfind_package\s*\(\s*([A-Za-z0-9_.+-]+)", re.IGNORECASE)
_PKG_CHECK = re.compile(r"\bpkg_(?:check|search)_module(?:s)?\s*\(([^)]*)\)", re.IGNORECASE)
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


def cmake_files(project_dir: Path) -> Iterator[Path]:
    """The project's CMakeLists.txt and *.cmake files, outside build and vendored directories
    (bounded: at most `MAX_FILES`)."""
    count = 0
    stack = [project_dir]
    while stack and count < MAX_FILES:
        directory = stack.pop()
        try:
            entries = sorted(directory.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.is_symlink():
                continue
            if entry.is_dir():
                if entry.name not in _SKIP_DIRS and not entry.name.startswith("build"):
                    stack.append(entry)
            elif entry.name == "CMakeLists.txt" or entry.suffix == ".cmake":
                count += 1
                yield entry
                if count >= MAX_FILES:
                    return


def requests(project_dir: Path) -> tuple[Request, ...]:
    """Every `find_package` and `pkg_check_modules` request of the project, first mention each."""
    found: dict[tuple[str, str], Request] = {}
    for path in sorted(cmake_files(project_dir)):
        try:
            with path.open("rb") as handle:
                text = handle.read(MAX_FILE_BYTES).decode("utf-8", errors="replace")
        except OSError:
            continue
        text = _COMMENT.sub(lambda m: " " * len(m.group(0)), text)
        shown = path.relative_to(project_dir).as_posix()
        for match in _FIND_PACKAGE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            request = Request("find_package", match.group(1), f"{shown}:{line}")
            found.setdefault((request.kind, request.name.lower()), request)
        for match in _PKG_CHECK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            words = match.group(1).split()[1:]  # the first word is the result prefix
            for word in words:
                if word in _PKG_KEYWORDS or word.startswith("$"):
                    continue
                module = re.split(r"[<>=]", word, maxsplit=1)[0]
                if module:
                    request = Request("pkg_check_modules", module, f"{shown}:{line}")
                    found.setdefault((request.kind, module.lower()), request)
    for name, where in meson_dependencies(project_dir):
        found.setdefault(("dependency", name.lower()), Request("dependency", name, where))
    return tuple(found.values())


def _entry(data: Mapping[str, Any]) -> SystemPackage:
    return SystemPackage(
        dnf=tuple(data.get("dnf", ())),
        apt=tuple(data.get("apt", ())),
        pkg_config=tuple(data.get("pkg_config", ())),
        headers=tuple(data.get("headers", ())),
        libraries=tuple(data.get("libraries", ())),
    )


def propose(project_dir: Path, *, own: Iterable[str] = (), table: Path = TABLE) -> Proposal:
    """The system packages init proposes for a project, from its CMake files and the table;
    `own` names the project's own CMake packages (its core, found from a prebuilt prefix)."""
    data = json.loads(table.read_text(encoding="utf-8"))
    ignore = set(data["ignore"]) | {name.lower() for name in own}
    by_package = {k.lower(): (k, v) for k, v in data["find_package"].items()}
    by_module = {k.lower(): v for k, v in data["pkg_config"].items()}
    known: dict[str, tuple[SystemPackage, Request]] = {}
    unknown: list[Request] = []
    for request in requests(project_dir):
        key = request.name.lower()
        if request.kind == "find_package":
            if key in ignore or key.startswith(("python", "hip", "cuda", "rocm", "musa", "torch")):
                continue
            hit = by_package.get(key)
            if hit is not None:
                known.setdefault(hit[0], (_entry(hit[1]), request))
                continue
        elif request.kind == "dependency":  # meson: a pkg-config name, else a CMake package's
            if key in ignore or key in _MESON_BUILTIN:
                continue
            module, hit = by_module.get(key), by_package.get(key)
            if module is not None:
                known.setdefault(module["name"], (_entry(module), request))
                continue
            if hit is not None:
                known.setdefault(hit[0], (_entry(hit[1]), request))
                continue
        else:
            module = by_module.get(key)
            if module is not None:
                known.setdefault(module["name"], (_entry(module), request))
                continue
        unknown.append(request)
    return Proposal(known=known, unknown=tuple(unknown))
