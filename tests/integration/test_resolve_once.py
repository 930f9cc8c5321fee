"""A real `release build` resolves its variant exactly once: every later stage (staging, core
prebuild, wheel build, repair, verify) reads the facts its step carries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from release import cli
from release.config.matrix import LoadedMatrix
from release.plan import steps
from release.plan.resolve import ResolvedVariant
from tests.integration.conftest import ONE_PYTHON, write_host_matrix


def test_one_build_resolves_its_variant_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = write_host_matrix(tmp_path, pythons=[ONE_PYTHON], variants=["cpu", "rocm"])
    calls: list[str] = []
    real = steps.resolve_variant

    def counting(loaded: LoadedMatrix, name: str, **kw: object) -> ResolvedVariant:
        calls.append(name)
        return real(loaded, name, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(steps, "resolve_variant", counting)
    wheelhouse = tmp_path / "wheelhouse"
    argv = ["--matrix", str(matrix), "build", "--variant", "cpu", "--wheelhouse", str(wheelhouse)]
    assert cli.main(argv) == 0, capsys.readouterr()
    assert calls == ["cpu"], "the build resolved its variant once, and only its own"
    (report,) = wheelhouse.glob("cpu/*.verify.json")
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["variant"] == "cpu"
    assert {r["id"]: r["status"] for r in data["rules"]}["wheel-name"] == "pass"
