"""`python -m release` and `nox` as real processes, the way a maintainer and CI run them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from release import settings
from release.config.matrix import load

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ("cpu", "cuda", "rocm", "musa")
PYTHONS = load(Path(__file__).resolve().parents[2] / "matrix.yaml").matrix.python  # 3.10-3.15, 3.14t, 3.15t


def run(*args: str, cwd: Path = ROOT, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, text=True, capture_output=True, timeout=timeout, check=False
    )


def test_plan_json_lists_twenty_five_steps_and_says_what_it_holds_back() -> None:
    proc = run("-m", "release", "plan", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert list(data) == ["include"]
    ids = {step["identifier"] for step in data["include"]}
    released = [v for v in VARIANTS if v != "musa"]  # matrix.yaml holds musa back
    assert len(data["include"]) == 5 * len(PYTHONS)  # cpu, cuda: 2 machines; rocm: x86_64
    machines = {"cpu": ("x86_64", "aarch64"), "cuda": ("x86_64", "aarch64"), "rocm": ("x86_64",)}
    assert ids == {
        f"cp{p.replace('.', '')}-{v}-manylinux_{m}" for v in released for p in PYTHONS for m in machines[v]
    }
    assert "held back (not released): musa (xfer-engine-musa): no MUSA Toolkit installer" in proc.stderr


def test_plan_select() -> None:
    proc = run("-m", "release", "--matrix", str(ROOT / "matrix.yaml"), "plan", "--select", "cp31{2,3}-rocm-*")
    assert proc.returncode == 0, proc.stderr
    assert "2 build steps" in proc.stdout


def test_nox_lists_sessions_generated_from_the_matrix() -> None:
    proc = run("-m", "nox", "-l", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sessions = set(re.findall(r"^[*-] (\S+)", proc.stdout, flags=re.MULTILINE))
    builds = {s for s in sessions if s.startswith("build_")}
    # per variant: one session for every Python at once, one per Python
    assert builds == {f"build_{v}-{p}" for v in VARIANTS for p in PYTHONS} | {f"build_{v}" for v in VARIANTS}
    assert len(builds) == len(VARIANTS) * (len(PYTHONS) + 1)
    assert {"plan", "tests", "lint", "verify", "publish"} <= sessions


def test_a_corrupted_matrix_exits_3_with_its_line(tmp_path: Path) -> None:
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    assert text.count("    backend: rocm\n") == 1
    bad = text.replace("    backend: rocm\n", "    backend: rcom\n")
    line = bad.splitlines().index("    backend: rcom") + 1
    path = tmp_path / "matrix.yaml"
    path.write_text(bad, encoding="utf-8")
    proc = run("-m", "release", "--matrix", str(path), "plan")
    assert proc.returncode == 3
    message = "variants.rocm.backend: unknown backend 'rcom'; did you mean 'rocm'?"
    assert f"matrix.yaml:{line}: {message}" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text("schema_version: 2\n", encoding="utf-8")
    quiet = run("-m", "release", "--matrix", str(path), "plan")
    loud = run("-m", "release", "--debug", "--matrix", str(path), "plan")
    assert quiet.returncode == loud.returncode == 3
    assert "Traceback" not in quiet.stderr
    assert "Traceback (most recent call last)" in loud.stderr
    assert "matrix.yaml:1: schema_version:" in loud.stderr


@pytest.mark.skipif(
    not settings.switch("RELEASE_CI_SETUP_RAN"), reason="the bytecode settings are .ci/run's (run it there)"
)
def test_under_ci_a_process_reuses_the_bytecode_the_last_one_compiled(tmp_path: Path) -> None:
    """.ci/run lets Python keep its bytecode (a machine's PYTHONDONTWRITEBYTECODE=1 made each of the
    run's Python processes compile every module it imported again) in one tree of its own: after a
    CLI process, the toolkit's modules are there, a second process reads them
    (it writes none again), and no __pycache__ appears beside the sources a build copies. The
    toolkit runs from a copy of release/ of its own, so that another test's process started from
    this checkout at the same moment cannot be taken for one of these."""
    prefix = os.environ.get("PYTHONPYCACHEPREFIX", "")
    assert prefix, "PYTHONPYCACHEPREFIX is not set"
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ, os.environ["PYTHONDONTWRITEBYTECODE"]
    assert not Path(prefix).resolve().is_relative_to(ROOT), f"{prefix} is inside the checkout"
    source = tmp_path / "src"
    shutil.copytree(ROOT / "release", source / "release", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(source)}

    def cli() -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "release", "--help"]
        return subprocess.run(
            argv, cwd=source, env=env, text=True, capture_output=True, timeout=120, check=False
        )

    assert cli().returncode == 0
    mirrored = Path(prefix + str(source / "release"))
    compiled = sorted(mirrored.glob("cli.*.pyc"))
    assert compiled, f"no compiled release/cli.py under {mirrored}"
    written = compiled[0].stat().st_mtime_ns
    assert cli().returncode == 0
    assert compiled[0].stat().st_mtime_ns == written, "the second process compiled release/cli.py again"
    assert list((source / "release").rglob("__pycache__")) == [], "a __pycache__ beside the sources"
