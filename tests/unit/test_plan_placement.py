"""`release plan` shows where each build step runs and why (`release.plan.placement.place_steps`),
and `release build` prints the same lines from the same record before it carries it out. The host's
probes are stand-in functions (`Probes`): no toolkit, no interpreter and no container engine is
asked, and no process starts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from release import cli
from release.builder.host import WheelResult
from release.commands import build
from release.commands import plan as plan_command
from release.config.matrix import LoadedMatrix, load
from release.errors import ToolchainError
from release.plan.placement import (
    GITHUB_ONLY,
    NOT_PROBED,
    HostToolkit,
    Probes,
    StepPlacement,
    place_leg,
    place_steps,
)
from release.plan.resolve import ResolvedVariant
from release.plan.steps import BuildStep, make_plan
from tests.unit.test_build_command import args as build_args

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "matrix.yaml"
SETUP = "sudo scripts/setup-podman.sh"
ROCM_MISMATCH = "rocm: the matrix declares toolkit 7.2, this host has 5.2: install it with `x`"
FOUND = "rocm: the matrix declares toolkit 7.2, this host has 5.2"
MUSA_ABSENT = "MUSA toolkit not found: install it with `release toolchain install musa`"


@pytest.fixture(scope="module")
def loaded() -> LoadedMatrix:
    return load(MATRIX)


@pytest.fixture(scope="module")
def steps(loaded: LoadedMatrix) -> tuple[BuildStep, ...]:
    return make_plan(loaded, include_held_back=True).builds


def stand_in(
    *,
    engine: str | None = "podman",
    absent: tuple[str, ...] = ("rocm", "musa"),
    pythons: tuple[str, ...] = (),
    asked: list[str] | None = None,
    everywhere: bool = False,
) -> Probes[str]:
    """This host as a test says it is: the toolkits of `absent` are missing or not the declared one,
    `engine` answers (None: neither podman nor docker), the free-threaded `pythons` are here."""
    log = asked if asked is not None else []

    def toolkit(variant: ResolvedVariant) -> HostToolkit:
        log.append(f"toolkit {variant.name}")
        if variant.name == "rocm" and "rocm" in absent:
            return HostToolkit(ROCM_MISMATCH)
        if variant.name in absent:
            return HostToolkit(MUSA_ABSENT if variant.name == "musa" else f"{variant.name}: not found")
        return HostToolkit(None, found="no toolkit needed" if variant.name == "cpu" else "")

    def answering() -> str | None:
        log.append("engine")
        return engine

    return Probes(
        machine="x86_64",
        toolkit=toolkit,
        engine=answering,
        interpreter=lambda version: version in pythons,
        setup_podman=SETUP,
        everywhere=everywhere,
    )


def runs_by_step(placed: StepPlacement[str], steps: tuple[BuildStep, ...]) -> dict[str, str]:
    return {s.identifier: placed.runs(s) for s in steps}


def test_the_declared_toolkit_here_runs_on_the_host_and_asks_no_engine(steps: tuple[BuildStep, ...]) -> None:
    asked: list[str] = []
    cpu = tuple(s for s in steps if s.variant.name in {"cpu", "cuda"} and s.identifier.endswith("x86_64"))
    placed = place_steps(cpu, stand_in(absent=(), asked=asked))
    runs = runs_by_step(placed, cpu)
    assert runs["cp312-cpu-manylinux_x86_64"] == "host" and runs["cp312-cuda-manylinux_x86_64"] == "host"
    assert "engine" not in asked  # nothing needed an image: podman was never asked
    assert placed.lines()[:2] == [
        "cpu x86_64: host: no toolkit needed",
        "cuda x86_64: host: the declared toolkit is here",
    ]


def test_a_missing_toolkit_runs_in_the_local_image_through_the_engine_asked_once(
    steps: tuple[BuildStep, ...],
) -> None:
    asked: list[str] = []
    placed = place_steps(steps, stand_in(asked=asked))
    runs = runs_by_step(placed, steps)
    assert runs["cp312-rocm-manylinux_x86_64"] == "image localhost/xfer-build-rocm via podman"
    assert runs["cp312-cpu-manylinux_x86_64"] == "host"
    assert asked.count("engine") == 1  # rocm and the aarch64 cross builds share one answer
    rocm = next(line for line in placed.lines() if line.startswith("rocm x86_64: "))
    assert rocm == (
        "rocm x86_64: image localhost/xfer-build-rocm via podman: rocm: the matrix declares toolkit 7.2, "
        "this host has 5.2; building in the declared toolkit's local image localhost/xfer-build-rocm through "
        "podman (--allow-toolkit-mismatch builds on the host)"
    )


def test_no_engine_answering_is_not_here_naming_how_to_get_one(steps: tuple[BuildStep, ...]) -> None:
    placed = place_steps(steps, stand_in(engine=None))
    rocm = next(s for s in steps if s.identifier == "cp312-rocm-manylinux_x86_64")
    assert placed.runs(rocm) == "not here"
    assert placed.why(rocm).startswith(FOUND)
    assert placed.why(rocm).endswith(f"which needs podman or docker: `{SETUP}`")
    aarch64 = next(s for s in steps if s.identifier == "cp312-cpu-manylinux_aarch64")
    assert placed.runs(aarch64) == "not here" and placed.why(aarch64).endswith(f"`{SETUP}`")


def test_a_variant_without_an_image_recipe_is_not_here_with_its_toolkit_problem(
    steps: tuple[BuildStep, ...],
) -> None:
    musa = tuple(s for s in steps if s.variant.name == "musa")
    assert musa and musa[0].variant.build_image.local_recipe is None  # the matrix's musa has no recipe
    asked: list[str] = []
    placed = place_steps(musa, stand_in(asked=asked))
    assert set(runs_by_step(placed, musa).values()) == {"not here", "github-only"}
    assert placed.why(musa[0]) == MUSA_ABSENT
    assert f"musa x86_64: not here: {MUSA_ABSENT}" in placed.lines()
    assert "engine" not in asked  # no recipe: no image to run it in, so no engine to ask


def test_free_threaded_steps_this_machine_cannot_run_are_github_only(steps: tuple[BuildStep, ...]) -> None:
    placed = place_steps(steps, stand_in())
    t = next(s for s in steps if s.identifier == "cp314t-cpu-manylinux_x86_64")
    assert (placed.runs(t), placed.why(t)) == ("github-only", GITHUB_ONLY)
    assert placed.lines()[-1].startswith("GitHub-only: ")
    here = place_steps(steps, stand_in(pythons=("3.14t",)))  # a 3.14t found here: it runs like the rest
    assert here.runs(t) == "host"
    assert place_steps(steps, stand_in(everywhere=True)).github_only == ()  # GitHub's runners carry them


def test_another_machines_steps_are_cross_compiled_in_the_local_image(steps: tuple[BuildStep, ...]) -> None:
    placed = place_steps(steps, stand_in())
    arm = next(s for s in steps if s.identifier == "cp312-cpu-manylinux_aarch64")
    assert placed.runs(arm) == "cross in image localhost/xfer-build-cpu via podman"
    assert "`release build --arch aarch64`" in placed.why(arm)


def test_without_a_probe_nothing_is_guessed(steps: tuple[BuildStep, ...]) -> None:
    placed = place_steps(steps, None)
    assert set(runs_by_step(placed, steps).values()) == {"not probed"}
    assert placed.lines() == [NOT_PROBED] and not placed.probed


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert cli.main(["--matrix", str(MATRIX), *argv]) == 0
    return capsys.readouterr().out.splitlines()


def test_release_plan_prints_a_runs_column_and_a_why_per_variant(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(plan_command, "host_probes", stand_in)
    out = _main(["plan", "--select", "cp312-*"], capsys)
    assert out[0].split() == ["identifier", "distribution", "backend", "python", "platform", "floor", "runs"]
    rocm = next(line for line in out if line.startswith("cp312-rocm-manylinux_x86_64 "))
    assert rocm.endswith(" image localhost/xfer-build-rocm via podman")
    after = out[out.index("5 build steps from matrix.yaml") + 1 :]
    assert after[0] == "cpu x86_64: host: no toolkit needed"
    assert any(line.startswith("rocm x86_64: image localhost/xfer-build-rocm via podman: ") for line in after)
    include = json.loads(_main(["plan", "--select", "cp312-rocm-*", "--json"], capsys)[0])["include"]
    assert [(i["runs"], i["why"].split(";")[0]) for i in include] == [
        ("image localhost/xfer-build-rocm via podman", FOUND)
    ]


def test_release_plan_no_probe_says_not_probed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse() -> Probes[str]:
        raise AssertionError("--no-probe asked the host")

    monkeypatch.setattr(plan_command, "host_probes", refuse)
    out = _main(["plan", "--select", "cp312-*", "--no-probe"], capsys)
    assert all(line.endswith(" not probed") for line in out[2:7])
    assert NOT_PROBED in out


def test_release_build_prints_the_plans_lines_first_and_carries_them_out(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, loaded: LoadedMatrix
) -> None:
    """The same record: build's first lines are the lines `release plan` prints under its table,
    and each variant goes where they say (cpu on the host, rocm in its image, musa nowhere)."""
    probes = stand_in()
    monkeypatch.setattr(plan_command, "host_probes", lambda: probes)
    monkeypatch.setattr(build, "host_probes", lambda **_: probes)
    monkeypatch.setattr(build, "host_machine", lambda: "x86_64")
    monkeypatch.delenv("CI", raising=False)
    select = "*-{cpu,rocm}-manylinux_x86_64"
    planned = _main(["plan", "--select", select], capsys)
    why = planned[planned.index(next(line for line in planned if " build steps from " in line)) + 1 :]
    why = [line for line in why if not line.startswith(("held back", "awaiting"))]

    went: list[tuple[str, str]] = []

    def record(where: str) -> Callable[..., list[WheelResult]]:
        def built(*given: object, **_: object) -> list[WheelResult]:
            steps: tuple[BuildStep, ...] = next(g for g in given if isinstance(g, tuple))
            went.extend((where, s.identifier) for s in steps)
            return [
                WheelResult(
                    step=s, wheel=tmp_path / f"{s.identifier}.whl", verify_ok=True, verify_summary="pass",
                    seconds=1.0, size=1000, platform="manylinux_2_28_x86_64", floor_met=True,
                    runtime_bound=(), built_in=where,
                )
                for s in steps
            ]  # fmt: skip

        return built

    monkeypatch.setattr(build, "build_variant", record("host"))
    monkeypatch.setattr(build, "_in_container", record("image"))
    monkeypatch.setattr(build, "usable_interpreters", lambda pythons: (set(pythons), []))
    assert build.run(build_args(select=select, wheelhouse=tmp_path), loaded) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[: len(why)] == why and len(why) == 3  # cpu, rocm, the GitHub-only line
    assert {where for where, i in went if "-cpu-" in i} == {"host"}
    assert {where for where, i in went if "-rocm-" in i} == {"image"}
    assert not any(i.startswith(("cp314t", "cp315t")) for _, i in went)  # GitHub-only: not attempted


def test_release_build_of_a_variant_not_here_fails_with_the_plans_why(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], loaded: LoadedMatrix, tmp_path: Path
) -> None:
    probes = stand_in(engine=None)
    monkeypatch.setattr(build, "host_probes", lambda **_: probes)
    monkeypatch.setattr(build, "host_machine", lambda: "x86_64")
    chosen = build.chosen_steps(build_args(variant=["rocm"]), loaded)
    why = place_steps(chosen["rocm"], probes).of(chosen["rocm"][0]).why
    with pytest.raises(ToolchainError) as caught:
        build.run(build_args(variant=["rocm"], wheelhouse=tmp_path), loaded)
    assert str(caught.value) == why
    assert why not in capsys.readouterr().out  # said once, as the error (nox sessions: one line)


def test_a_hardware_leg_is_placed_here_in_its_image_or_emulated() -> None:
    """`release hardware` carries out `place_leg`; `release plan --smoke` shows the same value."""
    image = "docker.io/vllm/vllm-openai-rocm:v0.21.0"
    assert place_leg(image=None, machine="x86_64", host="x86_64").runs == "here"
    in_image = place_leg(image=image, machine="x86_64", host="x86_64")
    assert (in_image.where, in_image.runs, in_image.image) == ("image", "in the image", image)
    other = place_leg(image=image, machine="aarch64", host="x86_64")  # another machine's wheel
    assert (other.where, other.runs) == ("emulated", "emulated aarch64")


def test_release_plan_smoke_shows_where_each_leg_runs_here(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(plan_command, "host_machine", lambda: "x86_64")
    out = _main(["plan", "--smoke"], capsys)
    assert out[0].split()[-2:] == ["runs", "here"]
    grace = next(line for line in out if line.startswith("cp315-cuda-runner-gh200 "))
    assert grace.endswith(" emulated aarch64")  # a GH200 leg rehearsed on an x86_64 host
    mi300x = next(line for line in out if line.startswith("cp312-rocm-vllm-rocm-mi300x "))
    assert mi300x.endswith(" in the image")


def test_release_build_container_says_only_the_github_only_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, loaded: LoadedMatrix
) -> None:
    """`--container` asks for the image build by name: no host line that it would contradict."""
    monkeypatch.setattr(build, "host_probes", lambda **_: stand_in())
    monkeypatch.setattr(build, "host_machine", lambda: "x86_64")
    monkeypatch.setattr(build, "require_engine", lambda: "podman")
    monkeypatch.setattr(build, "_in_container", lambda *_a, **_k: [])
    select = "*-cpu-manylinux_x86_64"
    assert build.run(build_args(select=select, wheelhouse=tmp_path, container=True), loaded) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("GitHub-only: ") and not any(line.startswith("cpu x86_64:") for line in out)
