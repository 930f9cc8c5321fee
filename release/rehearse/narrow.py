"""A narrower release for a machine without a registry or the time for the whole matrix: the jobs'
checkout gets a matrix.yaml whose `python:` list and `platform.floor` differ, while every local
image is made from the repository's matrix as it is (so the images are those every other command
here uses). Each change is one line of the file, said in the rehearsal's log."""

from __future__ import annotations

import re
from collections.abc import Sequence

from release.config.machines import machine_of_tag
from release.config.matrix import LoadedMatrix
from release.errors import UsageError
from release.wheel.names import parse_platform_tag

_PYTHON = re.compile(r"(?m)^python:[ \t]*\[[^\]\n]*\][ \t]*(#.*)?$")
_PLATFORM = re.compile(r"(?m)^platform:[ \t]*(#.*)?$")
_TOP_KEY = re.compile(r"(?m)^[A-Za-z_]")
_FLOOR = re.compile(r"(?m)^(?P<indent>[ \t]+)floor:[ \t]*(?P<value>[A-Za-z0-9_.]+)")
_TIERS = re.compile(r"(?m)^(?P<indent>[ \t]{4,})hardware:[ \t]*\[(?P<value>[^\]\n]*)\]")
_MACHINES = re.compile(r"(?m)^(?P<indent>[ \t]+)architectures:[ \t]*(?P<value>\[[^\]\n]*\])")


def narrowed(
    loaded: LoadedMatrix, pythons: Sequence[str], floor: str | None, machines: Sequence[str] = ()
) -> tuple[str, list[str]] | None:
    """(the matrix text the jobs' checkout holds, one line per change), or None without a change."""
    if not pythons and floor is None and not machines:
        return None
    text = loaded.path.read_text(encoding="utf-8")
    said = []
    file = loaded.path.name
    if pythons:
        unknown = [p for p in pythons if p not in loaded.matrix.python]
        if unknown:
            msg = f"--python {unknown[0]}: not a Python of {file} ({', '.join(loaded.matrix.python)})"
            raise UsageError(msg)
        kept = [p for p in loaded.matrix.python if p in pythons]
        text, count = _PYTHON.subn("python: [" + ", ".join(f'"{p}"' for p in kept) + "]", text, count=1)
        if count != 1:
            msg = f"--python: {file} has no one-line `python: [...]` list at the top level to narrow"
            raise UsageError(msg)
        said.append(f"python [{', '.join(kept)}] (--python; {file} lists {', '.join(loaded.matrix.python)})")
    if floor is not None:
        if parse_platform_tag(floor).family != "manylinux":
            msg = f"--floor {floor}: not a manylinux platform tag such as manylinux_2_39_x86_64"
            raise UsageError(msg)
        match = _under_platform(
            text, _FLOOR, f"--floor: {file} has no `floor:` line under platform to replace"
        )
        old = match.group("value")
        written, how = floor, "--floor"
        machine = machine_of_tag(floor)
        if machine_of_tag(old) is None and machine is not None:
            # the matrix's floor is a policy (each of platform.architectures gets its tag): so is
            # the narrowed one, or a one-machine tag beside aarch64 would be the checkout's error
            written = floor.removesuffix(f"_{machine}")
            listed = ", ".join(loaded.matrix.platform.machines)
            how = f"--floor {floor}: a policy, as {file}'s, each of {listed} its own tag"
        text = text[: match.start("value")] + written + text[match.end("value") :]
        said.append(
            f"platform.floor {written} ({how}; {file} says {old}, whose build image is in a registry)"
        )
    if machines:
        text = _narrow_machines(text, file, loaded.matrix.platform.machines, machines, said)
        gone = sorted(n for n, h in loaded.matrix.hardware.items() if h.machine not in machines)
        text = _drop_tiers(text, gone, said)
    return text, said


def _under_platform(text: str, key: re.Pattern[str], missing: str) -> re.Match[str]:
    """`key`'s line in the top-level `platform:` block (before the next top-level key), or
    UsageError(`missing`)."""
    block = _PLATFORM.search(text)
    match = key.search(text, block.end()) if block is not None else None
    if match is None or block is None or _TOP_KEY.search(text, block.end(), match.start()):
        raise UsageError(missing)
    return match


def _narrow_machines(
    text: str, file: str, declared: Sequence[str], machines: Sequence[str], said: list[str]
) -> str:
    """`platform.architectures` narrowed to `machines` (their order in the file), said in `said`."""
    unknown = [m for m in machines if m not in declared]
    if unknown:
        msg = f"--arch {unknown[0]}: not a machine of {file} (platform.architectures: {', '.join(declared)})"
        raise UsageError(msg)
    kept = [m for m in declared if m in machines]
    missing = f"--arch: {file} has no one-line `architectures: [...]` under platform to narrow"
    match = _under_platform(text, _MACHINES, missing)
    said.append(
        f"platform.architectures [{', '.join(kept)}] (--arch; {file} lists {', '.join(declared)}: "
        "the others' jobs are left out)"
    )
    return text[: match.start("value")] + "[" + ", ".join(kept) + "]" + text[match.end("value") :]


def _drop_tiers(text: str, gone: Sequence[str], said: list[str]) -> str:
    """The hardware tiers of the machines left out, taken off every variant's one-line
    `hardware: [...]` list (the tiers stay declared; no wheel of theirs is built)."""
    if not gone:
        return text

    def keep(match: re.Match[str]) -> str:
        names = [n.strip() for n in match.group("value").split(",") if n.strip()]
        kept = [n for n in names if n not in gone]
        return match.group(0) if kept == names else f"{match.group('indent')}hardware: [{', '.join(kept)}]"

    narrowed_text = _TIERS.sub(keep, text)
    if narrowed_text != text:
        said.append(
            f"variants' hardware without {', '.join(gone)} (--arch: their machine's wheels are left out)"
        )
    return narrowed_text
