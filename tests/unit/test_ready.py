"""`release ready`: the outside inputs a tag push needs, from the data that declares them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from release import cli
from release.config.matrix import LoadedMatrix, load, loads
from release.plan.inputs import TITLE, declared_variables, environment, markdown, readiness
from release.plan.steps import make_plan

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "packaging" / "backends"
REASON = "no MUSA Toolkit installer is available to this repository's CI (MUSA_INSTALLER is not set)"
HOLD = f'    held_back: "{REASON}"\n'


def _copy(tmp_path: Path, *, hold: bool = True, pin: bool = True) -> Path:
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    text = text.replace("source: engine", f"source: {ROOT / 'engine'}", 1)
    if not hold:
        text = text.replace(HOLD, "")
    if not pin:  # the repository pins its serving images; a tag-only copy of them
        text = re.sub(r"(/(?:vllm-openai-rocm|sglang):[^@\"]+)@sha256:[0-9a-f]{64}", r"\1", text)
    path = tmp_path / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    facts = tmp_path / "images.facts.json"  # what the serving images hold, recorded beside the matrix
    if not facts.exists():
        facts.symlink_to(ROOT / "images.facts.json")
    return path


def _loaded(path: Path) -> LoadedMatrix:
    return loads(path.read_text(encoding="utf-8"), path=path, backends_dir=BACKENDS)


def _status(loaded: LoadedMatrix, environ: dict[str, str]) -> dict[tuple[str, str], str]:
    items = readiness(make_plan(loaded), environ=environ, repository="acme/xfer")
    return {(i.kind, i.name): i.status for i in items}


def test_the_declared_variables_are_the_backend_data() -> None:
    assert declared_variables(load(ROOT / "matrix.yaml").backends) == {"MUSA_INSTALLER": ("musa",)}


def test_a_planned_variant_needs_its_install_env(tmp_path: Path) -> None:
    loaded = _loaded(_copy(tmp_path, hold=False))
    assert _status(loaded, {})[("variable", "MUSA_INSTALLER")] == "missing"
    assert _status(loaded, {"MUSA_INSTALLER": "set"})[("variable", "MUSA_INSTALLER")] == "ok"
    assert _status(loaded, {"MUSA_INSTALLER": "  "})[("variable", "MUSA_INSTALLER")] == "missing"
    held = _loaded(_copy(tmp_path))
    status = _status(held, {})
    assert status[("variable", "MUSA_INSTALLER")] == "held back"
    assert status[("held back", "musa")] == "held back"


def test_checklist_items_name_environments_publishers_and_runners(tmp_path: Path) -> None:
    loaded = _loaded(_copy(tmp_path))
    items = readiness(make_plan(loaded), environ={}, repository="acme/xfer")
    status = {(i.kind, i.name): i.status for i in items}
    assert status[("environment", "pypi")] == status[("environment", "testpypi")] == "by hand"
    publishers = [i.detail for i in items if i.kind == "trusted publisher"]
    assert len(publishers) == 6  # three released distributions x two indexes
    assert (
        "https://pypi.org/manage/project/xfer-engine-rocm/settings/publishing/: owner acme, repository "
        "xfer, workflow release.yml, environment pypi"
    ) in publishers
    assert not [i for i in items if i.name == "xfer-engine-musa"]  # held back: no publisher, no name
    assert {n for k, n in status if k == "runner"} == {"mi300x", "mi355x", "mi350x-pd", "gh200", "gb200-pd"}
    assert environment(loaded.matrix, "0.2.0") == "pypi"
    assert environment(loaded.matrix, "0.2.0rc1") == "testpypi"


def test_tag_only_images_fail_and_pinned_ones_pass(tmp_path: Path) -> None:
    pinned = _status(_loaded(_copy(tmp_path)), {})
    awaiting = ["awaiting"] * 4  # the `pin: probe` tags no probe has recorded a digest for: not blocking
    assert [s for (k, _), s in pinned.items() if k == "image"] == ["ok", "ok", *awaiting]
    tags = _status(_loaded(_copy(tmp_path, pin=False)), {})
    assert [s for (k, _), s in tags.items() if k == "image"] == ["fail", "fail", *awaiting]


def test_a_workflow_that_does_not_pass_a_needed_variable_fails(tmp_path: Path) -> None:
    loaded = _loaded(_copy(tmp_path, hold=False))
    workflow = tmp_path / "release.yml"
    text = (ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8")
    workflow.write_text(text, encoding="utf-8")
    environ = {"MUSA_INSTALLER": "set"}
    items = readiness(make_plan(loaded), environ=environ, repository=None, workflow=workflow)
    assert not [i for i in items if i.kind == "workflow"]
    line = "      MUSA_INSTALLER: ${{ vars.MUSA_INSTALLER || secrets.MUSA_INSTALLER }}\n"
    assert text.count(line) == 3  # build, second-build, smoke
    workflow.write_text(text.replace(line, "", 1), encoding="utf-8")
    items = readiness(make_plan(loaded), environ=environ, repository=None, workflow=workflow)
    (item,) = [i for i in items if i.kind == "workflow"]
    assert item.status == "fail"
    assert item.fix.startswith("release.yml: jobs.build.env lacks `MUSA_INSTALLER: ${{ vars.MUSA_INSTALLER")


def test_the_command_exits_1_naming_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MUSA_INSTALLER", raising=False)
    path = _copy(tmp_path, hold=False)
    assert cli.main(["--matrix", str(path), "ready"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: a tag push would fail for configuration alone (1 to set):\n")
    assert err.splitlines()[1].startswith("  MUSA_INSTALLER: set the repository variable (or secret)")
    assert cli.main(["--matrix", str(_copy(tmp_path)), "ready"]) == 0
    assert "ready: nothing missing that this job can see" in capsys.readouterr().out


def test_the_readme_section_is_the_generated_one(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/release-builds.md's "Before your first tag" is exactly `release ready --markdown`."""
    assert cli.main(["--matrix", str(ROOT / "matrix.yaml"), "ready", "--markdown"]) == 0
    generated = capsys.readouterr().out
    assert generated == markdown(make_plan(load(ROOT / "matrix.yaml")))
    assert generated.startswith(f"### {TITLE}\n")
    guide = (ROOT / "docs" / "release-builds.md").read_text(encoding="utf-8")
    assert generated in guide, "regenerate the section: python -m release ready --markdown"
