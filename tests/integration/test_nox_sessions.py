"""The generated nox sessions end to end, as a maintainer runs them (inside nox's own venvs)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import HOST_FLOOR, HOST_PYTHONS, NEWEST, ROOT, tag, write_host_matrix

pytestmark = pytest.mark.integration


def nox(*args: str, matrix: Path, envdir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RELEASE_MATRIX": str(matrix), "CI": "true"}
    return subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "--envdir", str(envdir), *args],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=1200, check=False,
    )


@pytest.mark.slow
def test_build_then_smoke_sessions_for_one_python(tmp_path: Path) -> None:
    """`nox -s build_cpu-3.X` then `nox -s smoke_cpu-3.X`, including the minbase image: the
    session's venv is first on PATH, and the smoke must still seed its chroot with the base
    interpreter, not the venv's."""
    matrix = write_host_matrix(tmp_path / "m", pythons=HOST_PYTHONS, variants=["cpu"])
    built = nox("-s", f"build_cpu-{NEWEST}", matrix=matrix, envdir=tmp_path / "nox")
    assert built.returncode == 0, built.stdout + built.stderr
    wheels = sorted((matrix.parent / "wheelhouse" / "cpu").glob("*.whl"))
    cp = tag(NEWEST)
    assert [w.name for w in wheels] == [f"xfer_engine_cpu-0.1.0-{cp}-{cp}-{HOST_FLOOR}.whl"]
    assert Path(f"{wheels[0]}.verify.json").is_file()
    smoked = nox("-s", f"smoke_cpu-{NEWEST}", matrix=matrix, envdir=tmp_path / "nox")
    assert smoked.returncode == 0, smoked.stdout + smoked.stderr
    # image, runner, import, smoke: the minbase image ran in the namespace simulation and passed
    assert re.search(r"clean-minbase\s+namespace simulation\s+pass\s+pass", smoked.stdout), smoked.stdout
    assert "2/2 passed" in smoked.stdout


def test_missing_toolkit_session_stops_in_one_line(tmp_path: Path) -> None:
    matrix = write_host_matrix(tmp_path / "m", pythons=[NEWEST], variants=["musa"])
    env_clean = {k: v for k, v in os.environ.items() if not k.startswith("MUSA")}
    proc = subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "--envdir", str(tmp_path / "nox"),
         "-s", f"build_musa-{NEWEST}"],
        capture_output=True, text=True, env={**env_clean, "RELEASE_MATRIX": str(matrix), "CI": "true"},
        cwd=ROOT, timeout=300, check=False,
    )
    assert proc.returncode != 0
    ours = [line for line in (proc.stdout + proc.stderr).splitlines() if not line.startswith("nox >")]
    assert ours == [
        "error: Moore Threads MUSA toolkit not found (looked for include/musa_runtime_api.h in $MUSA_HOME, "
        "$MUSA_PATH, /usr/local/musa, /usr/local/musa-*): install it with `release toolchain install musa`"
    ]
