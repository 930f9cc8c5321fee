"""stable-abi on synthetic wheel facts: the tag against the variant's stable_abi, and abi3audit's
findings (replaced here by a stand-in: unit tests start no process) turned into the finding."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from release.config import matrix as matrix_mod
from release.errors import VerifyError
from release.inspect.contents import WheelContents
from release.inspect.rules import RULES
from release.inspect.rules import abi as abi_rule
from release.inspect.rules.registry import RuleContext, RuleResult
from release.inspect.stableabi import LimitedApiAudit
from release.inspect.verify import manylinux_policies
from release.plan.resolve import ResolvedVariant
from release.plan.steps import make_plan
from tests.unit.test_rules_good import ROOT, Facts, elf

MATRIX = """\
schema_version: 1
engine:
  source: engine
  import_name: xfer
  version: "0.1.0"
  stable_abi: "3.12"
python: ["3.11", "3.12", "3.13"]
platform:
  floor: manylinux_2_28_x86_64
variants:
  cpu:
    distribution: xfer-engine-cpu
    backend: cpu
  percpu:
    distribution: xfer-engine-percpu
    backend: cpu
    stable_abi: "off"
"""
EXT3 = "xfer/_xfer.abi3.so"
CORE = "xfer_engine_cpu.libs/libxfercore-1a2b3c4d.so.0"


@functools.cache
def _variants() -> dict[str, ResolvedVariant]:
    backends = ROOT / "packaging" / "backends"
    loaded = matrix_mod.loads(MATRIX, path=Path("/p/matrix.yaml"), backends_dir=backends)
    return dict(make_plan(loaded).variants)


def _wheel(tag: str = "cp312-abi3-manylinux_2_28_x86_64", distribution: str = "xfer_engine_cpu") -> Facts:
    facts = Facts(distribution=distribution, tags=(tag,))
    facts.add_elf(elf(EXT3, needed=("libxfercore-1a2b3c4d.so.0",)))
    facts.add_elf(elf(CORE, soname="libxfercore-1a2b3c4d.so.0"))
    facts.add_elf(elf("xfer_engine_cpu-0.1.0.data/scripts/xfer-master", executable=True))
    return facts


@dataclass
class _Auditor:
    """Stands in for abi3audit: records what it was asked, answers from `found`."""

    found: dict[str, LimitedApiAudit]
    calls: list[tuple[tuple[str, ...], str]]

    def __call__(self, wheel: WheelContents, paths: Sequence[str], floor: str) -> list[LimitedApiAudit]:
        self.calls.append((tuple(paths), floor))
        return [self.found.get(p, LimitedApiAudit(p, (), ())) for p in paths]


@pytest.fixture
def auditor(monkeypatch: pytest.MonkeyPatch) -> _Auditor:
    stand_in = _Auditor({}, [])
    monkeypatch.setattr(abi_rule, "audit_limited_api", stand_in)
    return stand_in


def _apply(facts: Facts, variant: str | None = "auto", *, matrix: bool = True) -> RuleResult:
    known = _variants() if matrix else {}
    if variant == "auto":
        name = facts.distribution.replace("_", "-")
        chosen = next((v for v in known.values() if v.distribution == name), None)
    else:
        chosen = known[variant] if variant is not None else None
    ctx = RuleContext(
        wheel=facts.contents(),
        matrix="/p/matrix.yaml" if matrix else None,
        variant=chosen,
        excludes=(),
        release=False,
        expected_version=None,
        policies=manylinux_policies(),
    )
    return next(r for r in RULES if r.id == "stable-abi").apply(ctx)


def test_a_clean_abi3_wheel_passes_and_every_shared_object_is_audited_at_the_floor(auditor: _Auditor) -> None:
    result = _apply(_wheel())
    assert result.status == "pass", result
    assert "limited API of Python 3.12" in result.message
    # The executable is no shared object: abi3audit gets the extension and the library.
    assert auditor.calls == [((EXT3, CORE), "3.12")]


def test_symbols_outside_the_limited_api_fail_and_are_named(auditor: _Auditor) -> None:
    auditor.found[EXT3] = LimitedApiAudit(EXT3, ("_PyObject_GetDictPtr",), (("PyUnicode_AsUTF8", "3.13"),))
    result = _apply(_wheel())
    assert result.status == "fail", result
    assert result.paths == (EXT3,)
    assert "_PyObject_GetDictPtr (not in the limited API)" in result.message
    assert "PyUnicode_AsUTF8 (from 3.13), newer than the floor 3.12" in result.message


@pytest.mark.parametrize(
    ("tag", "variant", "says"),
    [
        ("cp313-abi3-manylinux_2_28_x86_64", "cpu", "expected cp312-abi3"),
        ("cp312-cp312-manylinux_2_28_x86_64", "cpu", "expected one cp312-abi3 wheel, got cp312-cp312"),
        ("cp313-cp313-manylinux_2_28_x86_64", "cpu", "expected one cp312-abi3 wheel, got cp313-cp313"),
        ("cp312-abi3-manylinux_2_28_x86_64", "percpu", "its stable_abi is off"),
    ],
)
def test_a_tag_that_is_not_the_variants_fails_before_any_audit(
    auditor: _Auditor, tag: str, variant: str, says: str
) -> None:
    result = _apply(_wheel(tag), variant)
    assert result.status == "fail", result
    assert says in result.message, result
    assert auditor.calls == []


@pytest.mark.parametrize(
    ("tag", "variant", "matrix", "says"),
    [
        ("cp311-cp311-manylinux_2_28_x86_64", "cpu", True, "below the stable ABI floor 3.12"),
        ("cp312-cp312-manylinux_2_28_x86_64", "percpu", True, "declares no stable_abi"),
        ("cp312-cp312-manylinux_2_28_x86_64", None, True, "not an abi3 wheel"),
        ("cp312-cp312-manylinux_2_28_x86_64", None, False, "not an abi3 wheel"),
    ],
)
def test_not_applicable(auditor: _Auditor, tag: str, variant: str | None, matrix: bool, says: str) -> None:
    result = _apply(_wheel(tag), variant, matrix=matrix)
    assert result.status == "not-applicable", result
    assert says in result.message
    assert auditor.calls == []


def test_without_a_matrix_an_abi3_wheel_is_audited_at_its_own_tag(auditor: _Auditor) -> None:
    result = _apply(_wheel("cp310-abi3-manylinux2014_x86_64", "someone_elses"), None, matrix=False)
    assert result.status == "pass", result
    assert auditor.calls == [((EXT3, CORE), "3.10")]


def test_an_abi3_wheel_without_shared_objects_warns(auditor: _Auditor) -> None:
    facts = Facts(distribution="xfer_engine_cpu", tags=("cp312-abi3-manylinux_2_28_x86_64",))
    assert _apply(facts).status == "warn"
    assert auditor.calls == []


def test_an_audit_that_cannot_finish_fails_the_rule_not_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def cannot(wheel: WheelContents, paths: Sequence[str], floor: str) -> list[LimitedApiAudit]:
        msg = f"{wheel.path.name}: abi3audit did not finish within 300 s"
        raise VerifyError(msg)

    monkeypatch.setattr(abi_rule, "audit_limited_api", cannot)
    result = _apply(_wheel())
    assert result.status == "fail"
    assert "cannot show that it keeps to the limited API of Python 3.12" in result.message
    assert "did not finish within 300 s" in result.message
