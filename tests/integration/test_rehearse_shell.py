"""The rehearsal runs a run: step with the shell GitHub would: `bash -e {0}` where the workflow sets
none (so `cmd | tee` passes when cmd fails, as on GitHub), `bash -eo pipefail` under
`defaults.run.shell: bash`. Runs bash for real (as this user; no podman needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from release.rehearse import expressions, workflow
from release.rehearse.services import current_user
from release.rehearse.steps import Instance, Setup, StepFailed, run_script, run_step

pytestmark = pytest.mark.integration

FLOW = """
name: piped
on: push
{defaults}
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - name: cibuildwheel configuration
        run: python -m release cibuildwheel-config --variant nope --format env | tee -a "$GITHUB_ENV"
"""
PIPEFAIL = "defaults:\n  run:\n    shell: bash"


def _instance(tmp_path: Path) -> Instance:
    user = current_user()
    setup = Setup(
        repo=tmp_path, work=tmp_path / "work", artifacts=tmp_path / "artifacts", toolcache=tmp_path / "tc",
        user=user, lowest=False, index_url="http://127.0.0.1:9/", gh_dir=tmp_path / "gh",
        container_host=None, log=lambda _line: None,
    )  # fmt: skip
    instance = Instance(setup=setup, slug="build", user=user, contexts={"env": {}}, env={})
    instance.path.insert(0, str(Path(sys.executable).parent))  # python -m release: the toolkit
    instance.workspace.mkdir(parents=True)  # no matrix.yaml there: cibuildwheel-config exits 3
    return instance


def _step(defaults: str) -> workflow.Step:
    return workflow.parse(FLOW.format(defaults=defaults), Path("piped.yml")).jobs["build"].steps[0]


def test_a_failing_command_piped_into_tee_passes_without_a_default_shell_as_on_github(tmp_path: Path) -> None:
    instance = _instance(tmp_path)
    step = _step("")
    assert step.shell is None
    run_step(instance, step, expressions.Status())  # green, as GitHub's `bash -e {0}` is
    run_script(instance, "false | tee x", instance.full_env({}), shell=step.shell)
    assert (instance.workspace / "x").exists()


def test_the_same_step_fails_under_defaults_run_shell_bash(tmp_path: Path) -> None:
    instance = _instance(tmp_path)
    step = _step(PIPEFAIL)
    assert step.shell == "bash"
    with pytest.raises(StepFailed, match="exit 3"):
        run_step(instance, step, expressions.Status())
    with pytest.raises(StepFailed, match="exit 1"):
        run_script(instance, "false | tee x", instance.full_env({}), shell=step.shell)
    log = (instance.home / "job.log").read_text(encoding="utf-8")
    assert "matrix.yaml" in log  # the command's own error reached the job log
