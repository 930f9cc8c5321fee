"""The machine axis: `platform.architectures` declared once, narrowed by backend data (rocm and
musa have no aarch64 machines), expanded into Python x variant x architecture steps whose
identifiers follow cibuildwheel's, and carried into every stage through the step's variant."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from release import cli
from release.builder.cibw import cibuildwheel_options
from release.commands import build
from release.commands.plan import github_outputs, second_builds
from release.config import matrix
from release.config.backends import load_backends
from release.config.machines import MACHINES, floor_for, machine_of_elf, machine_of_tag
from release.errors import MatrixError, UsageError
from release.plan import steps as plan
from release.plan.machine import for_machine, machine_of
from release.plan.placement import place_steps
from release.publish import manifest, preflight
from release.publish.checked_set import candidates_of, step_of
from release.smoke import selection

ROOT = Path(__file__).resolve().parents[2]
MATRIX_FILE = ROOT / "matrix.yaml"
# matrix.yaml releases x86_64 and aarch64 (`floor:` a policy) and declares the Grace tiers; ONE is
# the one-machine matrix it was before (the floor's own machine), kept for the migration's tests.
FLOOR = "  floor: manylinux_2_28 "
ARCHES = "\n  architectures: [x86_64, aarch64]"
GRACE_LEGS = "    hardware: [gh200, gb200-pd]"
ONE = (
    (FLOOR, "  floor: manylinux_2_28_x86_64 "),
    (ARCHES, "\n  # architectures: [x86_64, aarch64]"),
    (GRACE_LEGS, "    # hardware: [gh200, gb200-pd]"),  # a Grace tier needs the aarch64 wheels
)


def _text(*edits: tuple[str, str]) -> str:
    text = MATRIX_FILE.read_text(encoding="utf-8")
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def _loaded(*edits: tuple[str, str]) -> matrix.LoadedMatrix:
    return matrix.loads(_text(*edits), path=MATRIX_FILE)


@pytest.fixture(scope="module")
def two() -> matrix.LoadedMatrix:
    return matrix.load(MATRIX_FILE)


def test_the_table_names_each_machine_in_every_world() -> None:
    assert machine_of_elf(62) is MACHINES["x86_64"] and machine_of_elf(183) is MACHINES["aarch64"]
    assert machine_of_elf(40) is None  # EM_ARM: not a machine the toolkit builds for
    assert MACHINES["aarch64"].debian == "arm64" and MACHINES["aarch64"].github_runner == "ubuntu-24.04-arm"
    assert machine_of_tag("manylinux_2_27_aarch64.manylinux_2_28_aarch64") == "aarch64"
    assert floor_for("manylinux_2_28", "aarch64") == "manylinux_2_28_aarch64"
    assert floor_for("manylinux_2_28_x86_64", "aarch64") == "manylinux_2_28_aarch64"


def test_the_old_floor_keeps_one_machine() -> None:
    loaded = _loaded(*ONE)
    assert loaded.matrix.platform.machines == ("x86_64",)
    built = plan.make_plan(loaded).builds
    assert {machine_of(s.variant) for s in built} == {"x86_64"}
    assert all(s.identifier.endswith("-manylinux_x86_64") for s in built)


def test_python_x_variant_x_architecture_narrowed_by_backend_data(two: matrix.LoadedMatrix) -> None:
    built = plan.make_plan(two).builds
    ids = [s.identifier for s in built]
    n = len(two.matrix.python)
    assert len(ids) == len(set(ids)) == n * 2 + n * 2 + n  # cpu and cuda on two machines, rocm on one
    assert "cp312-cuda-manylinux_aarch64" in ids and "cp312-cpu-manylinux_aarch64" in ids
    assert not [i for i in ids if i.startswith("cp") and "-rocm-" in i and i.endswith("aarch64")]
    assert two.backends["rocm"].machines == ("x86_64",) and two.backends["musa"].machines == ("x86_64",)
    step = next(s for s in built if s.identifier == "cp312-cuda-manylinux_aarch64")
    assert step.variant.floor == "manylinux_2_28_aarch64"
    assert step.to_json()["machine"] == "aarch64" and step.to_json()["runner"] == "ubuntu-24.04-arm"
    assert step.to_json()["platform"] == "manylinux_2_28_aarch64"
    plan_variant = plan.make_plan(two).variant("cuda")
    assert dict(plan_variant.floors) == {
        "x86_64": "manylinux_2_28_x86_64",
        "aarch64": "manylinux_2_28_aarch64",
    }


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("cp312-cuda-aarch64", ["cp312-cuda-manylinux_aarch64"]),
        ("cp312-cuda-manylinux_aarch64", ["cp312-cuda-manylinux_aarch64"]),
        ("cp31{2,3}-cpu-aarch64", ["cp312-cpu-manylinux_aarch64", "cp313-cpu-manylinux_aarch64"]),
        ("*-rocm-aarch64 cp310-rocm-x86_64", ["cp310-rocm-manylinux_x86_64"]),
    ],
)
def test_select_takes_the_short_form(two: matrix.LoadedMatrix, pattern: str, expected: list[str]) -> None:
    chosen = plan.select(plan.make_plan(two).builds, pattern)
    assert [s.identifier for s in chosen] == expected


def test_plan_command_selects_one_aarch64_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "engine").symlink_to(ROOT / "engine")
    path = tmp_path / "matrix.yaml"
    path.write_text(_text(), encoding="utf-8")
    assert cli.main(["--matrix", str(path), "plan", "--select", "cp312-cuda-aarch64", "--json"]) == 0
    (only,) = json.loads(capsys.readouterr().out)["include"]
    assert only["identifier"] == "cp312-cuda-manylinux_aarch64" and only["machine"] == "aarch64"


def test_a_floor_per_architecture(tmp_path: Path) -> None:
    loaded = _loaded((ARCHES, ARCHES + "\n  floors: {aarch64: manylinux_2_34_aarch64}"))
    built = plan.make_plan(loaded, variants=("cpu",)).builds
    assert {s.variant.floor for s in built} == {"manylinux_2_28_x86_64", "manylinux_2_34_aarch64"}
    assert {s.identifier.rsplit("-", 1)[1] for s in built} == {"manylinux_x86_64", "manylinux_aarch64"}


def test_a_one_machine_floor_with_two_architectures_is_a_located_migration_error() -> None:
    with pytest.raises(MatrixError) as info:
        _loaded((FLOOR, "  floor: manylinux_2_28_x86_64 "))
    (problem,) = info.value.problems
    assert problem.key == "platform.floor" and problem.line is not None
    assert "write `floor: manylinux_2_28`" in problem.message


def test_a_matrix_of_aarch64_alone_drops_no_variant_silently() -> None:
    with pytest.raises(MatrixError) as info:
        _loaded((ARCHES, "\n  architectures: [aarch64]"))
    keys = {p.key for p in info.value.problems}
    assert "variants.rocm.backend" in keys  # rocm has no aarch64 machines: said, not skipped


def test_cibuildwheel_builds_the_steps_machine(two: matrix.LoadedMatrix) -> None:
    built = plan.make_plan(two, variants=("cpu",)).builds
    arm = tuple(s for s in built if machine_of(s.variant) == "aarch64" and s.python == "3.12")
    options = cibuildwheel_options(arm)
    assert options["archs"] == "aarch64" and options["build"] == "cp312-manylinux_aarch64"
    assert "manylinux-aarch64-image" in options
    assert "--plat manylinux_2_28_aarch64" in options["repair-wheel-command"]
    mixed = "one machine at a time: the steps of cpu are for manylinux_2_28_aarch64, manylinux_2_28_x86_64"
    with pytest.raises(UsageError, match=mixed):
        cibuildwheel_options(tuple(s for s in built if s.python == "3.12"))


def test_cibuildwheel_still_refuses_two_variants(two: matrix.LoadedMatrix) -> None:
    built = plan.make_plan(two, variants=("cpu", "cuda")).builds
    x86 = tuple(s for s in built if machine_of(s.variant) == "x86_64" and s.python == "3.12")
    with pytest.raises(UsageError, match="one variant at a time"):
        cibuildwheel_options(x86)


def test_for_machine_refuses_a_machine_the_variant_lacks(two: matrix.LoadedMatrix) -> None:
    rocm = plan.make_plan(two).variant("rocm")
    with pytest.raises(UsageError, match="not released for aarch64"):
        for_machine(rocm, "aarch64")


def test_workflow_outputs_carry_the_runner_and_a_second_build_per_machine(two: matrix.LoadedMatrix) -> None:
    made = plan.make_plan(two)
    outputs = github_outputs(made, "release", tag="v0.1.0")
    runners = {(e["machine"], e["runner"]) for e in json.loads(outputs["build"])["include"]}
    assert runners == {("x86_64", "ubuntu-latest"), ("aarch64", "ubuntu-24.04-arm")}
    again = {(s.variant.name, machine_of(s.variant)) for s in second_builds(made)}
    assert again == {
        ("cpu", "x86_64"),
        ("cpu", "aarch64"),
        ("cuda", "x86_64"),
        ("cuda", "aarch64"),
        ("rocm", "x86_64"),
    }
    assert not [s for s in made.images if machine_of(s.build.variant) != "x86_64"]


def test_a_wheel_maps_to_its_machines_step(two: matrix.LoadedMatrix) -> None:
    built = plan.make_plan(two).builds
    arm = step_of("xfer_engine-0.1.0-cp312-cp312-manylinux_2_28_aarch64.whl", "cuda", built)
    x86 = step_of("xfer_engine-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl", "cuda", built)
    assert arm is not None and arm.identifier == "cp312-cuda-manylinux_aarch64"
    assert x86 is not None and x86.identifier == "cp312-cuda-manylinux_x86_64"


def test_the_set_verified_again_holds_each_wheel_to_its_machines_floor(
    two: matrix.LoadedMatrix, tmp_path: Path
) -> None:
    """release-checks verifies the checked set again: an aarch64 wheel is held to the aarch64 floor
    (its candidate names its step; the wheel's file name there found no step, and the x86_64 floor
    failed platform-floor on a rehearsal's aarch64 wheel)."""
    made = plan.make_plan(two)
    name = "xfer_engine_cpu-0.1.0-cp312-cp312-manylinux_2_28_aarch64.whl"
    step = step_of(name, "cpu", made.builds)
    assert step is not None
    entry = manifest.Entry(
        name=name, variant="cpu", distribution="xfer-engine-cpu", size=1, sha256="a" * 64,
        report_sha256="b" * 64, identifier=step.identifier,
    )  # fmt: skip
    (candidate,) = candidates_of([entry], [tmp_path / "cpu" / name])
    assert candidate.step == "cp312-cpu-manylinux_aarch64"
    assert preflight._variant_of(made, candidate).floor == "manylinux_2_28_aarch64"


def test_grace_hardware_tiers_test_the_cuda_aarch64_wheels() -> None:
    loaded = _loaded(
        (
            '    toolkit: "13.0"\n',
            '    toolkit: "13.0"\n    images: [vllm-cuda]\n',
        ),
        (
            "\nhardware:",
            '  vllm-cuda:\n    description: "A CUDA serving image."\n'
            '    container: "docker.io/vllm/vllm-openai:v0.11.0@sha256:' + "0" * 64 + '"\n'
            '    python: ["3.12"]\n\nhardware:',
        ),
    )
    smokes = {s.identifier: s for s in plan.make_plan(loaded, variants=("cuda",)).smokes}
    assert set(smokes) == {"cp312-cuda-vllm-cuda-gh200", "cp312-cuda-vllm-cuda-gb200-pd"}
    pair = smokes["cp312-cuda-vllm-cuda-gb200-pd"]
    assert pair.nodes == 2 and pair.to_json()["machine"] == "aarch64"
    assert pair.variant.floor == "manylinux_2_28_aarch64"


def test_a_grace_tier_on_an_x86_only_variant_is_located() -> None:
    with pytest.raises(MatrixError) as info:
        _loaded(
            ("    hardware: [mi300x, mi355x, mi350x-pd]", "    hardware: [mi300x, gh200]"),
        )
    (problem,) = info.value.problems
    assert problem.key == "variants.rocm.hardware[1]" and "runs aarch64 machines" in problem.message


def test_backend_machines_are_checked_where_they_are_written(tmp_path: Path) -> None:
    data = json.loads((ROOT / "packaging" / "backends" / "cpu.json").read_text(encoding="utf-8"))
    data["machines"] = ["x86_64", "arm64"]
    (tmp_path / "cpu.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    with pytest.raises(MatrixError) as info:
        load_backends(tmp_path)
    (problem,) = info.value.problems
    assert problem.key == "machines[1]" and "'arm64' is no machine architecture" in problem.message
    assert problem.line is not None


def _build_args(**given: object) -> argparse.Namespace:
    defaults: dict[str, object] = {"variant": None, "python": None, "select": None, "arch": "x86_64"}
    return argparse.Namespace(**{**defaults, **given})


def test_release_build_builds_this_machines_steps(
    two: matrix.LoadedMatrix, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build, "host_machine", lambda: "x86_64")
    chosen = build.chosen_steps(_build_args(), two)
    assert {machine_of(s.variant) for steps in chosen.values() for s in steps} == {"x86_64"}
    crossed = build.chosen_steps(_build_args(arch="aarch64", python=["3.12"]), two)  # cross-compiled here
    assert [s.identifier for s in crossed["cpu"]] == ["cp312-cpu-manylinux_aarch64"]
    assert crossed["cpu"][0].variant.build_image.local_recipe is not None  # the local image cross-compiles
    release_image = argparse.Namespace(arch="aarch64", release_image=True, image=None)
    with pytest.raises(UsageError, match=r"--arch aarch64: this machine is x86_64; .*ubuntu-24\.04-arm"):
        build._cross(release_image, crossed, place_steps((), None), Path("unused"), "0.1.0")
    monkeypatch.setattr(build, "host_machine", lambda: "aarch64")  # a Grace host, or GitHub's arm runner
    chosen = build.chosen_steps(_build_args(arch="aarch64", python=["3.12"]), two)
    assert {v: [s.identifier for s in steps] for v, steps in chosen.items()} == {
        "cpu": ["cp312-cpu-manylinux_aarch64"],
        "cuda": ["cp312-cuda-manylinux_aarch64"],
    }
    with pytest.raises(UsageError, match="no selected variant is released for it"):
        build.chosen_steps(_build_args(arch="aarch64", variant=["rocm"]), two)


def test_smoke_takes_this_machines_wheels(
    two: matrix.LoadedMatrix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for platform in ("manylinux_2_28_x86_64", "manylinux_2_28_aarch64"):
        (tmp_path / f"xfer_engine_cpu-0.1.0-cp312-cp312-{platform}.whl").write_bytes(b"")
    cpu = plan.make_plan(two).variant("cpu")
    monkeypatch.setattr(selection, "host_machine", lambda: "aarch64")
    assert [w.name for w in selection.wheels_for(tmp_path, cpu, "3.12")] == [
        "xfer_engine_cpu-0.1.0-cp312-cp312-manylinux_2_28_aarch64.whl"
    ]
    monkeypatch.setattr(selection, "host_machine", lambda: "x86_64")
    assert [w.name for w in selection.wheels_for(tmp_path, cpu, None)] == [
        "xfer_engine_cpu-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    ]


def test_a_variant_without_a_serving_image_runs_its_tiers_on_the_runner(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """matrix.yaml's Grace tiers test the cuda variant's aarch64 wheels, and the cuda variant
    declares no serving image with a container: each tier gets a runner leg (no container, the
    matrix's newest (GIL) Python, which hardware.yml sets up on the runner) of the aarch64 wheel; a
    variant whose images give legs (rocm) gets none."""
    loaded = matrix.load(MATRIX_FILE)
    made = plan.make_plan(loaded)
    legs = {s.identifier: s for s in made.smokes if s.image == plan.RUNNER}
    assert set(legs) == {"cp315-cuda-runner-gh200", "cp315-cuda-runner-gb200-pd"}
    pair = legs["cp315-cuda-runner-gb200-pd"].to_json()
    assert pair["container"] == "" and pair["machine"] == "aarch64" and pair["nodes"] == 2
    assert pair["runner"] == ["self-hosted", "linux", "arm64", "cuda", "gb200"]
    assert legs["cp315-cuda-runner-gh200"].variant.floor == "manylinux_2_28_aarch64"
    assert not [s for s in made.smokes if s.variant.name == "rocm" and s.image == plan.RUNNER]
    assert cli.main(["--matrix", str(MATRIX_FILE), "plan", "--smoke"]) == 0
    captured = capsys.readouterr()
    assert re.search(r"cp315-cuda-runner-gh200\s+\(the runner's own Python 3\.15\)", captured.out)
    assert "no hardware leg runs on it" not in captured.err
