"""`release ready` run the way ci.yml runs it: a real process in a checkout, with the declared
inputs set or not, exactly as the readiness job receives them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
REASON = "no MUSA Toolkit installer is available to this repository's CI (MUSA_INSTALLER is not set)"
HOLD = f'    held_back: "{REASON}"\n'


def ready_step() -> tuple[str, dict[str, str]]:
    """The readiness job's run script and the names of the inputs its env passes in."""
    ci = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8"))
    job = ci["jobs"]["ready"]
    (script,) = [s["run"] for s in job["steps"] if "release ready" in s.get("run", "")]
    return script, dict(job.get("env") or {})


def checkout(tmp_path: Path, *, hold_musa: bool, pin: bool = True, facts: bool = True) -> Path:
    """A copy of the repository's matrix.yaml beside the engine, backend data, workflows and
    (unless `facts` is false) the serving images' recorded facts."""
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    assert text.count(HOLD) == 1, "matrix.yaml holds musa back with this reason"
    if not hold_musa:
        text = text.replace(HOLD, "")
    if not pin:  # the repository pins its serving images; a tag-only copy of them
        text = re.sub(r"(/(?:vllm-openai-rocm|sglang):[^@\"]+)@sha256:[0-9a-f]{64}", r"\1", text)
    (tmp_path / "matrix.yaml").write_text(text, encoding="utf-8")
    for name in ("engine", "packaging", ".github", *(["images.facts.json"] if facts else [])):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


def run_ready(repo: Path, **inputs: str) -> subprocess.CompletedProcess[str]:
    script, declared = ready_step()
    assert "MUSA_INSTALLER" in declared
    env = {k: v for k, v in os.environ.items() if k not in declared and k != "GITHUB_REPOSITORY"}
    env.update(inputs)
    env["PYTHONPATH"] = str(ROOT)  # `python -m release` is this checkout's toolkit
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        ["bash", "-c", script], cwd=repo, env=env, text=True, capture_output=True, timeout=120, check=False
    )


def test_musa_without_its_installer_fails_naming_it(tmp_path: Path) -> None:
    proc = run_ready(checkout(tmp_path, hold_musa=False))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "error: a tag push would fail for configuration alone (1 to set):" in proc.stderr
    assert "MUSA_INSTALLER: set the repository variable (or secret) MUSA_INSTALLER" in proc.stderr
    assert "variant(s) musa cannot build without it" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_holding_musa_back_removes_that_line(tmp_path: Path) -> None:
    proc = run_ready(checkout(tmp_path, hold_musa=True))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "MUSA_INSTALLER" not in proc.stderr
    assert "held back" in proc.stdout and "xfer-engine-musa: no MUSA Toolkit installer" in proc.stdout
    assert "ready: nothing missing that this job can see" in proc.stdout


def test_the_set_variable_satisfies_it(tmp_path: Path) -> None:
    """ci.yml hands the job 'set' (never the value) when the variable or secret exists."""
    proc = run_ready(checkout(tmp_path, hold_musa=False), MUSA_INSTALLER="set")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (row,) = [line for line in proc.stdout.splitlines() if line.startswith("variable ")]
    assert row.split()[1:3] == ["MUSA_INSTALLER", "ok"]


def test_tag_only_serving_images_fail_with_their_lines(tmp_path: Path) -> None:
    proc = run_ready(checkout(tmp_path, hold_musa=True, pin=False))
    assert proc.returncode == 1
    assert "(2 to set)" in proc.stderr
    assert "images.vllm-rocm.container: 'docker.io/vllm/vllm-openai-rocm:v0.21.0' is a tag" in proc.stderr
    assert "pin it by digest" in proc.stderr


def test_pinned_images_without_recorded_facts_fail_naming_the_probe(tmp_path: Path) -> None:
    proc = run_ready(checkout(tmp_path, hold_musa=True, facts=False))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "(2 to set)" in proc.stderr
    for name in ("vllm-rocm", "sglang-rocm"):
        fix = f"images.facts.json: images.{name}: no recorded facts: run `release images probe --pull"
        assert fix in proc.stderr
    assert "Traceback" not in proc.stderr


def test_facts_of_another_digest_are_stale(tmp_path: Path) -> None:
    repo = checkout(tmp_path, hold_musa=True, facts=False)
    text = (ROOT / "images.facts.json").read_text(encoding="utf-8")
    old = "sha256:80d04638deb64fac000fa565cb46e5d2f692173dc125a32a956014a6383ecaee"
    assert text.count(old) == 2
    (repo / "images.facts.json").write_text(text.replace(old, "sha256:" + "1" * 64), encoding="utf-8")
    proc = run_ready(repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "(1 to set)" in proc.stderr
    assert f"images.sglang-rocm: facts recorded for sha256:{'1' * 64}, not the pinned digest" in proc.stderr
