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
