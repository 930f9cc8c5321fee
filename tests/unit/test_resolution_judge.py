"""check-resolution's judgement of an install, from the installed wheel's own data."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from release.config import matrix as matrix_mod
from release.plan.steps import make_plan
from release.variants.resolution import Case, Installed, judge

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = make_plan(
    matrix_mod.loads((ROOT / "matrix.yaml").read_text(encoding="utf-8"), path=ROOT / "matrix.yaml")
).variants


def _case(expect: str | None, *, may_fail: bool = False) -> Case:
    return Case("per-name", "pip", "3.12", "xfer-engine-rocm", ("release",),
                VARIANTS[expect] if expect else None, may_fail=may_fail)  # fmt: skip


def _judge(case: Case, found: Installed | None, rc: int = 0) -> tuple[bool, str]:
    outcome = judge(case, rc=rc, output="ERROR: No matching distribution", found=found,
                    served=["release"], variants=VARIANTS)  # fmt: skip
    return outcome.ok, outcome.detail


def ours(name: str, runtimes: tuple[str, ...], label: str | None) -> Installed:
    """An engine wheel as its dist-info gives it back."""
    wheel = f"{name.replace('-', '_')}-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    return Installed(name, "0.1.0", runtimes, label, wheel, ("xfer",))


ROCM = ours("xfer-engine-rocm", ("libamdhip64.so.7",), None)
CUDA_UNDER_ROCM_NAME = ours("xfer-engine-rocm", ("libcudart.so.13",), None)


def test_the_right_build_passes_and_names_the_index() -> None:
    ok, detail = _judge(_case("rocm"), ROCM)
    assert ok and detail == "xfer-engine-rocm 0.1.0 (binds libamdhip64.so.7) from index release"


def test_a_cuda_build_under_the_rocm_name_fails() -> None:
    ok, detail = _judge(_case("rocm"), CUDA_UNDER_ROCM_NAME)
    assert not ok and "another backend's build" in detail and "variant cuda's build, not rocm" in detail


def test_a_null_variant_that_binds_cudart_is_no_variants_build() -> None:
    found = ours("xfer-engine", ("libcudart.so.13",), "null")
    ok, detail = _judge(_case("cpu"), found)
    assert not ok and "label and runtime disagree" in detail


def test_the_labelled_cuda_variant_passes() -> None:
    ok, _ = _judge(_case("cuda"), ours("xfer-engine", ("libcudart.so.13",), "cu130"))
    assert ok


def test_a_cuda_build_that_also_binds_the_driver_is_the_cuda_variants() -> None:
    # an engine calling the driver API NEEDs libcuda.so.1 (the driver's): still the cuda build
    found = ours("xfer-engine", ("libcuda.so.1", "libcudart.so.13"), "cu130")
    ok, _ = _judge(_case("cuda"), found)
    assert ok
    ok, detail = _judge(_case("rocm"), ours("xfer-engine-rocm", ("libcuda.so.1", "libcudart.so.13"), None))
    assert not ok and "variant cuda's build, not rocm" in detail


def test_a_visible_failure_passes_only_where_allowed() -> None:
    assert _judge(_case("rocm", may_fail=True), None, rc=1)[0]
    assert not _judge(_case("rocm"), None, rc=1)[0]


def test_an_install_that_must_fail_fails_when_it_installs() -> None:
    assert _judge(_case(None), None, rc=1) == (True, "refused, as it must: ERROR: No matching distribution")
    ok, detail = _judge(_case(None), ROCM)
    assert not ok and "must fail" in detail


def test_another_projects_wheel_under_our_name_is_a_held_name_not_the_cpu_build() -> None:
    """A pure-Python wheel of someone else's binds no GPU runtime, like the CPU build: its wheel
    name (the release-day name-owner rule) and its packages say whose it is."""
    theirs = Installed("xfer-engine-cpu", "9.0", (), None, "xfer_engine_cpu-9.0-py3-none-any.whl", ("tools",))
    ok, detail = _judge(_case("cpu"), theirs)
    assert not ok and detail.startswith("the name is held by another project: installed xfer-engine-cpu 9.0")
    assert "xfer_engine_cpu-9.0-py3-none-any.whl is not a CPython platform wheel" in detail
    platform = Installed("xfer-engine-cpu", "9.0", (), None,
                         "xfer_engine_cpu-9.0-cp312-cp312-manylinux_2_28_x86_64.whl", ("tools",))  # fmt: skip
    ok, detail = _judge(_case("cpu"), platform)
    assert not ok and "installs tools, not the xfer package" in detail
    assert _judge(_case("cpu"), ours("xfer-engine-cpu", (), None))[0]


def test_a_held_name_fails_even_where_the_install_gave_our_build() -> None:
    case = Case("held-name", "uv", "3.12", "xfer-engine-rocm", ("public", "release"), VARIANTS["rocm"],
                note="xfer_engine_rocm-9.0-py3-none-any.whl")  # fmt: skip
    ok, detail = _judge(case, ROCM)
    assert not ok and "held by another project on the index (xfer_engine_rocm-9.0-py3-none-any.whl)" in detail
    ok, detail = _judge(case, None, rc=1)
    assert not ok and "held by another project" in detail


def test_a_set_newer_than_this_host_resolves_for_its_platform(tmp_path: Path) -> None:
    """Wheels built in newer images than this host (manylinux_2_39 from Debian trixie, on Debian 12):
    pip and uv resolve as a machine of that platform; a set this host installs resolves as usual."""
    from release.smoke.placement import emulated_platform
    from release.variants.resolution import install_command

    newer = tmp_path / "xfer_engine_cpu-0.2.0-cp312-cp312-manylinux_2_99_x86_64.whl"
    older = tmp_path / "xfer_engine_cpu-0.2.0-cp312-cp312-manylinux_2_17_x86_64.whl"
    assert emulated_platform([older]) is None
    assert emulated_platform([older, newer]) == "manylinux_2_99_x86_64"
    urls = {"release": "http://127.0.0.1:1/simple/"}
    venv = tmp_path / "env"
    uv = install_command(Case("per-name", "uv", "3.12", "xfer-engine-cpu", ("release",), None), venv, urls,
                         "py", "manylinux_2_39_x86_64")  # fmt: skip
    assert uv[uv.index("--python-platform") + 1] == "x86_64-manylinux_2_39"
    pip = install_command(Case("per-name", "pip", "3.12", "xfer-engine-cpu", ("release",), None), venv, urls,
                          "py", "manylinux_2_39_x86_64")  # fmt: skip
    assert pip[pip.index("--platform") + 1] == "manylinux_2_39_x86_64"
    assert pip[pip.index("--target") + 1].endswith("site-packages")
    pip_case = Case("per-name", "pip", "3.12", "xfer-engine-cpu", ("release",), None)
    plain = install_command(pip_case, venv, urls, "py")
    assert "--platform" not in plain and "--target" not in plain


def test_another_machines_wheel_fails_a_case_of_one_machine() -> None:
    """Issue 48: x86_64 and aarch64 wheels under one name; an install resolved for aarch64 that
    gave the x86_64 wheel is a user on a Grace machine getting code it cannot run."""
    case = dataclasses.replace(_case("rocm"), machine="aarch64")
    ok, detail = _judge(case, ROCM)
    assert not ok
    assert detail == (
        "another machine's wheel: xfer_engine_rocm-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl from "
        "index release is for x86_64, not aarch64"
    )
    assert case.label == "pip install xfer-engine-rocm on aarch64"
    ok, _ = _judge(dataclasses.replace(case, machine="x86_64"), ROCM)
    assert ok
