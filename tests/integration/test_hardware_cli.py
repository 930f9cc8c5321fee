"""`release hardware` given bad input, as documented in docs/records/gpu-validation.md: each ends in one
line, bounded, without a traceback. No wheel is built: each case stops before the leg installs one
(tests/integration/test_hardware.py runs the legs themselves)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}  # this tree's toolkit, from any working directory


def hardware(*args: str, cwd: Path, matrix: bool = True) -> subprocess.CompletedProcess[str]:
    head = ["--matrix", str(ROOT / "matrix.yaml")] if matrix else []
    argv = [sys.executable, "-m", "release", *head, "hardware", "--variant", "cpu", "--local", *args]
    return subprocess.run(argv, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=120, check=False)


def assert_one_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, done.stderr
    assert done.stderr.rstrip().endswith(errors[0])
    return errors[0]


def test_decode_without_prefill_waits_as_long_as_wait_then_says_so_in_one_line(tmp_path: Path) -> None:
    address = tmp_path / "pd" / "master.json"  # the folder does not exist: it is made
    done = hardware("--role", "decode", "--address-file", str(address), "--wait", "2", cwd=tmp_path)
    line = assert_one_line(done, 7)
    assert f"no master address in {address} after 2s" in line and "--role prefill" in line
    assert address.parent.is_dir()
    assert (tmp_path / "pd" / "master.json.done").read_text(encoding="utf-8") == "failed\n"


def test_a_prefill_that_fails_publishes_why_and_decode_stops_at_once(tmp_path: Path) -> None:
    address = tmp_path / "pd" / "master.json"
    prefill = hardware(
        "--role", "prefill", "--wheel", "missing.whl", "--address-file", str(address), cwd=tmp_path
    )
    line = assert_one_line(prefill, 7)
    assert "missing.whl" in line
    published = json.loads(address.read_text(encoding="utf-8"))
    assert "missing.whl" in published["error"]
    # --wait far beyond what the test allows: decode must not wait at all.
    decode = hardware("--role", "decode", "--address-file", str(address), "--wait", "600", cwd=tmp_path)
    assert "prefill published no master: " in assert_one_line(decode, 7)


def test_an_address_file_whose_folder_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    done = hardware("--role", "prefill", "--address-file", str(blocker / "master.json"), cwd=tmp_path)
    line = assert_one_line(done, 2)
    assert f"cannot make its folder {blocker}" in line


def test_a_relative_address_file_is_the_invocation_directorys(tmp_path: Path) -> None:
    done = hardware("--role", "decode", "--address-file", "pd/master.json", "--wait", "1", cwd=tmp_path)
    assert f"no master address in {tmp_path / 'pd' / 'master.json'}" in assert_one_line(done, 7)


def test_without_a_matrix_anywhere_one_line_names_matrix(tmp_path: Path) -> None:
    folder = tmp_path / "wheels"
    folder.mkdir()
    done = hardware("--wheel", "x.whl", cwd=folder, matrix=False)
    line = assert_one_line(done, 2)
    assert f"no matrix.yaml in {folder} or any folder above it" in line and "--matrix PATH" in line


def test_from_the_wheels_own_folder_the_matrix_above_is_found(tmp_path: Path) -> None:
    """`--wheel NAME` from wheelhouse/cpu of a checkout: matrix.yaml two folders up is the matrix."""
    real = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    (tmp_path / "matrix.yaml").write_text(real, encoding="utf-8")
    folder = tmp_path / "wheelhouse" / "cpu"
    folder.mkdir(parents=True)
    done = hardware("--wheel", "x.whl", cwd=folder, matrix=False)
    assert f"matrix: {tmp_path / 'matrix.yaml'}" in done.stderr
    # The leg got as far as the wheel, resolved against the invocation directory.
    line = assert_one_line(done, 7)
    assert "no readable verify report" in line and str(folder / "x.whl.verify.json") in line
