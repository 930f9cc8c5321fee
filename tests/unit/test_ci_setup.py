"""ci.yml's tests job installs what the integration fixtures need, by running the one entry point
every CI machine runs (.ci/run), so the workflow and our machines cannot drift apart."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import yaml

from release.config.checks import SUPPORTED_PYTHONS
from release.config.matrix import load
from release.plan.steps import make_plan

ROOT = Path(__file__).resolve().parents[2]
CI_RUN = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
BOOTSTRAP = (ROOT / "scripts" / "bootstrap.sh").read_text(encoding="utf-8")


def _tests_job() -> list[dict[str, Any]]:
    doc = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8"))
    steps = doc["jobs"]["tests"]["steps"]
    assert isinstance(steps, list)
    return steps


def _readme_block(marker: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"<!-- readme-test: {marker} -->\n```bash\n(.*?)```", text, re.DOTALL)
    assert match, f"README.md lacks its {marker} command"
    return match.group(1)


def _fixture_constant(name: str) -> object:
    tree = ast.parse((ROOT / "tests" / "integration" / "conftest.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    msg = f"tests/integration/conftest.py has no {name}"
    raise AssertionError(msg)


def test_the_tests_job_runs_ci_run_as_root() -> None:
    runs = [step.get("run", "") for step in _tests_job()]
    (entry,) = [r for r in runs if ".ci/run" in r]
    assert entry.startswith("sudo "), "apt, rootful podman and mount namespaces need root"
    assert "--preserve-env=CI" in entry, "CI=true makes a skipped test a failure"
    assert not [r for r in runs if "apt-get install" in r], "installs belong in .ci/run, not in ci.yml"
    free = next(i for i, r in enumerate(runs) if "free-disk" in r)
    assert free < runs.index(entry), "room for the toolchains first"


def test_ci_run_installs_podman_and_runs_the_readme_commands() -> None:
    assert 'readme_command setup' in CI_RUN and 'bash -euo pipefail -c "$setup"' in CI_RUN
    assert 'readme_command test' in CI_RUN and 'bash -euo pipefail -c "$tests"' in CI_RUN
    assert "bash scripts/setup-podman.sh" in CI_RUN
    assert "debootstrap" in CI_RUN
    assert _readme_block("setup").startswith("bash scripts/bootstrap.sh")
    assert "nox -s lint tests" in _readme_block("test")


def test_bootstrap_installs_ccache_the_fixtures_toolchains_and_the_matrix_pythons() -> None:
    apt = re.search(r"apt_install python3 ([^\n]*(?:\\\n[^\n]*)*)", BOOTSTRAP)
    assert apt
    for package in ("ccache", "cmake", "ninja-build", "build-essential", "python3-dev"):
        assert package in apt.group(1).split()
    # bootstrap installs the toolchains of the variants its matrix builds on the host (none here);
    # the fixtures' host builds (HOST_VARIANTS) get theirs from .ci/run's test set-up.
    assert "build_image.local_recipe is None" in BOOTSTRAP and "BOOTSTRAP_TOOLCHAINS-" not in BOOTSTRAP
    needed = {v for v in _fixture_constant("HOST_VARIANTS") if v != "cpu"}  # type: ignore[attr-defined]
    tests_phase = CI_RUN.split('phase "what only the integration tests need"', 1)[1].split("\nphase ", 1)[0]
    for backend in needed:
        assert f".venv/bin/release toolchain install {backend}\n" in tests_phase, backend


def test_no_variant_of_the_matrix_needs_a_host_toolchain() -> None:
    """The README's set-up installs no GPU toolchain: every GPU variant has its local build image
    (bootstrap's default list, computed the same way, is empty)."""
    plan = make_plan(load(ROOT / "matrix.yaml"))
    assert {s.variant.backend for s in plan.builds if s.variant.build_image.local_recipe is None} <= {"cpu"}
    assert 'load("matrix.yaml").matrix.python' in BOOTSTRAP
    assert "toolchain install python" in BOOTSTRAP


def test_the_matrix_lists_the_pythons_the_fixtures_build_for() -> None:
    """HOST_PYTHONS are the oldest and newest supported Pythons present: bootstrap installs the
    matrix's, so the matrix must list both."""
    pythons = set(load(ROOT / "matrix.yaml").matrix.python)
    assert {SUPPORTED_PYTHONS[0], SUPPORTED_PYTHONS[-1]} <= pythons
