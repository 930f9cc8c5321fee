"""The machine architectures a wheel can be built for: their names in every world that spells one.

A matrix lists them once (`platform.architectures`); a backend's data narrows them (`machines`:
ROCm and MUSA have no aarch64 machines). Everything that must name a machine another way (the
ELF header's `e_machine`, Debian's architecture, the GitHub runner, the OCI platform) reads it
from this table, so adding a machine is one entry here.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Machine:
    """One machine architecture as each tool names it."""

    name: str
    """The platform tag's spelling (`x86_64`, `aarch64`): cibuildwheel's and auditwheel's too."""
    elf_machine: int
    """The ELF header's `e_machine` of its code (EM_X86_64 = 62, EM_AARCH64 = 183)."""
    elf_name: str
    """How readelf names it (`Advanced Micro Devices X86-64`, `AArch64`), for messages."""
    debian: str
    """Debian's architecture (`amd64`, `arm64`): debootstrap --arch, `:arm64` packages."""
    gnu_triplet: str
    """The GNU triplet: Debian's multiarch directory (/usr/lib/aarch64-linux-gnu) and cross compilers."""
    oci: str
    """The OCI platform's architecture (`podman run --arch arm64`)."""
    github_runner: str
    """The GitHub-hosted runner label whose machine this is (`ubuntu-24.04-arm` for aarch64)."""


MACHINES: dict[str, Machine] = {
    "x86_64": Machine(
        name="x86_64",
        elf_machine=62,
        elf_name="X86-64",
        debian="amd64",
        gnu_triplet="x86_64-linux-gnu",
        oci="amd64",
        github_runner="ubuntu-latest",
    ),
    "aarch64": Machine(
        name="aarch64",
        elf_machine=183,
        elf_name="AArch64",
        debian="arm64",
        gnu_triplet="aarch64-linux-gnu",
        oci="arm64",
        github_runner="ubuntu-24.04-arm",
    ),
}
"""Every machine the toolkit builds for, by platform tag spelling."""

DEFAULT_MACHINE = "x86_64"
"""The machine of a matrix that names none (its floor names none either)."""

POLICY = re.compile(r"(manylinux|musllinux)_([0-9]{1,4})_([0-9]{1,4})\Z", re.ASCII)
"""A platform policy without a machine (`manylinux_2_28`): a floor for every listed machine."""


def machine_of_tag(platform: str) -> str | None:
    """The machine a platform tag ends with (`manylinux_2_28_aarch64` -> 'aarch64'), or None."""
    return next((m for m in MACHINES if platform.endswith(f"_{m}") or platform == m), None)


def machines_of_tags(platforms: Iterable[str]) -> set[str]:
    """The machines a wheel's platform tags name (none for `any` or a tag of no known machine)."""
    return {m for m in map(machine_of_tag, platforms) if m is not None}


def machine_of_tags(platforms: Iterable[str]) -> str | None:
    """The one machine a wheel's platform tags name, or None (they name none, or several)."""
    machines = machines_of_tags(platforms)
    return machines.pop() if len(machines) == 1 else None


def machine_of_elf(e_machine: int) -> Machine | None:
    """The machine whose code has this ELF `e_machine`, or None for one the toolkit does not build."""
    return next((m for m in MACHINES.values() if m.elf_machine == e_machine), None)


def floor_for(floor: str, machine: str) -> str:
    """The platform tag of `machine` from a floor that is a policy (`manylinux_2_28`) or already
    a tag (`manylinux_2_28_x86_64`: its policy with the machine's suffix)."""
    policy = floor
    found = machine_of_tag(floor)
    if found is not None:
        policy = floor.removesuffix(f"_{found}")
    return f"{policy}_{machine}"


_HOST_SPELLINGS = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


def host_machine() -> str:
    """This machine's architecture as a platform tag spells it (`x86_64`, `aarch64`)."""
    name = platform.machine().lower()
    return _HOST_SPELLINGS.get(name, name)
