"""Smoke legs of another machine's wheels on this one (an aarch64 wheel on an x86_64 host): under
emulation, binfmt_misc's qemu-user, in the variant's cross image with Debian's own Python of that
machine (`release.builder.cross.DIST_PYTHON`), the wheel unpacked onto its path. GitHub's
ubuntu-24.04-arm runners smoke every Python natively; here only the one Debian gives can run, and
a wheel of another Python is said to be left to such a machine, never counted as passing."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from release.config.machines import MACHINES, host_machine, machine_of_tags
from release.errors import SmokeError
from release.machine.containers import ContainerEngine
from release.machine.emulation import (
    DIST_PYTHON,
    cross_image_present,
    cross_image_tag,
    emulated_command,
    emulation_missing,
)
from release.plan.resolve import ResolvedVariant
from release.smoke.outcome import Outcome, Step
from release.smoke.runner import tail
from release.smoke.verdict import judge, shown, smoke_commands
from release.wheel.files import file_sha256
from release.wheel.names import parse_wheel_name

TAIL_LINES = 20
"""Each emulated command's output kept in its step (its last lines)."""


@dataclass(frozen=True)
class Foreign:
    """A wheel of another machine, and why it cannot run here ('' when it runs under emulation)."""

    wheel: Path
    machine: str
    left: str = ""


def wheel_machine(wheel: Path) -> str | None:
    """The machine a wheel's platform tags name, when it is one machine that is not this host's."""
    machine = machine_of_tags(parse_wheel_name(wheel).platforms)
    return None if machine == host_machine() else machine


def foreign_wheels(
    wheels: Sequence[Path], python: str | None, *, missing: Callable[[str], str] | None = None
) -> list[Foreign]:
    """Each wheel of another machine, with why it is left to that machine ('' when it runs here):
    emulation is not set up, or the wheel is for a Python that Debian's image of it lacks."""
    found = []
    for wheel in wheels:
        machine = wheel_machine(wheel)
        if machine is None:
            continue
        name = parse_wheel_name(wheel)
        left = (missing or emulation_missing)(machine)
        if not left and not name.serves(python or DIST_PYTHON):
            own = name.python_version() or "?"
            left = f"a Python {own} wheel; emulation here has Debian's Python {DIST_PYTHON} of {machine} only"
        elif not left and python is not None and python != DIST_PYTHON:
            left = f"Python {python}: emulation here has Debian's Python {DIST_PYTHON} of {machine} only"
        found.append(Foreign(wheel, machine, left))
    return found


def left_line(foreign: Foreign) -> str:
    """The line that says a wheel was not smoke-tested here, and where it is."""
    runner = MACHINES[foreign.machine].github_runner
    return (
        f"{foreign.wheel.name}: not run on this {host_machine()} machine ({foreign.left}); "
        f"an {foreign.machine} machine runs it (GitHub: the {runner} runner)"
    )


def emulated_legs(
    variant: ResolvedVariant, foreign: Sequence[Foreign], *, log: Callable[[str], None]
) -> tuple[list[Outcome], list[str]]:
    """(the outcomes of the wheels that run under emulation, a line for each left to its machine)."""
    engine = ContainerEngine.answering() if any(not f.left for f in foreign) else None
    outcomes, left = [], []
    for wheel in foreign:
        if wheel.left:
            left.append(left_line(wheel))
            log(left[-1])
        else:
            outcomes.append(emulated_leg(variant, wheel, engine=engine, log=log))
    return outcomes, left


def emulated_leg(
    variant: ResolvedVariant, foreign: Foreign, *, engine: ContainerEngine | None, log: Callable[[str], None]
) -> Outcome:
    """The variant's smoke commands for one wheel under emulation, each judged as a host leg's are
    (exit status, and a self-test's JSON verdict)."""
    machine = foreign.machine
    image = cross_image_tag(variant.build_image.local, machine)
    label = f"[{DIST_PYTHON} qemu-{machine}]"
    outcome = Outcome(
        wheel=foreign.wheel.name,
        sha256=file_sha256(foreign.wheel),
        variant=variant.name,
        python=DIST_PYTHON,
        image=f"qemu-{machine}",
        expect="pass",
        runner=f"qemu-user in {image} (Debian's python{DIST_PYTHON}, the wheel unpacked)",
    )
    if engine is None:
        outcome.error = "no podman or docker answers to run the cross image"
    elif not cross_image_present(engine, variant, machine):
        outcome.error = (
            f"the cross image {image} is not here: `release build --variant {variant.name} --arch {machine}` "
            "makes it"
        )
    if engine is None or outcome.error:
        log(f"{label} FAILED: {outcome.error}")
        return outcome
    for command in smoke_commands(variant.smoke_commands, variant.smoke_self_tests):
        if not _run_command(
            variant,
            foreign,
            command.argv,
            self_test=command.self_test,
            engine=engine,
            outcome=outcome,
            log=log,
            label=label,
        ):
            break
    return outcome


def _run_command(
    variant: ResolvedVariant,
    foreign: Foreign,
    argv: tuple[str, ...],
    *,
    self_test: bool,
    engine: ContainerEngine,
    outcome: Outcome,
    log: Callable[[str], None],
    label: str,
) -> bool:
    """One command under emulation, its step added to `outcome`; whether it passed."""
    name = shown(argv, variant.import_name)
    started = time.monotonic()
    try:
        result = emulated_command(foreign.wheel, variant, foreign.machine, argv, engine=engine)
    except SmokeError as exc:
        log(f"{label} {outcome.add(Step(name, False, time.monotonic() - started, str(exc)))}")
        return False
    ok, detail = judge(result.returncode, result.stdout, self_test=self_test)
    output = tail(result.output, TAIL_LINES)
    log(f"{label} {outcome.add(Step(name, ok, time.monotonic() - started, detail, output), output)}")
    return ok
