"""What a smoke run found: one `Outcome` per wheel and image, and how it is reported."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from release import table

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Step:
    """One check of one wheel in one image."""

    name: str
    ok: bool
    seconds: float
    detail: str = ""
    output: str = ""
    """A command's output (stdout, then stderr), its last lines, passing or not."""


@dataclass(kw_only=True)
class Outcome:
    """Every check of one wheel in one image."""

    wheel: str
    sha256: str
    variant: str
    python: str
    image: str
    expect: str
    steps: list[Step] = field(default_factory=list)
    runner: str = "host"
    """What ran the checks: the host, a namespace simulation, or a container of a local image."""
    error: str = ""
    output_tail: str = ""
    not_run: list[str] = field(default_factory=list)
    """Checks that did not run, each with why (the import refused: no GPU driver here). Never a
    pass: the leg counts as passed only when this is empty (`passed`)."""

    @property
    def ok(self) -> bool:
        """Nothing failed (checks that did not run are `not_run`, not failures)."""
        return not self.error and all(s.ok for s in self.steps)

    @property
    def passed(self) -> bool:
        """Nothing failed and every check ran."""
        return self.ok and not self.not_run

    def add(self, step: Step, failed_output: str | None = None) -> str:
        """Record one check: a failed one sets the outcome's error, and its output tail when
        `failed_output` is given. Returns the log line's end, `name ... ok (1.2s): detail`."""
        self.steps.append(step)
        if not step.ok:
            self.error = f"{step.name}: {step.detail}" if step.detail else step.name
            if failed_output is not None:
                self.output_tail = failed_output
        extra = f": {table.printable(step.detail)}" if step.detail else ""
        return (
            f"{table.printable(step.name)} ... {'ok' if step.ok else 'FAILED'} ({step.seconds:.1f}s){extra}"
        )

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    def as_json(self) -> dict[str, object]:
        data = asdict(self)
        data["ok"] = self.ok
        data["passed"] = self.passed
        data["seconds"] = round(self.seconds, 2)
        return data


def report(outcomes: Sequence[Outcome], left: Sequence[str] = ()) -> dict[str, object]:
    """The run as JSON; `left`: a line per wheel of another machine not run here (never a result)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "ok": all(o.ok for o in outcomes),
        "results": [o.as_json() for o in outcomes],
        "left_to_their_machines": list(left),
    }


def result(outcome: Outcome) -> str:
    """A leg's result cell: `pass` only when every check ran and passed."""
    if not outcome.ok:
        return f"FAIL ({outcome.error})"
    if outcome.not_run:
        return f"NOT RUN ({len(outcome.not_run)} check(s): {outcome.not_run[0]})"
    return "pass"


def summary(outcomes: Sequence[Outcome]) -> str:
    rows = [(o.wheel, o.image, o.runner, o.expect, result(o), f"{o.seconds:.1f}s") for o in outcomes]
    return table.render(("wheel", "image", "ran in", "expect", "result", "seconds"), rows)


def count_line(outcomes: Sequence[Outcome], seconds: float) -> str:
    """`2/3 passed in 40s; 1 leg's checks did not run`: a leg whose checks did not run is never
    counted as passed."""
    line = f"{sum(o.passed for o in outcomes)}/{len(outcomes)} passed in {seconds:.0f}s"
    if unrun := sum(o.ok and bool(o.not_run) for o in outcomes):
        line += f"; {unrun} leg(s) with checks that did not run (not passed: see the result column)"
    return line


def failures(outcomes: Sequence[Outcome], required: str | None) -> list[str]:
    """A line per failed leg; with `required` (why every check must run: `--require-self-tests`,
    `CI=true`), a leg whose checks did not run is one too."""
    failed = [f"{o.wheel} in {o.image}: {o.error}" for o in outcomes if not o.ok]
    if required:
        unrun = [o for o in outcomes if o.ok and o.not_run]
        failed += [f"{o.wheel} in {o.image}: {o.not_run[0]} ({required})" for o in unrun]
    return failed


def command_outputs(outcomes: Sequence[Outcome]) -> str:
    """Every command's output tail, passing or not (`release smoke --verbose`)."""
    blocks = []
    for o in outcomes:
        for step in o.steps:
            if step.output:
                mark = "ok" if step.ok else "FAILED"
                lines = "\n".join("  | " + table.printable(line) for line in step.output.splitlines())
                head = f"[{o.python} {o.image}] {o.wheel}: {step.name} ({mark})"
                blocks.append(f"{table.printable(head)}\n{lines}")
    return "\n".join(blocks)
