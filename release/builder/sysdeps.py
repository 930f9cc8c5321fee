"""A host build's check of the declared system build dependencies, before anything compiles.

Each declared dependency says how a host can tell it is there (pkg-config modules, headers,
libraries). A host build runs those probes first and, where some fail, stops with one line that
names the missing dependencies and the packages that give them on this host's family (apt on
Debian and Ubuntu, dnf on AlmaLinux, RHEL and Fedora), instead of failing minutes into CMake.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from release import process, settings
from release.config.sysdeps import SystemPackage
from release.errors import ToolchainError

OS_RELEASE = Path("/etc/os-release")
_APT_IDS = {"debian", "ubuntu"}
_DNF_IDS = {"rhel", "fedora", "centos", "almalinux", "rocky"}
INCLUDE_DIRS = ("/usr/local/include", "/usr/include", "/usr/include/x86_64-linux-gnu")
LIBRARY_DIRS = (
    "/usr/local/lib", "/usr/local/lib64", "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu",
    "/usr/lib64", "/usr/lib",
)  # fmt: skip


def host_family(os_release: str) -> str | None:
    """`apt` or `dnf` from the text of /etc/os-release (ID and ID_LIKE), None when neither fits."""
    words: set[str] = set()
    for line in os_release.splitlines():
        key, _, value = line.partition("=")
        if key.strip() in ("ID", "ID_LIKE"):
            words.update(value.strip().strip("\"'").lower().split())
    if words & _APT_IDS:
        return "apt"
    if words & _DNF_IDS:
        return "dnf"
    return None


def search_dirs(
    env: Mapping[str, str] | None, variables: Iterable[str], defaults: Iterable[str]
) -> tuple[Path, ...]:
    """The directories named by `variables` (colon lists) first, then `defaults`."""
    named = [d for var in variables for d in settings.raw(var, env).split(os.pathsep) if d]
    return tuple(Path(d) for d in dict.fromkeys([*named, *defaults]))


@dataclass(frozen=True)
class Probes:
    """How the checks ask the host; tests give their own."""

    has_module: Callable[[str], bool]
    has_header: Callable[[str], bool]
    has_library: Callable[[str], bool]


def host_probes(env: Mapping[str, str] | None = None) -> Probes:
    """Probes of this host: `pkg-config --exists`, then header and library files in the compiler's
    usual directories and those CPATH, C(PLUS)_INCLUDE_PATH, LIBRARY_PATH and LD_LIBRARY_PATH name."""
    includes = search_dirs(env, ("CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH"), INCLUDE_DIRS)
    libdirs = search_dirs(env, ("LIBRARY_PATH", "LD_LIBRARY_PATH"), LIBRARY_DIRS)
    pkg_config = shutil.which("pkg-config", path=settings.raw("PATH", env) or None)

    def has_module(name: str) -> bool:
        if pkg_config is None:
            return False
        proc = process.run([pkg_config, "--exists", name], timeout=60, env=env)
        return proc.returncode == 0

    def has_header(name: str) -> bool:
        return any((d / name).is_file() for d in includes)

    def has_library(name: str) -> bool:
        return any((d / f"lib{name}{ext}").exists() for d in libdirs for ext in (".so", ".a"))

    return Probes(has_module, has_header, has_library)


def missing(packages: Mapping[str, SystemPackage], probes: Probes) -> dict[str, tuple[str, ...]]:
    """{dependency name: the probes it failed} of the declared dependencies a host lacks
    (a dependency without probes cannot be checked and counts as present)."""
    found: dict[str, tuple[str, ...]] = {}
    for name, entry in packages.items():
        failed = (
            *(f"pkg-config {m}" for m in entry.pkg_config if not probes.has_module(m)),
            *(f"header {h}" for h in entry.headers if not probes.has_header(h)),
            *(f"library {lib}" for lib in entry.libraries if not probes.has_library(lib)),
        )
        if failed:
            found[name] = failed
    return found


def missing_line(
    variant: str,
    packages: Mapping[str, SystemPackage],
    lacking: Mapping[str, tuple[str, ...]],
    family: str | None,
) -> str:
    """One line: what is missing, and the install command for this host's family."""
    what = ", ".join(f"{name} ({'; '.join(probes)})" for name, probes in lacking.items())
    families = (family,) if family else ("apt", "dnf")
    commands = []
    for fam in families:
        names = list(dict.fromkeys(p for name in lacking for p in getattr(packages[name], fam)))
        if names:
            tool = "apt-get" if fam == "apt" else "dnf"
            commands.append(f"`{tool} install {' '.join(names)}`")
    how = " or ".join(commands) if commands else "install them (the matrix names no package for this host)"
    return (
        f"[{variant}] the host lacks system build dependencies the matrix declares: {what}; "
        f"install them first: {how} (or build with --container)"
    )


def require_system_packages(
    variant: str,
    packages: Mapping[str, SystemPackage],
    *,
    probes: Probes | None = None,
    os_release: str | None = None,
) -> None:
    """Raise a one-line `ToolchainError` when this host lacks any declared dependency."""
    if not packages:
        return
    lacking = missing(packages, probes or host_probes())
    if not lacking:
        return
    if os_release is None:
        try:
            os_release = OS_RELEASE.read_text(encoding="utf-8", errors="replace")
        except OSError:
            os_release = ""
    raise ToolchainError(missing_line(variant, packages, lacking, host_family(os_release)))
