"""`release publish --variant-wheels`: the PEP 825 set and its `-variants.json` uploaded to a
self-hosted index on 127.0.0.1 (legacy upload API), idempotently, then installed from it by uv;
PyPI is refused in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from release.machine.interpreters import find_interpreter
from release.variants.resolution import uv_binary
from tests.integration.variant_release import UploadIndex, make_release

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def toolkit(matrix: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TWINE_USERNAME": "maintainer", "TWINE_PASSWORD": "secret-password"}
    return subprocess.run(
        [sys.executable, "-m", "release", "--matrix", str(matrix), *args],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=600, env=env,
    )  # fmt: skip


def _uv_install(index_url: str, tmp: Path, **env: str) -> str:
    uv = uv_binary()
    python = find_interpreter("3.12")
    if uv is None or python is None:
        pytest.fail("uv and Python 3.12 are needed")
    venv = tmp / f"venv-{len(list(tmp.glob('venv-*')))}"
    subprocess.run([uv, "venv", "-q", "--python", str(python), str(venv)], check=True)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "NV_VARIANT"))}
    subprocess.run(
        [uv, "pip", "install", "--preview", "--no-cache", "--python", str(venv / "bin" / "python"),
         "--index-url", index_url, "xfer-engine"],
        check=True, env={**clean, "UV_NO_CONFIG": "1", **env}, capture_output=True,
    )  # fmt: skip
    info = next(venv.glob("lib/python3.12/site-packages/xfer_engine-0.1.0.dist-info"))
    return (info / "variant.json").read_text()


def test_the_variant_set_is_uploaded_once_and_installs_from_the_index(tmp_path: Path) -> None:
    matrix, _wheelhouse = make_release(tmp_path, ("3.12",))
    assert toolkit(matrix, "variants", "--quiet").returncode == 0
    out = tmp_path / "wheelhouse-variants"
    with UploadIndex(tmp_path / "index") as server:
        args = ("publish", "--variant-wheels", str(out), "--tag", "v0.1.0",
                "--repository", server.url, "--index-url", server.url)  # fmt: skip
        first = toolkit(matrix, *args)
        assert first.returncode == 0, first.stdout + first.stderr
        assert first.stdout.count("     uploaded") == 4, first.stdout
        # -variants.json last: an installer never reads it before its wheels are there.
        assert server.uploads[-1] == "xfer_engine-0.1.0-variants.json"
        again = toolkit(matrix, *args)
        assert again.returncode == 0, again.stdout + again.stderr
        assert again.stdout.count("already there  ") == 4 and len(server.uploads) == 4
        assert "secret-password" not in first.stdout + first.stderr
        assert '"null"' in _uv_install(server.url, tmp_path)
        forced = _uv_install(server.url, tmp_path, NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION="13.0")
        assert '"cu130"' in forced


def test_pypi_is_refused_in_one_line(tmp_path: Path) -> None:
    matrix, _wheelhouse = make_release(tmp_path, ("3.12",))
    assert toolkit(matrix, "variants", "--quiet").returncode == 0
    out = tmp_path / "wheelhouse-variants"
    refused = toolkit(matrix, "publish", "--variant-wheels", str(out), "--tag", "v0.1.0")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "upload.pypi.org rejects PEP 825 variant wheel file names" in lines[0]
