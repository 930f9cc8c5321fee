"""Free-threaded CPython: smoke fails a t wheel whose import turns the GIL back on (unless the matrix
declares that the engine needs it), never judges under PYTHON_GIL, and a machine without a
free-threaded interpreter leaves its jobs to GitHub, said as such, never as passed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from release.config.matrix import load
from release.rehearse import runner, session
from release.smoke.gil import gil_probe, gil_verdict

ROOT = Path(__file__).resolve().parents[2]


def _line(before: bool, after: bool, python_gil: str | None = None) -> str:
    return "some log line\n" + json.dumps({"python_gil": python_gil, "before": before, "after": after})


@pytest.mark.parametrize(
    ("output", "needs_gil", "ok", "says"),
    [
        (_line(False, False), False, True, "is False after the import"),
        (_line(False, True), False, False, "turned the GIL back on"),
        (_line(False, True), True, True, "REPORTED: the import turns the GIL back on"),
        (_line(True, True), False, False, "GIL is on before the import"),
        (_line(True, True), True, False, "GIL is on before the import"),  # nothing judged: no pass
        (_line(False, False, "0"), False, False, "PYTHON_GIL=0 is set"),
        (_line(False, True, "1"), True, False, "PYTHON_GIL=1 is set"),
        ("", False, False, "printed no verdict"),
        ("Traceback ...\nImportError: boom", False, False, "printed no verdict"),
        ('{"before": "no", "after": false}', False, False, "printed no verdict"),
    ],
)
def test_the_gil_verdict(output: str, needs_gil: bool, ok: bool, says: str) -> None:
    verdict = gil_verdict(output, needs_gil=needs_gil)
    assert (verdict.ok, says in verdict.detail) == (ok, True), verdict.detail


def test_the_probe_reads_the_gil_before_and_after_the_import_and_sets_nothing() -> None:
    probe = gil_probe("xfer")
    assert probe.index("before = sys._is_gil_enabled()") < probe.index("import xfer") < probe.index("after =")
    assert "PYTHON_GIL" in probe and "environ[" not in probe and "putenv" not in probe
    compile(probe, "<probe>", "exec")


def test_no_smoke_environment_sets_python_gil() -> None:
    """The toolkit never sets PYTHON_GIL (it would decide the GIL for the module and hide the check)."""
    for path in sorted((ROOT / "release").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for line in text.splitlines():
            if "PYTHON_GIL" in line:
                assert path.name == "gil.py", f"{path.relative_to(ROOT)}: {line.strip()}"


def test_the_matrix_declares_an_engine_that_needs_the_gil(tmp_path: Path) -> None:
    loaded = load(ROOT / "matrix.yaml")
    assert loaded.matrix.engine.needs_gil is False  # the reference engine's t wheels keep it off
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    text = text.replace("  import_name: xfer ", "  needs_gil: true\n  import_name: xfer ", 1)
    text = text.replace("source: engine", f"source: {ROOT / 'engine'}", 1)
    path = tmp_path / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    from release.plan.steps import make_plan

    assert all(v.needs_gil for v in make_plan(load(path)).variants.values())


def test_the_rehearsal_leaves_free_threaded_pythons_to_github_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loaded = load(ROOT / "matrix.yaml")
    monkeypatch.setattr(session, "find_interpreter", lambda _p: None)
    said: list[str] = []
    kept, github = session._here(loaded, (), said.append)
    assert github == ["3.14t", "3.15t"] and "3.14t" not in kept and "3.15" in kept
    assert len(said) == 1 and said[0].startswith("GitHub-only: Python 3.14t, 3.15t")
    assert runner.GITHUB_ONLY not in ("success", "failure", "skipped")
    row = runner.Result("github-only", "every job of Python 3.14t", runner.GITHUB_ONLY)
    assert runner.failures([row]) == [] and "github-only" in runner.render([row])
    with pytest.raises(Exception, match="GitHub-only"):
        session._here(loaded, ("3.14t",), said.append)
    monkeypatch.setattr(session, "find_interpreter", lambda p: Path(f"/usr/bin/python{p}"))
    assert session._here(loaded, (), said.append) == ((), [])  # a machine with 3.14t runs them


def test_publish_tells_a_t_wheel_from_its_gil_twin(tmp_path: Path) -> None:
    """A cp314t step makes `cp314-cp314t` (PEP 425: the interpreter tag is the version's): release day
    finds each wheel for its own step, neither missing nor two for the cp314 step, and the checked
    set maps each wheel back to its step."""
    from release.publish.checked_set import step_of
    from release.publish.preflight import _step_key
    from release.publish.release_day import check_expected_files

    loaded = load(ROOT / "matrix.yaml")
    from release.plan.steps import make_plan

    plan = make_plan(loaded, variants=("cpu",))
    steps = [s for s in plan.builds if s.variant.floor.endswith("x86_64") and s.python in ("3.14", "3.14t")]
    gil, threaded = sorted(steps, key=lambda s: s.free_threaded)
    assert (gil.wheel_tags, threaded.wheel_tags) == (("cp314", "cp314"), ("cp314", "cp314t"))
    assert _step_key(threaded) == ("cp314", "cp314t", "x86_64")
    names = [(s, f"xfer_engine_cpu-0.1.0-{'-'.join(s.wheel_tags)}-manylinux_2_28_x86_64.whl") for s in steps]
    (tmp_path / "cpu").mkdir()
    for step, name in names:
        assert step_of(name, "cpu", plan.builds) is step
        (tmp_path / "cpu" / name).write_bytes(b"")
    check = check_expected_files(tuple(steps), tmp_path, "0.1.0", [gil.variant])
    wrong = ("missing", "wheels for build job", "not a wheel")
    assert not [p for p in check.problems if any(w in p for w in wrong)], check.problems
    assert check.notes == ["cpu: 2 of 2 wheel(s)"]


def test_the_rendered_release_yml_builds_and_smokes_t_wheels_with_the_gil_check() -> None:
    """release.yml's smoke job takes its matrix from the plan's build steps (3.14t and 3.15t among
    them), sets up `matrix.python` (actions/setup-python knows `3.14t`) and runs `release smoke
    --python`, whose free-threaded legs run the GIL check (`Smoke.check_gil`)."""
    import yaml

    from release.commands.plan import github_outputs
    from release.plan.steps import make_plan
    from release.smoke.runner import Smoke

    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8"))
    smoke_jobs = [
        job for job in flow["jobs"].values()
        if any("release smoke" in str(s.get("run", "")) and "--python" in str(s.get("run", ""))
               for s in job["steps"])
    ]  # fmt: skip
    job = next(j for j in smoke_jobs if "outputs.build" in str(j["strategy"]["matrix"]))
    assert any(s.get("with", {}).get("python-version") == "${{ matrix.python }}" for s in job["steps"])
    outputs = github_outputs(make_plan(load(ROOT / "matrix.yaml")), "release", tag="v0.1.0")
    built = json.loads(outputs["build"])["include"]
    assert {"3.14t", "3.15t"} <= {e["python"] for e in built}
    assert {e["abi"] for e in built if e["python"] == "3.14t"} == {"cp314t"}
    assert "check_gil" in Smoke.run.__code__.co_names
