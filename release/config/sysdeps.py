"""System build dependencies: the distribution packages an engine's build needs, per image family.

A real engine (Mooncake's transfer engine) needs more than a compiler and the GPU toolkit: rdma-core,
glog, gflags, yaml-cpp. `matrix.yaml` declares each once, under a name, with its packages for both
image families the toolkit builds in (`dnf` for the manylinux release image, which is AlmaLinux;
`apt` for Debian and Ubuntu local images) and how a host build can tell it is there (a pkg-config
module, headers, libraries). The cibuildwheel configuration installs the `dnf` packages in
before-all, a local image recipe the `apt` ones, and a host build checks the probes before compiling.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from release.config.dataschema import dotted, spec

_PACKAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+._:-]*$")
_APT_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]*(/[a-z][a-z0-9-]*)?$")
_MODULE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9+._-]*$")
_HEADER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_+./-]*$")
_LIBRARY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_+.-]*$")


@dataclass(frozen=True, kw_only=True)
class SystemPackage:
    """One system build dependency: its packages in each image family, and how a host finds it."""

    dnf: tuple[str, ...] = spec(
        "AlmaLinux/RHEL packages (`yaml-cpp-devel`): cibuildwheel's before-all installs them in the "
        "manylinux release image, in the same step as the toolkit.",
        default=(),
    )
    apt: tuple[str, ...] = spec(
        "Debian/Ubuntu packages (`libyaml-cpp-dev`, or `pkg/ARCHIVE`): a local build image made from a "
        "`debian` recipe includes them, and a Debian host build names them when they are missing.",
        default=(),
    )
    pkg_config: tuple[str, ...] = spec(
        "pkg-config modules a host build checks before compiling (`yaml-cpp`).", default=()
    )
    headers: tuple[str, ...] = spec(
        "Headers a host build looks for where no pkg-config module says it (`gflags/gflags.h`).",
        default=(),
    )
    libraries: tuple[str, ...] = spec(
        "Libraries a host build looks for, by link name (`glog` for libglog.so).", default=()
    )


def merged(
    engine: Mapping[str, SystemPackage], variant: Mapping[str, SystemPackage]
) -> dict[str, SystemPackage]:
    """The engine's system packages with a variant's on top (a variant's entry replaces the
    engine's of the same name)."""
    return {**engine, **variant}


def packages_of(packages: Mapping[str, SystemPackage], family: str) -> tuple[str, ...]:
    """Every package of one family (`dnf` or `apt`), in declaration order, each once."""
    names = (name for entry in packages.values() for name in getattr(entry, family))
    return tuple(dict.fromkeys(names))


def pkg_config_modules(packages: Mapping[str, SystemPackage]) -> tuple[str, ...]:
    """Every pkg-config module the packages declare: where there is one, a build image needs the
    `pkg-config` program too (pkgconf in Debian, pkgconf-pkg-config in AlmaLinux)."""
    return tuple(dict.fromkeys(m for entry in packages.values() for m in entry.pkg_config))


def problems(key: str, packages: Mapping[str, SystemPackage]) -> list[tuple[str, str]]:
    """(dotted key, message) for every name that cannot safely reach a package manager's or a
    probe's command line (before-all is a shell command; make-image.sh takes a comma list)."""
    found: list[tuple[str, str]] = []
    fields = (
        ("dnf", _PACKAGE, "a dnf package name"),
        ("apt", _APT_PACKAGE, "a Debian package name (optionally pkg/ARCHIVE)"),
        ("pkg_config", _MODULE, "a pkg-config module name"),
        ("headers", _HEADER, "a header path like gflags/gflags.h"),
        ("libraries", _LIBRARY, "a library link name like glog"),
    )
    for name, entry in packages.items():
        entry_key = dotted(key, name)
        if not entry.dnf and not entry.apt:
            found.append((entry_key, "name its packages: `dnf`, `apt` or both"))
        for field_name, pattern, what in fields:
            for i, value in enumerate(getattr(entry, field_name)):
                if not pattern.match(value) or ".." in value:
                    found.append((f"{entry_key}.{field_name}[{i}]", f"{value!r} is not {what}"))
    return found
