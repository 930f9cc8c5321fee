"""Preflight: the whole expected set, every problem at once, no process started."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from release.config import matrix as matrix_mod
from release.errors import PublishError
from release.plan.steps import Plan, make_plan
from release.publish.preflight import collect, preflight
from tests.integration.publish_support import (
    make_wheel,
    make_wheelhouse,
    wheel_name,
    write_matrix,
    write_report,
)


@pytest.fixture(autouse=True)
def no_abi3audit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny abi3 wheels keep to the limited API (abi3audit is a process; unit tests start none)."""
    monkeypatch.setattr("release.inspect.rules.abi.audit_limited_api", lambda *args: [])


def no_twine(paths: Sequence[Path]) -> list[str]:
    return []


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Plan, Path]:
    loaded = make_plan(matrix_mod.load(write_matrix(tmp_path)))
    return loaded, make_wheelhouse(tmp_path / "wheelhouse")


def test_complete_set_passes(setup: tuple[Plan, Path]) -> None:
    loaded, wheelhouse = setup
    found = preflight(loaded, wheelhouse, "0.1.0", checker=no_twine)
    assert [c.step for c in found] == [
        "cp310-cpu-manylinux_x86_64",
        "cp313-cpu-manylinux_x86_64",
        "cp310-rocm-manylinux_x86_64",
        "cp313-rocm-manylinux_x86_64",
    ]
    assert {c.project for c in found} == {"xfer-engine-cpu", "xfer-engine-rocm"}


def test_every_problem_is_reported_together(setup: tuple[Plan, Path]) -> None:
    loaded, wheelhouse = setup
    rocm313 = wheelhouse / "rocm" / wheel_name("xfer-engine-rocm", "0.1.0", "3.13")
    rocm313.unlink()  # its report stays behind, orphaned
    cpu310 = wheelhouse / "cpu" / wheel_name("xfer-engine-cpu", "0.1.0", "3.10")
    write_report(cpu310, "cpu", "xfer-engine-cpu", release=False)
    cpu313 = wheelhouse / "cpu" / wheel_name("xfer-engine-cpu", "0.1.0", "3.13")
    cpu313.write_bytes(cpu313.read_bytes() + b"\0")  # changed after verification
    (wheelhouse / "cpu" / "build.log").write_text("x")
    (wheelhouse / "stray.whl").write_text("x")
    extra = make_wheel(wheelhouse / "rocm", "xfer-engine-rocm", "0.1.0", "3.12")
    write_report(extra, "rocm", "xfer-engine-rocm")
    calls: list[list[Path]] = []

    def twine(paths: Sequence[Path]) -> list[str]:
        calls.append(list(paths))
        return ["twine check --strict failed: something"]

    with pytest.raises(PublishError) as info:
        preflight(loaded, wheelhouse, "0.1.0", checker=twine)
    text = str(info.value)
    assert "nothing was uploaded" in text
    for needle in (
        f"rocm/{rocm313.name}.verify.json: a verify report without its wheel",
        "rocm/: missing cp313-rocm-manylinux_x86_64 (Python 3.13): no "
        "xfer_engine_rocm-0.1.0-cp313-cp313-*_x86_64.whl",
        f"cpu/{cpu310.name}.verify.json: not a release-mode report",
        f"cpu/{cpu313.name}.verify.json: the report's sha256",
        "cpu/build.log: unknown file",
        "stray.whl: unexpected file outside the <variant>/ directories",
        f"rocm/{extra.name}: built for cp312-cp312 x86_64, which the matrix does not list",
        "twine check --strict failed",
    ):
        assert needle in text
    assert len(calls) == 1  # one twine call for all files
    assert len(calls[0]) == 4


def test_version_must_match_the_tag(setup: tuple[Plan, Path]) -> None:
    loaded, wheelhouse = setup
    _, problems = collect(loaded, wheelhouse, "0.2.0")
    assert sum("does not match the tag's version 0.2.0" in p for p in problems) == 4
    assert sum("missing" in p for p in problems) == 4


def test_renamed_wheel_is_caught_by_its_metadata(setup: tuple[Plan, Path]) -> None:
    loaded, wheelhouse = setup
    cpu = wheelhouse / "cpu" / wheel_name("xfer-engine-cpu", "0.1.0", "3.10")
    rocm = wheelhouse / "rocm" / wheel_name("xfer-engine-rocm", "0.1.0", "3.10")
    shutil.copy(cpu, rocm)
    write_report(rocm, "rocm", "xfer-engine-rocm")
    _, problems = collect(loaded, wheelhouse, "0.1.0")
    assert problems == [
        f"rocm/{rocm.name}: its METADATA says xfer-engine-cpu 0.1.0: the file was renamed",
        "rocm/: missing cp310-rocm-manylinux_x86_64 (Python 3.10): no "
        "xfer_engine_rocm-0.1.0-cp310-cp310-*_x86_64.whl",
    ]


def test_wheel_in_the_wrong_variant_directory(setup: tuple[Plan, Path]) -> None:
    loaded, wheelhouse = setup
    cpu = wheelhouse / "cpu" / wheel_name("xfer-engine-cpu", "0.1.0", "3.10")
    shutil.move(str(cpu), wheelhouse / "rocm" / cpu.name)
    _, problems = collect(loaded, wheelhouse, "0.1.0")
    assert any("distribution xfer-engine-cpu is not xfer-engine-rocm" in p for p in problems)
    assert any(p.startswith("cpu/: missing cp310-cpu") for p in problems)


def test_two_wheels_for_one_step(setup: tuple[Plan, Path]) -> None:
    loaded, wheelhouse = setup
    other = make_wheel(
        wheelhouse / "cpu", "xfer-engine-cpu", "0.1.0", "3.10", platform="manylinux_2_28_x86_64"
    )
    write_report(other, "cpu", "xfer-engine-cpu")
    _, problems = collect(loaded, wheelhouse, "0.1.0")
    assert len(problems) == 1
    assert "2 wheels for cp310-cpu-manylinux_x86_64" in problems[0]


def test_failed_verification_names_the_rules(setup: tuple[Plan, Path]) -> None:
    loaded, wheelhouse = setup
    wheel = wheelhouse / "rocm" / wheel_name("xfer-engine-rocm", "0.1.0", "3.10")
    write_report(wheel, "rocm", "xfer-engine-rocm", ok=False)
    _, problems = collect(loaded, wheelhouse, "0.1.0")
    assert problems == [
        f"rocm/{wheel.name}.verify.json: not releasable (failed or warned: vendored-runtime)"
    ]


def test_missing_wheelhouse(tmp_path: Path) -> None:
    loaded = make_plan(matrix_mod.load(write_matrix(tmp_path)))
    with pytest.raises(PublishError, match="no such directory"):
        preflight(loaded, tmp_path / "nowhere", "0.1.0", checker=no_twine)


def test_a_backfill_of_one_variant_expects_only_that_variant(
    setup: tuple[Plan, Path],
) -> None:
    loaded, wheelhouse = setup
    shutil.rmtree(wheelhouse / "cpu")  # the backfill run downloaded only the rocm artifacts
    with pytest.raises(PublishError, match="missing cp310-cpu-manylinux_x86_64"):
        preflight(loaded, wheelhouse, "0.1.0", checker=no_twine)
    found = preflight(loaded, wheelhouse, "0.1.0", checker=no_twine, variants=["rocm"])
    assert [c.step for c in found] == ["cp310-rocm-manylinux_x86_64", "cp313-rocm-manylinux_x86_64"]


# --- stable ABI: one abi3 wheel serves every Python from the floor on --------------------------

ABI3_PYTHONS = ("3.11", "3.12", "3.13")


@pytest.fixture
def abi3_setup(tmp_path: Path) -> tuple[Plan, Path]:
    """Variant cpu with stable_abi 3.12 (cp311 wheel + one cp312-abi3 wheel), rocm 'off' (a wheel
    per Python)."""
    path = write_matrix(tmp_path, pythons=ABI3_PYTHONS)
    text = path.read_text().replace("import_name: xfer\n", 'import_name: xfer\n  stable_abi: "3.12"\n')
    path.write_text(text.replace("backend: rocm", 'backend: rocm\n    stable_abi: "off"'))
    wheelhouse = tmp_path / "wheelhouse"
    for python, abi in (("3.11", None), ("3.12", "abi3")):
        make_wheel(wheelhouse / "cpu", "xfer-engine-cpu", "0.1.0", python, abi=abi)
    for python in ABI3_PYTHONS:
        make_wheel(wheelhouse / "rocm", "xfer-engine-rocm", "0.1.0", python)
    for wheel in sorted(wheelhouse.glob("*/*.whl")):  # verified as one release, once all are there
        write_report(wheel, wheel.parent.name, f"xfer-engine-{wheel.parent.name}")
    return make_plan(matrix_mod.load(path)), wheelhouse


def test_one_abi3_wheel_covers_every_python_it_serves(abi3_setup: tuple[Plan, Path]) -> None:
    plan, wheelhouse = abi3_setup
    found = preflight(plan, wheelhouse, "0.1.0", checker=no_twine)
    assert [(c.step, c.path.name.split("-")[2:4]) for c in found] == [
        ("cp311-cpu-manylinux_x86_64", ["cp311", "cp311"]),
        ("cp312-abi3-cpu-manylinux_x86_64", ["cp312", "abi3"]),
        ("cp311-rocm-manylinux_x86_64", ["cp311", "cp311"]),
        ("cp312-rocm-manylinux_x86_64", ["cp312", "cp312"]),
        ("cp313-rocm-manylinux_x86_64", ["cp313", "cp313"]),
    ]


def test_a_missing_abi3_wheel_is_reported(abi3_setup: tuple[Plan, Path]) -> None:
    plan, wheelhouse = abi3_setup
    abi3 = wheelhouse / "cpu" / wheel_name("xfer-engine-cpu", "0.1.0", "3.12", abi="abi3")
    abi3.unlink()
    abi3.with_name(abi3.name + ".verify.json").unlink()
    _, problems = collect(plan, wheelhouse, "0.1.0")
    assert problems == [
        "cpu/: missing cp312-abi3-cpu-manylinux_x86_64 (Python 3.12, 3.13): no "
        "xfer_engine_cpu-0.1.0-cp312-abi3-*_x86_64.whl"
    ]


@pytest.mark.parametrize("python", ["3.12", "3.13"])
def test_a_per_python_wheel_where_abi3_is_expected_is_reported(
    abi3_setup: tuple[Plan, Path], python: str
) -> None:
    plan, wheelhouse = abi3_setup
    stray = make_wheel(wheelhouse / "cpu", "xfer-engine-cpu", "0.1.0", python)
    write_report(stray, "cpu", "xfer-engine-cpu")
    _, problems = collect(plan, wheelhouse, "0.1.0")
    tag = "cp" + python.replace(".", "")
    assert problems == [
        f"cpu/{stray.name}: a {tag}-{tag} x86_64 wheel, but variant 'cpu' has stable_abi 3.12: one "
        "cp312-abi3 x86_64 wheel serves Python 3.12, 3.13 (remove this one)"
    ]


def test_a_stray_cp312_wheel_does_not_stand_in_for_the_abi3_one(abi3_setup: tuple[Plan, Path]) -> None:
    plan, wheelhouse = abi3_setup
    abi3 = wheelhouse / "cpu" / wheel_name("xfer-engine-cpu", "0.1.0", "3.12", abi="abi3")
    abi3.unlink()
    abi3.with_name(abi3.name + ".verify.json").unlink()
    stray = make_wheel(wheelhouse / "cpu", "xfer-engine-cpu", "0.1.0", "3.12")
    write_report(stray, "cpu", "xfer-engine-cpu")
    _, problems = collect(plan, wheelhouse, "0.1.0")
    assert len(problems) == 2, problems
    wrong = f"cpu/{stray.name}: a cp312-cp312 x86_64 wheel, but variant 'cpu' has stable_abi"
    assert problems[0].startswith(wrong)
    assert problems[1].startswith("cpu/: missing cp312-abi3-cpu-manylinux_x86_64")


@pytest.mark.parametrize(
    ("variant", "python", "says"),
    [
        ("rocm", "3.12", "variant 'rocm' expects a wheel per Python (stable_abi: off)"),
        ("cpu", "3.13", "variant 'cpu' expects cp312-abi3 x86_64 (stable_abi: 3.12)"),
    ],
)
def test_an_abi3_wheel_the_variant_does_not_expect_is_reported(
    abi3_setup: tuple[Plan, Path], variant: str, python: str, says: str
) -> None:
    plan, wheelhouse = abi3_setup
    dist = f"xfer-engine-{variant}"
    wheel = make_wheel(wheelhouse / variant, dist, "0.1.0", python, abi="abi3")
    write_report(wheel, variant, dist)
    _, problems = collect(plan, wheelhouse, "0.1.0")
    tag = "cp" + python.replace(".", "")
    assert problems == [f"{variant}/{wheel.name}: a {tag}-abi3 x86_64 wheel, but {says}"]


def test_the_set_is_python_x_variant_x_machine(tmp_path: Path) -> None:
    """With aarch64 in `platform.architectures`, the x86_64 wheels alone are not the set: each
    missing aarch64 wheel is named (rocm's backend has no aarch64 machines, so none is asked of it)."""
    path = write_matrix(tmp_path)
    text = path.read_text(encoding="utf-8")
    path.write_text(
        text.replace(
            "  floor: manylinux_2_34_x86_64", "  floor: manylinux_2_34\n  architectures: [x86_64, aarch64]"
        ),
        encoding="utf-8",
    )
    plan = make_plan(matrix_mod.load(path))
    _, problems = collect(plan, make_wheelhouse(tmp_path / "wheelhouse"), "0.1.0")
    assert problems == [
        f"cpu/: missing cp3{minor}-cpu-manylinux_aarch64 (Python 3.{minor}): no "
        f"xfer_engine_cpu-0.1.0-cp3{minor}-cp3{minor}-*_aarch64.whl"
        for minor in (10, 13)
    ]
