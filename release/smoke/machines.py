"""Which machine each install of `release check-resolution` resolves for. A set of one machine
resolves as this host does (or, for wheels built against a newer C library than this host's, as a
machine of that manylinux tag would). A set of several (x86_64 and aarch64 wheels under one name)
is installed once per machine: this host's as it is, each other machine's as that machine would
resolve it (pip's `--platform`, uv's `--python-platform`), and the wheel installed must be that
machine's: a user on a Grace machine gets the aarch64 build, never the x86_64 one."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from release.config.machines import host_machine, machine_of_tags
from release.plan.machine import machines_of
from release.plan.resolve import ResolvedVariant
from release.smoke.placement import emulated_platform, host_libc
from release.variants.resolution import Case
from release.wheel.names import InvalidWheelName, parse_wheel_name, split_variant_label


@dataclass(frozen=True)
class MachineRuns:
    cases: list[tuple[Case, str | None]]
    """Each case with the platform tag it resolves for (None: as this host does)."""
    said: list[str]
    """A line per machine that is not resolved as this host is, for the log."""


def _machine(path: Path) -> str | None:
    try:
        return machine_of_tags(parse_wheel_name(split_variant_label(path)[0]).platforms)
    except InvalidWheelName:
        return None


def machine_runs(
    cases: Sequence[Case], files: Sequence[Path], variants: Mapping[str, ResolvedVariant]
) -> MachineRuns:
    """The cases of every machine of the set, each with its platform (see the module's docstring)."""
    by_machine: dict[str, list[Path]] = {}
    for path in files:
        machine = _machine(path)
        if machine is not None:
            by_machine.setdefault(machine, []).append(path)
    host = host_machine()
    if set(by_machine) <= {host}:
        platform = emulated_platform(files)
        said = [_newer_line(platform)] if platform else []
        return MachineRuns([(c, platform) for c in cases], said)
    runs: list[tuple[Case, str | None]] = []
    said = []
    for machine, found in sorted(by_machine.items(), key=lambda item: item[0] != host):
        platform = emulated_platform(found)  # another machine's: the newest manylinux tag of its wheels
        if machine != host and platform:
            said.append(
                f"{machine} wheels: pip and uv resolve as a {platform} machine would "
                f"(--platform, --python-platform), and each install must give the {machine} wheel"
            )
        elif platform:
            said.append(_newer_line(platform))
        for case in cases:
            variant = case.expect
            if variant is None or machine in machines_of(variants.get(variant.name, variant)):
                runs.append((dataclasses.replace(case, machine=machine), platform))
    return MachineRuns(runs, said)


def _newer_line(platform: str) -> str:
    return (
        f"this host ({host_libc()}) cannot install {platform} wheels: pip and uv resolve as a "
        f"{platform} machine would (--platform, --python-platform) and install into the fresh venvs"
    )
