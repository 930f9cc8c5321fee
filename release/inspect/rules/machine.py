"""The machine rule: every ELF file of a wheel is code for the machine its platform tag names.

It reads the machine each ELF header declares (`e_machine` with its class and byte order, as
`release.inspect.elf` parsed it into `ElfInfo.machine`: `x86_64` for EM_X86_64 = 62, `aarch64`
for EM_AARCH64 = 183) and nothing else: a wheel tagged `manylinux_2_28_aarch64` that carries one
x86_64 library fails, naming the file, as does a wheel that mixes machines, whatever its tag, and
a wheel whose tags name a machine it holds no code for (`x86_64.aarch64` with x86_64 code only:
pip installs it on aarch64, where nothing of it loads).
"""

from __future__ import annotations

from release.config.machines import MACHINES, machine_of_tag
from release.inspect.rules.registry import Finding, RuleContext, listing, rule
from release.wheel.names import platforms_of


def _spelled(machine: str) -> str:
    """`aarch64 (e_machine 183)` for a machine the toolkit builds for, else its name as read."""
    known = MACHINES.get(machine)
    return f"{machine} (e_machine {known.elf_machine})" if known is not None else machine


@rule("elf-machine")
def elf_machine(ctx: RuleContext) -> Finding:
    """Every ELF file's machine is the one the wheel's platform tag names, and the variant's."""
    elves = ctx.wheel.elf_files
    if not elves:
        return Finding("not-applicable", "no ELF files: no machine code to check")
    platforms = platforms_of(ctx.wheel.tags)
    tagged = {m for m in (machine_of_tag(p) for p in platforms) if m is not None}
    if not tagged:
        return Finding(
            "not-applicable", f"platform {', '.join(platforms)} names no machine the toolkit builds for"
        )
    found = sorted({e.machine for e in elves})
    if len(found) > 1:
        shown = [f"{e.path} ({e.machine})" for e in elves]
        return Finding(
            "fail",
            f"the wheel mixes machines ({', '.join(found)}): {listing(shown, 6)}; one wheel is one "
            "machine's: build each machine's wheel on it (or its cross toolchain) and ship them apart",
            tuple(e.path for e in elves),
        )
    wrong = [e for e in elves if e.machine not in tagged]
    if wrong:
        tags = ", ".join(sorted(tagged))
        shown = [f"{e.path} is {_spelled(e.machine)}" for e in wrong]
        return Finding(
            "fail",
            f"tagged for {tags}, but {listing(shown, 6)}: built for another machine than the tag "
            f"says (build the {tags} wheel on a {tags} machine, or with its cross toolchain)",
            tuple(e.path for e in wrong),
        )
    machine = found[0]
    missing = sorted(tagged - {machine})
    if missing:
        return Finding(
            "fail",
            f"tagged for {', '.join(sorted(tagged))}, but its {len(elves)} ELF file(s) are all "
            f"{_spelled(machine)}: no code for {', '.join(missing)}, where installers would put it "
            f"(tag it {machine} only: {listing([e.path for e in elves], 3)})",
            tuple(e.path for e in elves),
        )
    if ctx.variant is not None and ctx.variant.floors and machine not in ctx.variant.floors:
        released = ", ".join(ctx.variant.floors)
        return Finding(
            "fail",
            f"a {machine} wheel, but variant {ctx.variant.name!r} is released for {released} only "
            "(platform.architectures, narrowed by its backend's `machines`)",
            tuple(e.path for e in elves),
        )
    return Finding("pass", f"{len(elves)} ELF file(s), all {_spelled(machine)}, as the tag says")
