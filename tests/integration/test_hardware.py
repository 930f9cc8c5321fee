"""`release hardware` in its three roles with the CPU wheel (host memory): the same commands a GPU
runner runs, here reporting the device selftest as a skip with its reason, never as a pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from release.machine.interpreters import find_interpreter

from .conftest import ONE_PYTHON, ROOT, toolkit, write_host_matrix

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cpu_release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(matrix, wheelhouse): one CPU wheel built here, against the real release floor."""
    directory = tmp_path_factory.mktemp("hardware")
    matrix = write_host_matrix(
        directory, floor="manylinux_2_28_x86_64", pythons=[ONE_PYTHON], variants=["cpu"]
    )
    wheelhouse = directory / "wheelhouse"
    toolkit(
        "--matrix", str(matrix), "build", "--variant", "cpu", "--wheelhouse", str(wheelhouse), timeout=600
    )
    return matrix, wheelhouse


def _leg(matrix: Path, wheelhouse: Path, *args: str) -> list[str]:
    python = find_interpreter(ONE_PYTHON)
    assert python is not None
    return [
        sys.executable,
        "-m",
        "release",
        "--matrix",
        str(matrix),
        "hardware",
        "--variant",
        "cpu",
        "--wheelhouse",
        str(wheelhouse),
        "--python",
        str(python),
        "--timeout",
        "60",
        "--json",
        *args,
    ]


def _selftest(record: dict) -> dict:
    return next(c for c in record["checks"] if c["step"].startswith("selftest"))


def test_a_release_leg_needs_a_releasable_report(cpu_release: tuple[Path, Path]) -> None:
    matrix, wheelhouse = cpu_release
    done = subprocess.run(
        _leg(matrix, wheelhouse), capture_output=True, text=True, timeout=120, check=False, cwd=ROOT
    )
    assert done.returncode == 7, done.stderr
    assert "platform-floor" in done.stderr and "a release leg needs a releasable report" in done.stderr


def test_single_leg_skips_the_device_selftest_with_its_reason(cpu_release: tuple[Path, Path]) -> None:
    matrix, wheelhouse = cpu_release
    done = subprocess.run(
        _leg(matrix, wheelhouse, "--local", "--bench", "16"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    steps = {c["step"]: c for c in record["checks"]}
    assert "platform-floor only" in steps["verify report"]["detail"]
    assert steps["xfer-master --version"]["status"] == "pass"
    selftest = _selftest(record)
    assert selftest["status"] == "skip" and "no GPU" in selftest["detail"]
    assert selftest["data"]["write"]["verified"] and selftest["data"]["read"]["verified"]
    assert steps["bench"]["data"]["memory"] == "host"
    assert steps["bench"]["status"] == "pass" and "goal ratio" in steps["bench"]["detail"]
    required = subprocess.run(
        _leg(matrix, wheelhouse, "--local", "--require-device"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert required.returncode == 7, required.stderr


def test_prefill_and_decode_exchange_the_master_through_a_file(
    cpu_release: tuple[Path, Path], tmp_path: Path
) -> None:
    matrix, wheelhouse = cpu_release
    address = tmp_path / "pd" / "master.json"  # as docs/records/gpu-validation.md: the folder is made
    prefill = subprocess.Popen(
        _leg(matrix, wheelhouse, "--local", "--role", "prefill", "--address-file", str(address)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=dict(os.environ),
    )
    try:
        decode = subprocess.run(
            _leg(matrix, wheelhouse, "--local", "--role", "decode", "--address-file", str(address)),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=ROOT,
        )
        out, err = prefill.communicate(timeout=120)
    finally:
        if prefill.poll() is None:
            prefill.kill()
            prefill.wait()
    assert decode.returncode == 0, decode.stderr
    assert prefill.returncode == 0, err
    served, read = _selftest(json.loads(out)), _selftest(json.loads(decode.stdout))
    assert served["status"] == read["status"] == "skip"
    assert served["data"]["master_started"] and served["data"]["served_until"] == "decode done"
    assert served["data"]["received"]["verified"]
    assert read["data"]["read"]["verified"] and read["data"]["write"]["verified"]
    assert read["data"]["read"]["sha256"] == served["data"]["served_sha256"]


def test_a_leg_from_the_wheels_own_folder_finds_the_matrix_above(cpu_release: tuple[Path, Path]) -> None:
    """`--wheel NAME` run in wheelhouse/cpu, no --matrix: the matrix.yaml above is the matrix and
    NAME is the invocation directory's file (as on the GPU machine of docs/records/gpu-validation.md)."""
    matrix, wheelhouse = cpu_release
    folder = wheelhouse / "cpu"
    (wheel,) = sorted(folder.glob("*.whl"))
    python = find_interpreter(ONE_PYTHON)
    assert python is not None
    done = subprocess.run(
        [sys.executable, "-m", "release", "hardware", "--variant", "cpu", "--local", "--wheel", wheel.name,
         "--python", str(python), "--timeout", "60", "--json"],
        capture_output=True, text=True, timeout=120, check=False, cwd=folder,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"matrix: {matrix}" in done.stderr
    record = json.loads(done.stdout)
    assert record["wheel"] == wheel.name and _selftest(record)["status"] == "skip"


def test_a_leg_from_an_index_verifies_the_downloaded_bytes_here(
    cpu_release: tuple[Path, Path], tmp_path: Path
) -> None:
    """A PEP 503 index (a file:// one here) carries no verify report: verify runs here, in
    release mode, on the exact bytes pip downloaded, and the leg judges that report."""
    matrix, wheelhouse = cpu_release
    wheel = next((wheelhouse / "cpu").glob("*.whl"))
    project = tmp_path / "simple" / "xfer-engine-cpu"
    project.mkdir(parents=True)
    (project / wheel.name).write_bytes(wheel.read_bytes())
    (project / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n', encoding="utf-8")
    python = find_interpreter(ONE_PYTHON)
    assert python is not None
    leg = [sys.executable, "-m", "release", "--matrix", str(matrix), "hardware", "--variant", "cpu",
           "--index", (tmp_path / "simple").as_uri() + "/", "--python", str(python), "--timeout", "120",
           "--json"]  # fmt: skip
    release = subprocess.run(leg, capture_output=True, text=True, timeout=300, check=False, cwd=ROOT)
    # This host's build meets manylinux_2_35, not the 2_28 floor: a release leg refuses it.
    assert release.returncode == 7, release.stderr
    assert "platform-floor" in release.stderr and "a release leg needs a releasable report" in release.stderr
    local = subprocess.run(
        [*leg, "--local"], capture_output=True, text=True, timeout=300, check=False, cwd=ROOT
    )
    assert local.returncode == 0, local.stderr
    record = json.loads(local.stdout)
    steps = {c["step"]: c for c in record["checks"]}
    assert "verify ran here on these bytes" in steps["wheel"]["detail"]
    assert "platform-floor only" in steps["verify report"]["detail"]
    assert _selftest(record)["status"] == "skip"
