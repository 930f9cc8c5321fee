"""The workflows against GitHub's schema, zizmor and bash; the cibuildwheel configuration against
cibuildwheel itself. All offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from release.builder import cibw
from release.config.matrix import LoadedMatrix, load
from release.plan.steps import make_plan

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
NAMES = ("release.yml", "ci.yml", "hardware.yml")


def tool(name: str) -> str:
    """A console script of the toolkit's environment (installed by `pip install .[test]`)."""
    found = shutil.which(name) or shutil.which(name, path=sysconfig.get_path("scripts"))
    if found is None:
        pytest.fail(f"{name} is not installed: pip install '.[test]'")
    return found


def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, text=True, capture_output=True, timeout=300, check=False, **kwargs)  # type: ignore[call-overload,no-any-return]


@pytest.fixture(scope="module")
def loaded() -> LoadedMatrix:
    return load(ROOT / "matrix.yaml")


@pytest.mark.parametrize("name", NAMES)
def test_workflow_matches_github_schema(name: str) -> None:
    proc = run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            "vendor.github-workflows",
            str(WORKFLOWS / name),
        ]
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_zizmor_finds_nothing_at_medium_or_above() -> None:
    proc = run([tool("zizmor"), "--offline", "--min-severity", "medium", "--no-progress", str(WORKFLOWS)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_zizmor_would_catch_an_unpinned_action(tmp_path: Path) -> None:
    text = (WORKFLOWS / "ci.yml").read_text(encoding="utf-8")
    pinned = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2"
    assert pinned in text
    bad = tmp_path / ".github" / "workflows" / "ci.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(text.replace(pinned, "actions/checkout@v4"), encoding="utf-8")
    proc = run([tool("zizmor"), "--offline", "--min-severity", "medium", "--no-progress", str(bad)])
    assert proc.returncode != 0
    assert "unpinned-uses" in proc.stdout + proc.stderr


def _scripts(name: str) -> list[tuple[str, str]]:
    doc = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    found = [(f"env.{key}", value) for key, value in doc.get("env", {}).items() if "\n" in str(value)]
    for job_name, job in doc["jobs"].items():
        for i, step in enumerate(job.get("steps", [])):
            if "run" in step:
                found.append((f"jobs.{job_name}.steps[{i}]", step["run"]))
    return found


@pytest.mark.parametrize("name", NAMES)
def test_run_scripts_are_valid_bash(name: str) -> None:
    for where, script in _scripts(name):
        proc = run(["bash", "-n"], input=script)
        assert proc.returncode == 0, f"{name}: {where}: {proc.stderr}"


def _identifiers(project: Path, env: dict[str, str], *extra: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CIBW_")}
    proc = run(
        [tool("cibuildwheel"), "--print-build-identifiers", "--platform", "linux", *extra, str(project)],
        cwd=project,
        env={**clean, **env},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.split()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "probe"\nversion = "0"\n', encoding="utf-8")
    return tmp_path


def test_cibuildwheel_builds_the_matrix_tags(project: Path, loaded: LoadedMatrix) -> None:
    """Env (as written to $GITHUB_ENV) and TOML (`--config-file`) select the matrix's cp tags, one
    machine per run: x86_64 for every variant, aarch64 (an ubuntu-24.04-arm job) for cpu and cuda."""
    plan = make_plan(loaded, include_held_back=True)
    runs = [(name, "x86_64") for name in loaded.matrix.variants] + [("cpu", "aarch64"), ("cuda", "aarch64")]
    for name, machine in runs:
        steps = plan.builds_of(name, machine)
        # cibuildwheel's own order (cp314t before cp315), the plan's by Python: the same set, no repeats
        expected = sorted(f"{s.python_tag}-manylinux_{machine}" for s in steps)
        assert len(expected) == len(loaded.matrix.python), (name, machine)
        assert sorted(_identifiers(project, cibw.cibuildwheel_env(steps))) == expected
        config = project / f"{name}-{machine}.toml"
        config.write_text(cibw.render(cibw.cibuildwheel_options(steps), "toml"), encoding="utf-8")
        assert sorted(_identifiers(project, {}, "--config-file", str(config))) == expected
    assert plan.builds_of("rocm", "aarch64") == ()  # its backend data: x86_64 machines only
    one = cibw.cibuildwheel_env(tuple(s for s in make_plan(loaded).builds_of("rocm") if s.python == "3.12"))
    assert _identifiers(project, one) == ["cp312-manylinux_x86_64"]


def test_cli_env_output_feeds_cibuildwheel(project: Path) -> None:
    """The exact text the build job appends to $GITHUB_ENV, parsed the way the runner does."""
    proc = run(
        [
            sys.executable,
            "-m",
            "release",
            "--matrix",
            str(ROOT / "matrix.yaml"),
            "cibuildwheel-config",
            "--variant",
            "cpu",
            "--python",
            "3.11",
            "--format",
            "env",
        ],
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    env = dict(line.split("=", 1) for line in proc.stdout.splitlines())
    assert _identifiers(project, env) == ["cp311-manylinux_x86_64"]
