"""The rule registry and what every rule reads and returns.

A rule is a function of a `RuleContext` returning a `Finding`, registered with `@rule("id")`: the
id is written once, there. `release.inspect.rules` imports the rule modules in order, so the
registry's order is the order of the report.
"""

from __future__ import annotations

import fnmatch
import functools
import posixpath
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Mapping

    from release.inspect.contents import WheelContents
    from release.inspect.policy import Policy
    from release.plan.resolve import ResolvedVariant

Status = Literal["pass", "fail", "warn", "not-applicable"]
STATUSES: tuple[Status, ...] = ("pass", "fail", "warn", "not-applicable")


@dataclass(frozen=True)
class Finding:
    """What a rule found: its status, one sentence, and the wheel's files it is about."""

    status: Status
    message: str
    paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class RuleResult:
    """The outcome of one rule on one wheel."""

    id: str
    status: Status
    message: str
    paths: tuple[str, ...] = ()
    """Files of the wheel the result is about (for `vendored-runtime`: the vendored files)."""

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "status": self.status, "message": self.message, "paths": list(self.paths)}


@dataclass(frozen=True)
class RuleContext:
    """Everything a rule sees: the wheel, and the matrix, variant and policies it is checked against."""

    wheel: WheelContents
    matrix: str | None
    """The matrix file the wheel is checked against, if any."""
    variant: ResolvedVariant | None
    """The variant the wheel is one of; None for a wheel that is none of the matrix's."""
    excludes: tuple[str, ...]
    """What must not be inside the wheel: the variant's `excludes` (what repair kept out), or
    without a variant every known runtime's libraries. Not `ResolvedVariant.runtime_globs`, which
    are the runtime's libraries alone, without the declared system libraries."""
    release: bool
    expected_version: str | None
    policies: tuple[Policy, ...]
    toolkit_override: str | None = None
    """Set when the wheel was built with --allow-toolkit-mismatch ('declared 6.4, built with 5.2')."""

    def provided(self) -> set[str]:
        """Names the wheel's own libraries answer to: file names and sonames."""
        names = {posixpath.basename(e.path) for e in self.wheel.elf_files}
        names.update(e.soname for e in self.wheel.elf_files if e.soname)
        return names


Check = Callable[[RuleContext], Finding]
AcrossCheck = Callable[[Sequence[RuleContext], "Mapping[str, ResolvedVariant]"], list[Finding]]
"""A rule over the wheels of one release: one finding per wheel, in order, given every variant."""


@dataclass(frozen=True)
class Rule:
    """A registered rule: `check` judges one wheel; a release rule also has `across`."""

    id: str
    check: Check
    across: AcrossCheck | None = None

    def apply(self, ctx: RuleContext) -> RuleResult:
        return self.result(self.check(ctx))

    def result(self, found: Finding) -> RuleResult:
        return RuleResult(self.id, found.status, found.message, found.paths)


_REGISTRY: dict[str, Rule] = {}


def _register(new: Rule) -> None:
    if new.id in _REGISTRY:
        msg = f"rule {new.id!r} is registered twice"
        raise ValueError(msg)
    _REGISTRY[new.id] = new


def rule(rule_id: str) -> Callable[[Check], Check]:
    """Register a rule under its stable id (reports, the schema and the README use it)."""

    def register(check: Check) -> Check:
        _register(Rule(rule_id, check))
        return check

    return register


def release_rule(rule_id: str, *, alone: str) -> Callable[[AcrossCheck], AcrossCheck]:
    """Register a rule over the wheels of one release; a wheel verified alone gets `alone` (n/a)."""

    def register(across: AcrossCheck) -> AcrossCheck:
        _register(Rule(rule_id, lambda ctx: Finding("not-applicable", alone), across))
        return across

    return register


def registered() -> tuple[Rule, ...]:
    """Every registered rule, in registration order."""
    return tuple(_REGISTRY.values())


# --- helpers the rules share ------------------------------------------------------------------

_GRAFT_HASH = re.compile(r"^(?P<stem>.+)-[0-9a-f]{8}(?P<suffix>\.so(?:\.[^/]*)?)$")


def original_name(name: str) -> str:
    """The library's name before auditwheel grafted it (`libamdhip64-1a2b3c4d.so.5` -> `libamdhip64.so.5`)."""
    match = _GRAFT_HASH.match(name)
    return match.group("stem") + match.group("suffix") if match else name


def is_grafted(name: str) -> bool:
    """Whether a file name carries the hash suffix auditwheel gives the libraries it grafts."""
    return _GRAFT_HASH.match(name) is not None


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether a file name or soname matches one of the globs (case-sensitive, like the loader),
    also under the name it had before auditwheel grafted it with a hash suffix."""
    globs = _globs(patterns if isinstance(patterns, tuple) else tuple(patterns))
    if globs is None:
        return False
    original = original_name(name)
    return globs.match(name) is not None or (original != name and globs.match(original) is not None)


@functools.lru_cache(maxsize=64)
def _globs(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """The globs as one pattern (`fnmatch.fnmatchcase` of each, in one match): the rules ask it
    of every NEEDED entry and member of a wheel, thousands of times."""
    if not patterns:
        return None
    return re.compile("|".join(fnmatch.translate(p) for p in patterns))


def not_applicable(ctx: RuleContext, what: str = "the matrix") -> Finding:
    """The finding of a rule that needs a variant, for a wheel checked without one."""
    if ctx.matrix is None:
        return Finding("not-applicable", f"needs {what} (no matrix file given)")
    return Finding(
        "not-applicable", f"needs a variant: {ctx.wheel.distribution!r} is no variant's distribution"
    )


def listing(items: Sequence[str], limit: int = 6) -> str:
    """Items joined for a message: the first `limit`, then how many more."""
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
