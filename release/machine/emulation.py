"""Another machine's programs on this one: binfmt_misc's qemu-user, in a variant's cross image
(`<build image>-cross-<machine>`, which `release.builder.cross` makes), with Debian's own Python
of that machine. The cross build's smoke and `release smoke`'s legs of other machines' wheels
both run here."""

from __future__ import annotations

import shlex
from pathlib import Path

from release import process
from release.config.machines import MACHINES
from release.config.resources import toolkit_scripts
from release.errors import SmokeError
from release.machine.containers import ContainerEngine
from release.plan.resolve import ResolvedVariant
from release.wheel.names import parse_wheel_name, python_tag

DIST_PYTHON = "3.13"
"""The Debian suite's own Python (trixie's), whose libpython-dev pair gives the target's pyconfig.h
lines and whose interpreter of the target machine runs its wheels under emulation."""
SMOKE_TIMEOUT_S = 600
CROSS_LABEL = "io.release-toolkit.cross.base"
"""A cross image's label: what it was made over (base image, scripts, packages, toolkit command)."""
BINFMT = Path("/proc/sys/fs/binfmt_misc")


def cross_image_tag(base: str, machine: str) -> str:
    """The cross image of the local build image `base` (a tag without a `:version`)."""
    return f"{base}-cross-{machine}"


def cross_image_present(engine: ContainerEngine, variant: ResolvedVariant, machine: str) -> bool:
    """Whether the variant's cross image for `machine` is here (a cross build makes it)."""
    return engine.has_image(cross_image_tag(variant.build_image.local, machine))


def emulation_missing(machine: str, binfmt: Path = BINFMT) -> str:
    """'' when binfmt_misc runs `machine`'s programs through qemu-user here, in containers too (the
    entry's F flag: the interpreter is opened at registration); else what is missing and the fix."""
    register = (
        f"install qemu-user-static and register its {machine} entry (`mount -t binfmt_misc binfmt_misc "
        f"{binfmt}` if it is not mounted, then `update-binfmts --enable qemu-{machine}`)"
    )
    try:
        entry = (binfmt / f"qemu-{machine}").read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return f"no binfmt_misc entry for {machine} ({binfmt}/qemu-{machine}): {register}"
    except OSError as exc:
        return f"{binfmt}/qemu-{machine} cannot be read ({exc.strerror}): {register}"
    lines = entry.splitlines()
    if not lines or lines[0].strip() != "enabled":
        return f"the binfmt_misc entry qemu-{machine} is disabled: {register}"
    flags = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("flags:")), "")
    if "F" not in flags:
        return (
            f"the binfmt_misc entry qemu-{machine} lacks the F flag (flags: {flags or 'none'}), so a "
            "container cannot reach its interpreter: register qemu-user-static's entry, which has it"
        )
    return ""


def emulated_command(
    wheel: Path, variant: ResolvedVariant, machine: str, command: tuple[str, ...], *, engine: ContainerEngine
) -> process.Result:
    """One smoke command (`{python}`: the target's interpreter, `{import_name}`: the variant's
    package) with `wheel` unpacked for Debian's Python DIST_PYTHON of `machine`, run under emulation
    in the variant's cross image; a wheel for another Python, or a command over SMOKE_TIMEOUT_S,
    raises SmokeError."""
    if not parse_wheel_name(wheel.name).serves(DIST_PYTHON):
        wanted = python_tag(DIST_PYTHON)
        msg = f"{wheel.name}: the emulated smoke runs Debian's Python {DIST_PYTHON} of {machine} ({wanted})"
        raise SmokeError(msg)
    image = cross_image_tag(variant.build_image.local, machine)
    argv = [part.replace("{import_name}", variant.import_name) for part in command]
    script = shlex.join(["bash", "/toolkit-scripts/cross-build.sh", "run", MACHINES[machine].gnu_triplet,
                         DIST_PYTHON, f"/wheels/{wheel.name}", *argv])  # fmt: skip
    # resolved: podman takes a relative source ("wheelhouse/cpu") for a volume's name
    mounts = {toolkit_scripts(): "/toolkit-scripts:ro", wheel.parent.resolve(): "/wheels:ro"}
    try:
        return engine.run_script(image, script, timeout=SMOKE_TIMEOUT_S, mounts=mounts)
    except process.TimedOut as exc:
        msg = f"{wheel.name}: `{' '.join(command)}` under emulation took over {SMOKE_TIMEOUT_S} s"
        raise SmokeError(msg) from exc
