"""The toolkit as users get it: a built wheel installed into a fresh environment, run outside
this repository, must carry everything it reads (backend data, schemas)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.integration.conftest import ROOT

pytestmark = pytest.mark.integration


def test_installed_toolkit_knows_every_backend_away_from_the_repository(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    env = {**os.environ, "PIP_CONFIG_FILE": "/dev/null"}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(dist), str(ROOT)], check=True, env=env, capture_output=True)
    (wheel,) = dist.glob("gpu_wheel_release-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for backend in ("cpu", "cuda", "rocm", "musa"):
        assert f"release/backends_data/{backend}.json" in names
    assert {"release/config/matrix.schema.json", "release/inspect/verify.schema.json"} <= names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True, env=env)

    project = tmp_path / "elsewhere"  # no packaging/ here, and not the repository
    project.mkdir()
    (project / "matrix.yaml").write_text(
        'schema_version: 1\nengine: {source: proj, import_name: kv}\npython: ["3.12"]\n'
        "platform: {floor: manylinux_2_28_x86_64}\n"
        "variants: {rocm: {distribution: kv-rocm, backend: rocm, exclude: ['libamdhip64.so*']}}\n",
        encoding="utf-8",
    )
    clean = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    plan = subprocess.run([str(python), "-m", "release", "plan"], cwd=project, capture_output=True, text=True,
                          env=clean, check=False)
    assert plan.returncode == 0, plan.stderr
    assert "cp312-rocm-manylinux_x86_64" in plan.stdout
    where = subprocess.run([str(python), "-c", "import release; print(release.__file__)"], cwd=project,
                           capture_output=True, text=True, env=clean, check=True)
    assert str(venv) in where.stdout, "the test must exercise the installed copy, not the source tree"
