"""Where each variant builds, decided once before anything builds, as frozen data: on the host
(its toolkit is the declared one, or `--allow-toolkit-mismatch` records the difference), in the
declared toolkit's local build image through podman or docker, cross-compiled there for another
machine, GitHub-only (a free-threaded Python this machine lacks), or not here (with why and what
gets it).

`place_steps` makes the one record (`StepPlacement`) from the build steps and the host's `Probes`
(`release.machine.probes.host_probes` gives the real ones; a test passes stand-in functions, so no
process starts): `release plan` prints it (a `runs` column and one why line per variant) and
`release build` prints the same lines, then carries it out. `release reproduce` calls `place`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Generic, Literal, TypeVar

from release.plan.github_only import github_only_line, split_github_only
from release.plan.machine import machine_of
from release.plan.resolve import ResolvedVariant
from release.plan.steps import BuildStep

Where = Literal["host", "image", "cross", "not here", "not probed"]
Engine = TypeVar("Engine")
"""The container engine value (`release.machine.containers.ContainerEngine`): the plan carries the
one the probe gave, never re-derives it."""


@dataclass(frozen=True)
class HostToolkit:
    """What probing this host found for one variant: `problem` is the one-line mismatch or absence
    of its declared toolkit (None: the declared one is here, or `override` allows another)."""

    problem: str | None
    override: str | None = None
    found: str = ""
    """What was found, as the host build's why (`the declared toolkit is here: rocm toolkit 7.2 at
    /opt/rocm ($ROCM_PATH)`, `no toolkit needed`)."""


@dataclass(frozen=True)
class Placement(Generic[Engine]):
    """One variant's build: `where`, `why` in one line (for `not here`: the error to show),
    the toolkit override a host build's verify report records, the engine of an image build."""

    variant: str
    where: Where
    why: str
    override: str | None = None
    engine: Engine | None = None
    image: str | None = None
    """The local image an `image` or `cross` build runs in."""
    machine: str = ""
    """The machine its wheels are for (`x86_64`); '' where the caller did not say."""

    @property
    def runs(self) -> str:
        """The `runs` column: `host`, `image TAG via podman`, `cross in image TAG via podman`,
        `not here` or `not probed`."""
        if self.where == "image":
            return f"image {self.image} via {self.engine}"
        if self.where == "cross":
            return f"cross in image {self.image} via {self.engine}"
        return self.where


def place(
    variants: Mapping[str, ResolvedVariant],
    toolkits: Mapping[str, HostToolkit],
    *,
    engine: Callable[[], Engine | None] | None,
    setup_podman: str = "",
) -> tuple[Placement[Engine], ...]:
    """The placement of each variant, in order. A variant whose host toolkit is not the declared
    one builds in its local image when the image has a recipe and `engine()` (the probe of podman
    or docker, asked at most once and only when an image build needs it) names one; else it is not
    built here, naming `setup_podman` where no engine answered. `engine=None`: no image build (a
    rebuild takes the recorded path: `release reproduce`)."""
    known: list[Engine | None] = []

    def answering(probe: Callable[[], Engine | None]) -> Engine | None:
        if not known:
            known.append(probe())
        return known[0]

    placed: list[Placement[Engine]] = []
    for name, variant in variants.items():
        toolkit = toolkits[name]
        if toolkit.problem is None:
            why = toolkit.override or toolkit.found or "the declared toolkit is here"
            placed.append(Placement(name, "host", why, override=toolkit.override))
            continue
        if engine is None or variant.build_image.local_recipe is None:
            placed.append(Placement(name, "not here", toolkit.problem))
            continue
        local = variant.build_image.local
        chosen = answering(engine)
        if chosen is None:
            why = (
                f"{toolkit.problem}; or build in the declared toolkit's local image {local}, "
                f"which needs podman or docker: `{setup_podman}`"
            )
            placed.append(Placement(name, "not here", why))
            continue
        short = toolkit.problem.split(": install ")[0]  # what was found, without the remedies
        why = (
            f"{short}; building in the declared toolkit's local image {local} through {chosen} "
            "(--allow-toolkit-mismatch builds on the host)"
        )
        placed.append(Placement(name, "image", why, engine=chosen, image=local))
    return tuple(placed)


@dataclass(frozen=True)
class Probes(Generic[Engine]):
    """How the host is asked, as functions: `toolkit(variant)` (files only), `engine()` (podman or
    docker answering `info`; asked at most once, and only when an image or cross build needs it),
    `interpreter(python)` (whether that CPython is here). `machine` is this host's; `everywhere`:
    every step runs here (GitHub Actions' runners carry the free-threaded Pythons)."""

    machine: str
    toolkit: Callable[[ResolvedVariant], HostToolkit]
    engine: Callable[[], Engine | None]
    interpreter: Callable[[str], bool]
    setup_podman: str = ""
    everywhere: bool = False


NOT_PROBED = (
    "where each step runs: not probed (--no-probe); without it `release plan` asks this host's "
    "toolkits, Pythons and podman or docker"
)
GITHUB_ONLY = "no free-threaded CPython on this machine; the release workflow builds it in manylinux"


@dataclass(frozen=True)
class StepPlacement(Generic[Engine]):
    """Where every step of a plan runs: one `Placement` per variant and machine (in the steps'
    order), and the steps that are GitHub-only here. `release plan` prints it, `release build`
    prints the same `lines()` and then carries it out."""

    placements: tuple[Placement[Engine], ...]
    github_only: tuple[BuildStep, ...]
    probed: bool

    def of(self, step: BuildStep) -> Placement[Engine]:
        """The placement of `step`'s variant on its machine."""
        key = (step.variant.name, machine_of(step.variant))
        return next(p for p in self.placements if (p.variant, p.machine) == key)

    def runs(self, step: BuildStep) -> str:
        return "github-only" if self._github(step) else self.of(step).runs

    def why(self, step: BuildStep) -> str:
        return GITHUB_ONLY if self._github(step) else self.of(step).why

    def _github(self, step: BuildStep) -> bool:
        return any(s.identifier == step.identifier for s in self.github_only)

    def lines(self, *, placed_only: bool = False) -> list[str]:
        """One line per variant and machine (`rocm x86_64: image TAG via podman: why`), then the
        GitHub-only line; `placed_only` leaves out the `not here` ones (`release build` says those
        once, as its error or in its summary's skipped list)."""
        if not self.probed:
            return [NOT_PROBED]
        chosen = [p for p in self.placements if not (placed_only and p.where == "not here")]
        said = [f"{p.variant} {p.machine}: {p.runs}: {p.why}" for p in chosen]
        github = github_only_line(self.github_only)
        return [*said, *([github] if github else [])]


def place_steps(steps: Sequence[BuildStep], probes: Probes[Engine] | None) -> StepPlacement[Engine]:
    """The placement of `steps` on this host as `probes` answer (None: not probed, and nothing
    guessed). A variant of this machine is placed by `place`; one of another machine is
    cross-compiled in its local image (`release build --arch MACHINE`) when it has a recipe and an
    engine answers."""
    if probes is None:
        keys = dict.fromkeys((s.variant.name, machine_of(s.variant)) for s in steps)
        return StepPlacement(
            tuple(Placement(name, "not probed", NOT_PROBED, machine=m) for name, m in keys), (), probed=False
        )
    here, github = (tuple(steps), ()) if probes.everywhere else split_github_only(steps, probes.interpreter)
    known: list[Engine | None] = []

    def engine() -> Engine | None:
        if not known:
            known.append(probes.engine())
        return known[0]

    variants: dict[tuple[str, str], ResolvedVariant] = {}
    for step in here:
        variants.setdefault((step.variant.name, machine_of(step.variant)), step.variant)
    native = {name: v for (name, m), v in variants.items() if m == probes.machine}
    placed = {
        p.variant: replace(p, machine=probes.machine)
        for p in place(
            native,
            {name: probes.toolkit(v) for name, v in native.items()},
            engine=engine,
            setup_podman=probes.setup_podman,
        )
    }
    ordered = [
        placed[name] if machine == probes.machine else _cross(variant, machine, engine, probes.setup_podman)
        for (name, machine), variant in variants.items()
    ]
    return StepPlacement(tuple(ordered), github, probed=True)


def _cross(
    variant: ResolvedVariant, machine: str, engine: Callable[[], Engine | None], setup_podman: str
) -> Placement[Engine]:
    """Another machine's wheels: cross-compiled in the variant's local image, or not here."""
    local = variant.build_image.local
    if variant.build_image.local_recipe is None:
        why = (
            f"{machine} wheels: {variant.name} has no local Debian build image to cross-compile in "
            f"(the release workflow builds them on a {machine} runner)"
        )
        return Placement(variant.name, "not here", why, machine=machine)
    chosen = engine()
    if chosen is None:
        why = (
            f"{machine} wheels are cross-compiled in the local image {local}, which needs podman or "
            f"docker: `{setup_podman}`"
        )
        return Placement(variant.name, "not here", why, machine=machine)
    why = f"another machine's wheels: `release build --arch {machine}` cross-compiles them here"
    return Placement(variant.name, "cross", why, engine=chosen, image=local, machine=machine)


LegWhere = Literal["here", "image", "emulated"]


@dataclass(frozen=True)
class LegPlacement:
    """Where one hardware leg (`release hardware`) runs: on this machine's own Python, in a
    container of the serving image, or, for another machine's wheel, under emulation."""

    where: LegWhere
    why: str
    image: str | None = None
    machine: str = ""

    @property
    def runs(self) -> str:
        if self.where == "image":
            return "in the image"
        if self.where == "emulated":
            return f"emulated {self.machine}"
        return "here"


def place_leg(*, image: str | None, machine: str, host: str) -> LegPlacement:
    """The leg of a `machine` wheel on a `host` machine, in `image` (None: the runner's own Python).
    Another machine's wheel runs under emulation whatever the image; `release hardware` carries
    this out and `release plan --smoke` shows it."""
    if machine != host:
        why = f"a {machine} wheel on this {host} machine: Debian's Python of {machine} under emulation"
        return LegPlacement("emulated", why, machine=machine)
    if image:
        why = f"in a container of {image}, with its backend's device needs"
        return LegPlacement("image", why, image, machine)
    return LegPlacement("here", "on this machine's own Python", machine=machine)
