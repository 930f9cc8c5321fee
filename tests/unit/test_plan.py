"""Planning expands the matrix into build and smoke steps with selectable identifiers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from release import cli
from release.config import matrix
from release.errors import UsageError
from release.plan import steps as plan
from release.wheel.names import parse_platform_tag

ROOT = Path(__file__).resolve().parents[2]
MATRIX_FILE = ROOT / "matrix.yaml"
ALL_VARIANTS = ("cpu", "cuda", "rocm", "musa")
HELD_BACK = ("musa",)  # matrix.yaml holds musa back (no MUSA installer in CI)
VARIANTS = tuple(v for v in ALL_VARIANTS if v not in HELD_BACK)
TAGS = ("cp310", "cp311", "cp312", "cp313", "cp314", "cp315", "cp314t", "cp315t")  # matrix order
# matrix.yaml's machines per variant: cpu and cuda on both, rocm x86_64 by its backend's data
MACHINES = {"cpu": ("x86_64", "aarch64"), "cuda": ("x86_64", "aarch64"), "rocm": ("x86_64",)}


def ids_of(variants: tuple[str, ...] = VARIANTS, tags: tuple[str, ...] = TAGS) -> list[str]:
    """The identifiers in plan order: variant, then machine, then Python."""
    return [f"{t}-{v}-manylinux_{m}" for v in variants for m in MACHINES[v] for t in tags]


STEPS = len(ids_of())  # 40: 8 Pythons (3.14t and 3.15t among them) x (2 + 2 + 1)


@pytest.fixture(scope="module")
def loaded() -> matrix.LoadedMatrix:
    return matrix.load(MATRIX_FILE)


def _ids(steps: tuple[plan.BuildStep, ...] | tuple[plan.SmokeStep, ...]) -> list[str]:
    return [s.identifier for s in steps]


def test_forty_build_steps_and_the_held_back_variant(loaded: matrix.LoadedMatrix) -> None:
    steps = plan.make_plan(loaded).builds
    assert len(steps) == STEPS == 40
    assert set(plan.make_plan(loaded).held_back) == set(HELD_BACK)
    everything = plan.make_plan(loaded, include_held_back=True)
    assert len(everything.builds) == 48  # musa: x86_64 only, by its backend's data
    assert everything.held_back == {}
    assert _ids(steps) == ids_of()
    rocm312 = next(s for s in steps if s.identifier == "cp312-rocm-manylinux_x86_64")
    assert rocm312.to_json() == {
        "identifier": "cp312-rocm-manylinux_x86_64",
        "variant": "rocm",
        "python": "3.12",
        "python_tag": "cp312",
        "abi": "cp312",
        "free_threaded": False,
        "serves": ["3.12"],
        "backend": "rocm",
        "distribution": "xfer-engine-rocm",
        "platform": "manylinux_2_28_x86_64",
        "machine": "x86_64",
        "runner": "ubuntu-latest",
    }
    assert rocm312.variant.excludes == ("libamdhip64.so*", "libhsa-runtime64.so*")
    rocm314t = next(s for s in steps if s.identifier == "cp314t-rocm-manylinux_x86_64")
    assert rocm314t.to_json()["abi"] == "cp314t" and rocm314t.to_json()["free_threaded"] is True
    assert rocm314t.interpreter.wheel_tag("manylinux_2_28_x86_64") == "cp314-cp314t-manylinux_2_28_x86_64"


def test_platform_family_drops_the_glibc_version() -> None:
    assert parse_platform_tag("manylinux_2_28_x86_64").family_arch == "manylinux_x86_64"
    assert parse_platform_tag("musllinux_1_2_aarch64").family_arch == "musllinux_aarch64"
    assert plan.python_tag("3.13") == "cp313"


@pytest.mark.parametrize(
    ("patterns", "expected"),
    [
        ("cp312-*", ids_of(tags=("cp312",))),
        ("cp31{2,3}-rocm-*", ["cp312-rocm-manylinux_x86_64", "cp313-rocm-manylinux_x86_64"]),
        ("*-cpu-* cp310-cuda-*", [*ids_of(("cpu",)), *ids_of(("cuda",), ("cp310",))]),
        ("*-cpu-x86_64", ids_of(("cpu",))[:8]),
        (
            "cp314-*-x86_64",
            ["cp314-cpu-manylinux_x86_64", "cp314-cuda-manylinux_x86_64", "cp314-rocm-manylinux_x86_64"],
        ),
        ("cp314t-rocm-*", ["cp314t-rocm-manylinux_x86_64"]),
        ("cp310-cpu-manylinux_x86_64", ["cp310-cpu-manylinux_x86_64"]),
        ("cp3?[01]-rocm-*", ["cp310-rocm-manylinux_x86_64", "cp311-rocm-manylinux_x86_64"]),
    ],
)
def test_select(loaded: matrix.LoadedMatrix, patterns: str, expected: list[str]) -> None:
    assert _ids(plan.select(plan.make_plan(loaded).builds, patterns)) == expected


def test_select_nothing_keeps_every_step(loaded: matrix.LoadedMatrix) -> None:
    steps = plan.make_plan(loaded).builds
    assert plan.select(steps, None) == steps
    assert plan.select(steps, "") == steps


def test_a_pattern_matching_nothing_is_a_usage_error(loaded: matrix.LoadedMatrix) -> None:
    with pytest.raises(UsageError) as info:
        plan.select(plan.make_plan(loaded).builds, "cp39-*")
    message = str(info.value)
    assert "'cp39-*' matches no step" in message
    assert "identifiers look like cp310-cpu-manylinux_x86_64" in message
    assert info.value.exit_code == 2


def test_cli_select_matching_nothing_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--matrix", str(MATRIX_FILE), "plan", "--select", "cp27-*"]) == 2
    out, err = capsys.readouterr()
    assert "matches no step" in err
    assert "Traceback" not in out + err


def _json_plan(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert cli.main(["--matrix", str(MATRIX_FILE), "plan", "--json", *args]) == 0
    out = capsys.readouterr().out
    assert len(out.strip().splitlines()) == 1, "GitHub Actions reads the matrix from one line"
    data: dict[str, object] = json.loads(out)
    return data


def _assert_actions_matrix(data: dict[str, object]) -> list[dict[str, object]]:
    assert list(data) == ["include"]
    include = data["include"]
    assert isinstance(include, list)
    for entry in include:
        assert isinstance(entry, dict)
        for value in entry.values():
            if isinstance(value, list):
                assert all(isinstance(v, (str, int, bool)) for v in value)
            else:
                assert isinstance(value, (str, int, bool))
    return include


def test_json_plan_is_a_github_actions_matrix(capsys: pytest.CaptureFixture[str]) -> None:
    include = _assert_actions_matrix(_json_plan(capsys))
    assert len(include) == STEPS
    assert [e["identifier"] for e in include] == ids_of()
    assert {"variant", "python", "distribution", "backend"} <= set(include[0])


def test_json_plan_honours_select(capsys: pytest.CaptureFixture[str]) -> None:
    include = _assert_actions_matrix(_json_plan(capsys, "--select", "cp31{2,3}-rocm-*"))
    assert [(e["variant"], e["python"]) for e in include] == [("rocm", "3.12"), ("rocm", "3.13")]


def test_smoke_plan(loaded: matrix.LoadedMatrix, capsys: pytest.CaptureFixture[str]) -> None:
    steps = plan.make_plan(loaded).smokes
    # The images' own Pythons; SGLang's -mi30x image on the gfx942 tier only (gpu_architectures).
    expected = {("vllm-rocm", tier, "3.12") for tier in ("mi300x", "mi355x", "mi350x-pd")}
    expected.add(("sglang-rocm", "mi300x", "3.10"))
    # cuda declares no serving image: its Grace tiers get runner legs, the matrix's newest Python.
    expected |= {("runner", tier, "3.15") for tier in ("gh200", "gb200-pd")}
    assert {(s.image, s.hardware, s.python) for s in steps} == expected
    assert len(steps) == 6
    assert {s.variant.name for s in steps} == {"rocm", "cuda"}
    assert "cp312-rocm-vllm-rocm-mi355x" in _ids(steps)
    pd = next(s for s in steps if s.hardware == "mi350x-pd")
    assert pd.nodes == 2
    assert pd.runner == ("self-hosted", "linux", "x64", "rocm", "mi350x")

    include = _assert_actions_matrix(_json_plan(capsys, "--smoke"))
    assert {(e["image"], e["hardware"], e["python"]) for e in include} == expected
    assert all(isinstance(e["runner"], list) for e in include)


def test_plan_table_lists_every_step(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--matrix", str(MATRIX_FILE), "plan"]) == 0
    out = capsys.readouterr().out
    assert f"{STEPS} build steps from matrix.yaml" in out
    assert "cp312-cuda-manylinux_aarch64" in out
    assert "held back (not released): musa (xfer-engine-musa): no MUSA Toolkit installer" in out
    assert "cp312-rocm-manylinux_x86_64" in out
    assert cli.main(["--matrix", str(MATRIX_FILE), "plan", "--smoke"]) == 0
    assert "6 smoke jobs" in capsys.readouterr().out


NEW_VARIANT = """\
  xpu:
    distribution: xfer-engine-xpu
    backend: cpu
"""


def test_a_new_variant_adds_a_step_per_python(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = MATRIX_FILE.read_text(encoding="utf-8")
    assert text.count("\nimages:\n") == 1
    text = text.replace("\nimages:\n", "\n" + NEW_VARIANT + "\nimages:\n")
    copy = matrix.loads(text, path=MATRIX_FILE)
    steps = plan.make_plan(copy).builds
    assert len(steps) == STEPS + 2 * len(TAGS)  # a cpu-backend variant: both machines
    xpu = [f"{t}-xpu-manylinux_{m}" for m in MACHINES["cpu"] for t in TAGS]
    assert _ids(plan.select(steps, "*-xpu-*")) == xpu

    (tmp_path / "engine").symlink_to(ROOT / "engine")  # engine.source must hold the project
    path = tmp_path / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    assert cli.main(["--matrix", str(path), "plan", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["include"]) == STEPS + 2 * len(TAGS)


def test_the_python_list_drives_the_steps() -> None:
    text = MATRIX_FILE.read_text(encoding="utf-8")
    old = 'python: ["3.10", "3.11", "3.12", "3.13", "3.14", "3.15", "3.14t", "3.15t"]'
    assert text.count(old) == 1
    fewer = matrix.loads(text.replace(old, 'python: ["3.12"]'), path=MATRIX_FILE)
    assert _ids(plan.make_plan(fewer).builds) == ids_of(tags=("cp312",))


def test_stable_abi_gives_fewer_jobs_without_a_workflow_edit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`stable_abi: "3.12"`: the same `plan --json` the workflows read lists cp310, cp311, one
    cp312-abi3 job and the free-threaded cp314t and cp315t (which never load abi3) a variant (5, not
    8); a variant that turns it off keeps a job per Python."""
    text = MATRIX_FILE.read_text(encoding="utf-8")
    text = text.replace("source: engine", 'source: engine\n  stable_abi: "3.12"', 1)
    cpu = "    distribution: xfer-engine-cpu\n"
    text = text.replace(cpu, cpu + '    stable_abi: "off"\n', 1)
    (tmp_path / "engine").symlink_to(ROOT / "engine")  # engine.source must hold the project
    path = tmp_path / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    assert cli.main(["--matrix", str(path), "plan", "--json"]) == 0
    include = _assert_actions_matrix(json.loads(capsys.readouterr().out))
    by_variant: dict[object, list[object]] = {}
    for entry in include:
        by_variant.setdefault(entry["variant"], []).append(entry["identifier"])
    assert len(include) == 2 * len(TAGS) + 5 * 2 + 5  # cpu 8 a machine, cuda 5 a machine, rocm 5
    assert by_variant["cpu"] == ids_of(("cpu",))
    assert by_variant["rocm"] == [
        "cp310-rocm-manylinux_x86_64", "cp311-rocm-manylinux_x86_64", "cp312-abi3-rocm-manylinux_x86_64",
        "cp314t-rocm-manylinux_x86_64", "cp315t-rocm-manylinux_x86_64",
    ]  # fmt: skip
