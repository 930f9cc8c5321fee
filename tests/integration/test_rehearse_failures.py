"""`release rehearse` where it must fail, and where: a broken before-all fails the build job and
the jobs after it are skipped; a smoke that needs root fails as the runner user; a too-low auditwheel
lower bound fails the build's verify. Each runs release.yml's jobs for real, as the real matrix's
rehearsal does (test_rehearse.py, on another xdist worker)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from .rehearsal import (
    NARROW,
    PYTHON,
    cpu,
    cpu_build_image,
    make_repo,
    matrix_data,
    need_podman,
    rehearse,
    table,
)

pytestmark = pytest.mark.integration
need_podman()


@pytest.mark.slow
def test_a_broken_before_all_fails_the_build_job_and_skips_the_rest(tmp_path: Path, work: Path) -> None:
    """A MUSA variant whose before-all (install-musa.sh with the declared toolkit) cannot install
    anything in the build image: the build job fails, as on GitHub, and publishing never starts."""
    data = matrix_data()["variants"]["musa"]
    data.pop("held_back")  # matrix.yaml holds musa back; here its build runs, as it would on GitHub
    # matrix.yaml's cpu build image (no toolkit in it): the before-all must install MUSA, and cannot.
    musa = {**data, "build_image": cpu_build_image()}
    repo = make_repo(tmp_path / "repo", {"musa": musa})
    proc = rehearse(repo, work, "--latest", *NARROW, store=False)  # about a build that fails
    assert proc.returncode != 0
    build = "build musa-x86_64"
    rows = table(proc.stdout)
    assert rows[build][1] == "failure"
    assert rows["publish to PyPI"][1] == "skipped"
    assert f"{build}: step 'Build in the manylinux image" in proc.stderr
    log = (work / "logs" / f"{build.replace(' ', '-')}.log").read_text(encoding="utf-8")
    assert "install-musa.sh" in log
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_smoke_that_needs_root_fails_as_the_runner_user(tmp_path: Path, work: Path) -> None:
    """The cpu wheel's clean-minbase image is a simulation (mount namespaces, chroot). As the runner
    user, with user namespaces switched off (RELEASE_SMOKE_NO_USERNS=1, as on a runner that
    restricts them) and no sudo, it cannot run: the smoke job fails, as it would on GitHub, and
    nothing is published."""
    data = matrix_data()
    minbase = {k: v for k, v in data["images"]["clean-minbase"].items() if k != "debian"}  # simulated
    images = {"clean-minbase": minbase}
    repo = make_repo(tmp_path / "repo", {"cpu": cpu(images=["clean-minbase"])}, images)
    proc = rehearse(repo, work, "--latest", "--env", "RELEASE_SMOKE_NO_USERNS=1", *NARROW)
    assert proc.returncode != 0
    rows = table(proc.stdout)
    smoke = f"smoke cp{PYTHON.replace('.', '')}-cpu-manylinux_x86_64"
    assert rows["build cpu-x86_64"][1] == "success"
    assert rows[smoke][1] == "failure"
    assert rows["publish to PyPI"][1] == "skipped"
    assert f"{smoke}: step 'Fresh venv, import, master binary" in proc.stderr
    log = (work / "logs" / f"{smoke.replace(' ', '-')}.log").read_text(encoding="utf-8")
    assert "root" in log


@pytest.mark.skipif(os.geteuid() != 0, reason="the local ROCm build image is made as root")
@pytest.mark.slow
def test_a_too_low_auditwheel_bound_fails_the_rehearsal(tmp_path: Path, work: Path) -> None:
    """auditwheel 6.1.0 takes `--exclude` literally (no wildcards): with the toolkit's lower bound
    at 6.1.0 the lowest-pins install repairs with it, the ROCm runtime is vendored, and verify's
    vendored-runtime rule fails the build job."""
    data = matrix_data()["variants"]["rocm"]
    # Debian 12's HIP 5.2 (auditwheel 6.1.0 knows no policy past manylinux_2_39, so a trixie image,
    # glibc 2.41, would be refused before the repair): Debian 12 meets manylinux_2_36, and the
    # repair takes that floor at once.
    recipe = {"suite": "bookworm", "gcc": "suite", "packages": ["libamdhip64-dev"]}
    rocm = {
        **data,
        "toolkit": "5.2",
        "images": [],
        "hardware": [],
        "build_image": {"local": "localhost/rehearse-build-rocm", "debian": recipe},
    }
    repo = make_repo(tmp_path / "repo", {"rocm": rocm}, pythons=[PYTHON], floor="manylinux_2_36_x86_64")
    pyproject = repo / "pyproject.toml"
    text = re.sub(r'"auditwheel>=[^"]*"', '"auditwheel>=6.1.0"', pyproject.read_text(encoding="utf-8"))
    pyproject.write_text(text, encoding="utf-8")
    proc = rehearse(repo, work, store=False)  # about building: it compiles, and fails
    assert proc.returncode != 0
    build = "build rocm-x86_64"
    assert table(proc.stdout)[build][1] == "failure"
    log = (work / "logs" / f"{build.replace(' ', '-')}.log").read_text(encoding="utf-8")
    assert "auditwheel==6.1.0" in (
        work / "jobs" / build.replace(" ", "-") / "files" / "lowest-pins.txt"
    ).read_text(encoding="utf-8")
    assert "vendored-runtime" in log
