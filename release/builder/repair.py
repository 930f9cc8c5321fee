"""Repair: `auditwheel repair` with the variant's runtime excluded, so it is bound, not vendored.

The platform tag is the matrix floor when this host can meet it; otherwise the best tag the host
allows, and the result says so (a local wheel, not a release wheel).
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from release import atomic, interrupts, process
from release.errors import BuildError, UsageError
from release.inspect.elf import ElfInfo, ElfReadError, inspect_elf, is_elf
from release.machine.toolchain import check_patchelf, tool_path
from release.wheel.names import platform_field
from release.wheel.own import own_members, read_dist_info
from release.wheel.rewrite import rewrite_wheel

_TOO_RECENT = "too-recent versioned symbols"


@dataclass(frozen=True)
class RepairResult:
    wheel: Path
    platform: str
    floor: str
    floor_met: bool
    excludes: tuple[str, ...]
    bound: tuple[str, ...] = ()
    """The excluded libraries the wheel NEEDs (also its METADATA `Requires-External`)."""

    @property
    def note(self) -> str:
        if self.floor_met:
            return f"tagged {self.platform} (the matrix floor)"
        return (
            f"this host allows {self.platform}, not the matrix floor {self.floor}: a valid local wheel, "
            "not a release wheel (release builds run in the manylinux_2_28 image)"
        )


def _auditwheel(wheel: Path, out: Path, plat: str, excludes: tuple[str, ...], env: dict[str, str]) -> str:
    cmd = [sys.executable, "-m", "auditwheel", "repair", "--plat", plat, "--strip", "-w", str(out)]
    if plat != "auto":
        cmd.append("--only-plat")
    for pattern in excludes:
        cmd += ["--exclude", pattern]
    cmd.append(str(wheel))
    interrupts.check()
    proc = process.run(cmd, env=env, timeout=process.REPAIR_S)
    if proc.returncode != 0:
        raise _RepairFailed(proc.stdout + proc.stderr)
    return proc.stdout + proc.stderr


class _RepairFailed(Exception):
    pass


def _elf_members(wheel: Path) -> Iterator[tuple[str, bytes, ElfInfo]]:
    """Every readable ELF member of a wheel we built (our own output, read whole)."""
    for name, data in own_members(wheel):
        if not is_elf(data[:4]):
            continue
        try:
            yield name, data, inspect_elf(name, data)
        except ElfReadError:
            continue


def _portable(entry: str) -> bool:
    return entry.startswith(("$ORIGIN", "${ORIGIN}"))


def drop_build_rpaths(wheel: Path, out_dir: Path, env: dict[str, str]) -> tuple[Path, list[str]]:
    """Remove RPATH/RUNPATH entries that point outside the wheel (build or interpreter paths).

    Interpreters built with an rpath (pyenv's, for one) hand it to every extension they build;
    the loader would search the build machine's directories on the user's machine. Returns the
    cleaned wheel (a new file in `out_dir`, or `wheel` itself when nothing needed cleaning) and
    what was removed. Entry order, timestamps and RECORD stay consistent (`release.wheel.rewrite`).
    """
    changed: dict[str, bytes] = {}
    removed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="rpath-") as tmp:
        for member, data, elf in _elf_members(wheel):
            entries = elf.rpath + elf.runpath
            foreign = [e for e in entries if e and not _portable(e)]
            if not foreign:
                continue
            kept = [e for e in entries if e and _portable(e)]
            scratch = Path(tmp) / "elf"
            scratch.write_bytes(data)
            action = ["--set-rpath", ":".join(kept)] if kept else ["--remove-rpath"]
            cmd = ["patchelf", *action, str(scratch)]
            proc = process.run(cmd, env=env, timeout=process.CHANGE_S)
            if proc.returncode != 0:
                why = proc.stderr.strip()
                msg = f"patchelf could not rewrite the RUNPATH of {member}: {why}"
                raise BuildError(msg)
            changed[member] = scratch.read_bytes()
            removed.extend(f"{member}: {e}" for e in foreign)
    if not changed:
        return wheel, []
    return rewrite_wheel(wheel, out_dir / wheel.name, replace=changed), removed


def bound_libraries(wheel: Path, excludes: tuple[str, ...]) -> tuple[str, ...]:
    """The NEEDED entries of the wheel's ELF files that match `excludes`: what it binds at load time."""
    found: set[str] = set()
    for _info, _data, elf in _elf_members(wheel):
        found.update(n for n in elf.needed if any(fnmatch.fnmatchcase(n, g) for g in excludes))
    return tuple(sorted(found))


def declare_external(wheel: Path, excludes: tuple[str, ...]) -> tuple[str, ...]:
    """Write `Requires-External: <soname>` into METADATA for every library the wheel binds at load
    time (in place), so the wheel says which runtime it needs. Returns the sonames."""
    bound = bound_libraries(wheel, excludes)
    name, text = read_dist_info(wheel, "METADATA")
    head, sep, body = text.partition("\n\n")
    kept = [line for line in head.splitlines() if not line.startswith("Requires-External:")]
    lines = [*kept, *(f"Requires-External: {soname}" for soname in bound)]
    updated = "\n".join(lines) + "\n" + (sep[1:] + body if sep else "")
    if updated != text:
        rewrite_wheel(wheel, wheel, replace={name: updated.encode("utf-8")})
    return bound


def repair_wheel(
    wheel: Path,
    *,
    floor: str,
    excludes: tuple[str, ...],
    dest_dir: Path,
    source_date_epoch: str | None = None,
) -> RepairResult:
    """Repair `wheel` into `dest_dir`, tagged `floor` where this host can meet it, with `excludes`
    (a resolved variant's `excludes`) kept as NEEDED and never grafted.

    `source_date_epoch` (else the environment's) stamps every zip entry, so a rebuild of the
    same commit gives a byte-identical wheel.
    """
    check_patchelf()
    if not zipfile.is_zipfile(wheel):
        msg = f"{wheel}: not a wheel (not a zip archive)"
        raise UsageError(msg)
    chosen = excludes
    env = {**os.environ, "PATH": tool_path()}
    if source_date_epoch is not None:
        env["SOURCE_DATE_EPOCH"] = source_date_epoch
    dest_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="repair-") as tmp:
        out = Path(tmp) / "out"
        out.mkdir()
        wheel, _removed = drop_build_rpaths(wheel, Path(tmp), env)
        try:
            _auditwheel(wheel, out, floor, chosen, env)
            floor_met = True
        except _RepairFailed as exc:
            if _TOO_RECENT not in str(exc):
                raise BuildError(_explain(wheel, str(exc))) from None
            try:
                _auditwheel(wheel, out, "auto", chosen, env)
            except _RepairFailed as again:
                raise BuildError(_explain(wheel, str(again))) from None
            floor_met = False
        produced = sorted(out.glob("*.whl"))
        if len(produced) != 1:
            msg = f"auditwheel repair of {wheel.name} produced {len(produced)} wheels, expected one"
            raise BuildError(msg)
        bound = declare_external(produced[0], chosen)
        target = dest_dir / produced[0].name
        atomic.move_file(produced[0], target)
    platform = platform_field(target)
    return RepairResult(
        wheel=target, platform=platform, floor=floor, floor_met=floor_met, excludes=chosen, bound=bound
    )


def _explain(wheel: Path, output: str) -> str:
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    missing = re.search(r'required library "([^"]+)" could not be located', output)
    if missing:
        return (
            f"auditwheel repair of {wheel.name}: {missing.group(1)} is NEEDED but not found on this host; "
            "if it is a GPU runtime or system library, add it to the variant's exclude or "
            "platform.system_libraries in the matrix"
        )
    tail = lines[-1] if lines else "no output"
    return f"auditwheel repair of {wheel.name} failed: {tail}"
