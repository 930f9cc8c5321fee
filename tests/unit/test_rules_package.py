"""wheel-name, non-executable-script and variant-conflict on synthetic wheel facts."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from release.config import matrix as matrix_mod
from release.errors import MatrixError
from release.inspect.rules.package import has_metadata_guard
from release.plan.resolve import ResolvedVariant
from release.plan.steps import make_plan
from tests.unit.test_rules_good import (
    CORE,
    MATRIX,
    MATRIX_FILE,
    ROOT,
    SCRIPT,
    Case,
    Change,
    Facts,
    apply,
    check_case,
    context,
    elf,
    good_rocm,
)


def _set(**values: object) -> Change:
    def change(f: Facts) -> None:
        for key, value in values.items():
            setattr(f, key, value)

    return change


def _chain(*changes: Change) -> Change:
    def change(f: Facts) -> None:
        for c in changes:
            c(f)

    return change


NAMES = [
    Case("what the matrix expects", lambda f: None, "pass"),
    Case("wrong distribution for --variant", _set(distribution="xfer_engine_rokm"), "fail", variant="rocm",
         says="is not variant rocm's"),
    Case("foreign distribution: n/a", _set(distribution="xfer_engine_rokm"), "not-applicable"),
    Case("python tag outside the matrix", _set(tags=("cp311-cp311-manylinux_2_28_x86_64",)), "fail",
         says="cp311"),
    Case("py3 tag", _set(tags=("py3-none-manylinux_2_28_x86_64",)), "fail", says="py3"),
    Case("version other than the release tag", lambda f: None, "fail", expected_version="v0.2.0"),
    Case("the release tag matches", lambda f: None, "pass", expected_version="v0.1.0"),
    Case("a normalized version matches", _set(version="0.1"), "pass", expected_version="0.1.0"),
    Case("METADATA name differs", _set(metadata={"Name": "xfer-engine", "Version": "0.1.0"}), "fail",
         says="METADATA Name"),
    Case("METADATA version differs", _set(metadata={"Name": "xfer-engine-rocm", "Version": "0.2"}), "fail",
         says="METADATA Version"),
    Case("no METADATA", _set(metadata={}), "fail", says="METADATA Name None"),
    Case("no matrix", lambda f: None, "not-applicable", matrix=False),
]


@pytest.mark.parametrize("case", NAMES, ids=[c.name for c in NAMES])
def test_wheel_name(case: Case) -> None:
    check_case("wheel-name", case)


def _mode(name: str, mode: int) -> Change:
    def change(f: Facts) -> None:
        f.modes[name] = mode

    return change


def _executable(path: str, mode: int) -> Change:
    def change(f: Facts) -> None:
        f.add_elf(elf(path, executable=True), mode)

    return change


SCRIPTS = [
    Case("scripts carry the run bit", lambda f: None, "pass"),
    Case("script without it", _mode(SCRIPT, 0o644), "fail", (SCRIPT,)),
    Case("executable ELF without it", _executable("xfer/bin/xm", 0o644), "fail", ("xfer/bin/xm",)),
    Case("a shared library needs none", _mode(CORE, 0o644), "pass"),
    Case("group execute is enough", _mode(SCRIPT, 0o654), "pass"),
]


@pytest.mark.parametrize("case", SCRIPTS, ids=[c.name for c in SCRIPTS])
def test_non_executable_script(case: Case) -> None:
    check_case("non-executable-script", case)


def _init(source: bytes | None) -> Change:
    def change(f: Facts) -> None:
        if source is None:
            del f.texts["xfer/__init__.py"]
            del f.modes["xfer/__init__.py"]
        else:
            f.add_text("xfer/__init__.py", source)

    return change


def _cpu_only(f: Facts) -> None:
    f.distribution = "xfer_engine_cpu"


CONFLICTS = [
    Case("guarded", lambda f: None, "pass", ("xfer/__init__.py",)),
    Case("unguarded", _init(b"from ._xfer import *\n"), "fail", ("xfer/__init__.py",), says="has no guard"),
    Case("no __init__.py", _init(None), "fail", says="no xfer/__init__.py"),
    Case("not Python", _init(b"\xff\xfe(((("), "fail"),
    Case("too large to parse", _init(b"#" * (2 << 20)), "fail", says="too large"),
    Case("foreign wheel", _set(distribution="someone_else"), "not-applicable"),
    Case("no matrix", _init(None), "not-applicable", matrix=False),
    Case("cpu variant guarded too", _cpu_only, "pass"),
]


@pytest.mark.parametrize("case", CONFLICTS, ids=[c.name for c in CONFLICTS])
def test_variant_conflict(case: Case) -> None:
    check_case("variant-conflict", case)


GUARDS = {
    "from importlib.metadata import distributions\nx = list(distributions())": True,
    "import importlib.metadata\nimportlib.metadata.distributions()": True,
    "import importlib.metadata as md\nmd.packages_distributions()": True,
    "from importlib import metadata\nmetadata.distribution('xfer-engine')": True,
    "from importlib.metadata import metadata as m\nm('xfer-engine-rocm')": True,
    "import importlib_metadata\nimportlib_metadata.distributions()": True,
    "def _guard():\n    from importlib.metadata import distributions as d\n    return d()\n": True,
    "from importlib.metadata import version\nversion('xfer')": False,
    "import importlib.metadata": False,
    "def distributions():\n    return []\ndistributions()": False,
    "from ._xfer import *": False,
    "this is not python (": False,
    "x = " + "(" * 500 + ")" * 500: False,
    "nul\0byte": False,
}


@pytest.mark.parametrize(("source", "expected"), list(GUARDS.items()))
def test_has_metadata_guard(source: str, expected: bool) -> None:
    assert has_metadata_guard(source) is expected


def _size(size: int) -> Change:
    def change(f: Facts) -> None:
        f.size = size

    return change


SIZES = [
    Case("under 100 MiB", _size(50_000_000), "pass", says="PyPI's default"),
    Case("exactly 100 MiB", _size(100 << 20), "pass"),
    Case("over 100 MiB", _size((100 << 20) + 1), "fail", says="refuses the upload"),
    Case("over 100 MiB, foreign wheel: warn", _chain(_size(300 << 20), _set(distribution="x")), "warn"),
    Case("over 100 MiB, no matrix: warn", _size(300 << 20), "warn", matrix=False, says="no matrix"),
]


@pytest.mark.parametrize("case", SIZES, ids=[c.name for c in SIZES])
def test_size_limit(case: Case) -> None:
    check_case("size-limit", case)


def _granted_variants(publish_limit: int | None, variant_limit: int | None) -> dict[str, ResolvedVariant]:
    data = yaml.safe_load(MATRIX)
    if publish_limit is not None:
        data["publish"] = {"size_limit": publish_limit}
    if variant_limit is not None:
        data["variants"]["rocm"]["size_limit"] = variant_limit
    loaded = matrix_mod.loads(
        yaml.safe_dump(data), path=Path(MATRIX_FILE), backends_dir=ROOT / "packaging" / "backends"
    )
    return dict(make_plan(loaded).variants)


@pytest.mark.parametrize(
    ("publish_limit", "variant_limit", "status", "says"),
    [
        (None, None, "fail", "PyPI's default 100 MiB"),
        (400 << 20, None, "pass", "400 MiB a file the matrix grants xfer-engine-rocm"),
        (None, 400 << 20, "pass", "400 MiB a file the matrix grants xfer-engine-rocm"),
        (400 << 20, 200 << 20, "fail", "200 MiB a file the matrix grants xfer-engine-rocm"),
    ],
)
def test_size_limit_reads_the_matrix_grant(
    publish_limit: int | None, variant_limit: int | None, status: str, says: str
) -> None:
    facts = good_rocm()
    facts.size = 300 << 20
    rocm = _granted_variants(publish_limit, variant_limit)["rocm"]
    ctx = dataclasses.replace(context(facts), variant=rocm)
    result = apply("size-limit", ctx)
    assert (result.status, says in result.message) == (status, True), result.message


@pytest.mark.parametrize("bad", [0, -5])
def test_size_limit_must_be_positive(bad: int) -> None:
    with pytest.raises(MatrixError, match="size_limit"):
        _granted_variants(None, bad)
