"""consistency across the wheels of one release, on synthetic wheel facts."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from release.inspect.rules import RULES
from release.inspect.rules.registry import RuleContext
from tests.unit.test_rules_good import EXT, LIBS, Facts, context, elf, good_rocm, variants


def _cpu(python: str = "312") -> Facts:
    facts = good_rocm()
    facts.distribution = "xfer_engine_cpu"
    facts.tags = (f"cp{python}-cp{python}-manylinux_2_28_x86_64",)
    facts.add_elf(elf(EXT, needed=("libxfercore-1a2b3c4d.so.0",)))
    return facts


def _rocm(python: str = "312") -> Facts:
    facts = good_rocm()
    facts.tags = (f"cp{python}-cp{python}-manylinux_2_28_x86_64",)
    return facts


def _release(*wheels: Facts) -> list[tuple[str, str]]:
    across = next(r for r in RULES if r.id == "consistency").across
    assert across is not None
    contexts: list[RuleContext] = [context(w) for w in wheels]
    return [(f.status, f.message) for f in across(contexts, variants())]


def test_a_consistent_release_passes() -> None:
    found = _release(_rocm("312"), _rocm("313"), _cpu("312"), _cpu("313"))
    assert [s for s, _ in found] == ["pass"] * 4, found


def test_one_wheel_or_a_foreign_one_is_not_applicable() -> None:
    assert _release(_rocm())[0][0] == "not-applicable"
    foreign = _rocm()
    foreign.distribution = "someone_else"
    assert [s for s, _ in _release(_rocm(), _cpu(), foreign)] == ["pass", "pass", "not-applicable"]


def _change(facts: Facts, change: Callable[[Facts], None]) -> Facts:
    change(facts)
    return facts


@pytest.mark.parametrize(
    ("name", "wheels", "failing", "says"),
    [
        (
            "two versions",
            lambda: [_rocm(), _change(_cpu(), lambda f: setattr(f, "version", "0.2.0"))],
            [0, 1],
            "mixes versions",
        ),
        (
            "a Python build of one variant differs",
            lambda: [_rocm("312"), _change(_rocm("313"), lambda f: f.add_text("xfer/__init__.py", b"new"))],
            [1],
            "differs from variant rocm's other wheels in xfer/__init__.py",
        ),
        (
            "a variant lacks an engine file",
            lambda: [_change(_rocm(), lambda f: f.add_text("xfer/_selftest.py", b"")), _cpu()],
            [1],
            "lacks engine files other variants ship: xfer/_selftest.py",
        ),
        (
            "a file marked as one runtime's may be missing elsewhere",
            lambda: [_change(_rocm(), lambda f: f.add_text("xfer/_rocm_helpers.py", b"")), _cpu()],
            [],
            "",
        ),
        (
            "the cpu variant binds the ROCm runtime",
            lambda: [_rocm(), _change(_cpu(), lambda f: f.add_elf(elf(EXT, needed=("libamdhip64.so.5",))))],
            [1],
            "binds variant rocm's runtime (libamdhip64.so.5)",
        ),
        (
            "the rocm variant carries the CUDA runtime",
            lambda: [_change(_rocm(), lambda f: f.add_elf(elf(f"{LIBS}/libcudart-0a1b2c3d.so.12"))), _cpu()],
            [0],
            "carries variant cuda's runtime libraries",
        ),
    ],
)
def test_an_inconsistent_release_fails(
    name: str, wheels: Callable[[], list[Facts]], failing: list[int], says: str
) -> None:
    found = _release(*wheels())
    assert [i for i, (s, _) in enumerate(found) if s == "fail"] == failing, found
    assert all(says in found[i][1] for i in failing), found
