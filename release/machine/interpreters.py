"""Find CPython interpreters by version without the user exporting anything.

Order: `python3.X` on PATH (pyenv shims skipped: they fail unless PYENV_VERSION names them;
virtual environments skipped, such as the one a nox session puts first on PATH: a venv's python
cannot seed a chroot or another venv reliably, its base interpreter can),
then pyenv's version directories (`$PYENV_ROOT/versions/3.X.*`, newest patch first), then
`/usr/bin` and `/usr/local/bin`.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from release import settings, table
from release.errors import ToolchainError


def _pyenv_root() -> Path:
    return settings.pyenv_root()


def _patch_key(path: Path) -> tuple[int, ...]:
    match = re.match(r"(?a)^(\d+)\.(\d+)\.(\d+)$", path.name)
    return tuple(int(p) for p in match.groups()) if match else (-1,)


def find_interpreter(version: str) -> Path | None:
    name = f"python{version}"
    shims = str(_pyenv_root() / "shims")
    for entry in settings.raw("PATH").split(os.pathsep):
        if not entry or entry.rstrip("/") == shims or (Path(entry).parent / "pyvenv.cfg").exists():
            continue
        found = shutil.which(name, path=entry)
        if found:
            return Path(found)
    versions = _pyenv_root() / "versions"
    if versions.is_dir():
        candidates = sorted(
            (p for p in versions.glob(f"{version}.*") if _patch_key(p) != (-1,)),
            key=_patch_key,
            reverse=True,
        )
        for candidate in candidates:
            exe = candidate / "bin" / name
            if exe.exists():
                return exe
    for directory in ("/usr/local/bin", "/usr/bin"):
        exe = Path(directory) / name
        if exe.exists():
            return exe
    return None


def require_interpreter(version: str) -> Path:
    found = find_interpreter(version)
    if found is None:
        msg = (
            f"no Python {version} interpreter found (looked on PATH, in {_pyenv_root()}/versions "
            f"and /usr/bin): install it, e.g. `pyenv install {version}`"
        )
        raise ToolchainError(msg)
    return found


def interpreter_dirs(versions: tuple[str, ...]) -> list[str]:
    """Directories to put on PATH so that nox finds `python3.X` for each version."""
    dirs: list[str] = []
    for version in versions:
        exe = find_interpreter(version)
        if exe is not None and str(exe.parent) not in dirs:
            dirs.append(str(exe.parent))
    return dirs


SYSTEM_PREFIXES = (Path("/"), Path("/usr"), Path("/usr/local"))


def self_contained_home(version: str) -> Path | None:
    """The installation directory of a CPython `version` that can be copied into an image as a
    whole (pyenv, python-build-standalone: its own prefix with include/ and lib/), or None.

    The interpreter found first counts where it has its own prefix; a distribution's Python
    (`/usr/bin/python3.11`) shares /usr with everything else, so pyenv's directories are tried next.
    """
    found = find_interpreter(version)
    candidates = [found.resolve().parent.parent] if found is not None else []
    versions = _pyenv_root() / "versions"
    if versions.is_dir():
        candidates += sorted(
            (p for p in versions.glob(f"{version}.*") if _patch_key(p) != (-1,)), key=_patch_key, reverse=True
        )
    for home in candidates:
        if home not in SYSTEM_PREFIXES and (home / "bin" / f"python{version}").exists():
            return home
    return None


@dataclass(frozen=True)
class Interpreter:
    """One CPython version as a build needs it: found, with headers, or why not and how to fix it."""

    version: str
    path: Path | None
    problem: str | None
    fix: str | None

    @property
    def usable(self) -> bool:
        return self.problem is None


def python_headers(exe: Path, version: str) -> Path:
    """Where an interpreter's `Python.h` lives: `<prefix>/include/pythonX.Y`, the same layout for
    distribution packages (`/usr`), pyenv, uv and cibuildwheel's /opt/python builds."""
    return exe.resolve().parent.parent / "include" / f"python{version}" / "Python.h"


def interpreter(version: str) -> Interpreter:
    """Find one CPython version and check that an extension can be compiled against it."""
    exe = find_interpreter(version)
    if exe is None:
        return Interpreter(
            version,
            None,
            f"no Python {version} found (PATH, pyenv's versions, /usr/bin, /usr/local/bin)",
            f"release toolchain install python {version}",
        )
    headers = python_headers(exe, version)
    if not headers.is_file():
        prefix = headers.parents[2]
        fix = f"apt-get install python{version}-dev" if prefix == Path("/usr") else f"reinstall {prefix}"
        return Interpreter(version, exe, f"Python {version} at {exe} has no headers ({headers} missing)", fix)
    return Interpreter(version, exe, None, None)


def missing_table(missing: list[Interpreter]) -> str:
    """The end-of-run table of interpreters a local build skipped, and how to get each."""
    rows = [(i.version, i.problem or "", i.fix or "") for i in missing]
    return table.render(("python", "skipped because", "get it with"), rows)
