"""`release smoke` as a CI runner runs it: as a user that is not root.

A real unprivileged user (created here with useradd) runs the toolkit with `runuser`; the simulated
ROCm images must work through a user namespace, and with user namespaces switched off
(RELEASE_SMOKE_NO_USERNS=1) and no passwordless sudo the run must stop in one line naming both ways
out. The same user then meets a host runtime of another ROCm major than the matrix declares.

The user cannot reach root's pyenv interpreters (/root is private), so the toolkit runs from a venv
of the distribution's interpreter of this Python's minor version that sees the test environment's
packages and this tree through .pth files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from release.smoke.image import NO_USERNS_ENV, distribution_libdir

from .conftest import HOST_HIP, ROOT
from .test_smoke import FAKE_INIT, make_wheel

pytestmark = pytest.mark.integration

USER = "release-smoke-test"
MINOR = f"{sys.version_info[0]}.{sys.version_info[1]}"
SYSTEM_PYTHON = Path(f"/usr/bin/python{MINOR}")
HIP = distribution_libdir() / "libamdhip64.so.5"
IMAGES = ["rocm-distro", "rocm-opt-prefix", "rocm-ld-library-path", "rocm-absent"]

if os.geteuid() != 0:
    pytest.skip("creating the unprivileged test user needs root", allow_module_level=True)
if not SYSTEM_PYTHON.exists() or not HIP.exists() or not HOST_HIP:
    pytest.skip(f"needs {SYSTEM_PYTHON} and Debian's HIP runtime", allow_module_level=True)


@pytest.fixture(scope="module")
def user() -> Iterator[str]:
    created = subprocess.run(["id", "-u", USER], capture_output=True, check=False).returncode != 0
    if created:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER], check=True
        )
    yield USER
    if created:
        subprocess.run(["userdel", USER], check=False)


@pytest.fixture(scope="module")
def workspace(user: str) -> Iterator[Path]:
    """A directory the user owns, outside root's private /tmp/pytest-of-root."""
    path = Path(tempfile.mkdtemp(prefix="release-nonroot-"))
    path.chmod(0o755)
    venv = path / "toolkit"
    subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / f"python{MINOR}" / "site-packages"
    (site / "test-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (site / "0-tree.pth").write_text(f"{ROOT}\n")
    shutil.chown(path, user)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _matrix(directory: Path, user: str, *, toolkit: str) -> Path:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"].update(
        source=str(ROOT / "engine"),
        import_name="fakexfer",
        scripts=["fake-master"],
        smoke={"commands": [["fake-master", "--version"], ["{python}", "-m", "fakexfer", "selftest"]]},
    )
    data["python"] = [MINOR]
    for image in data["images"].values():
        image.pop("debian", None)  # simulations, never the local containers
    rocm = data["variants"]["rocm"]
    rocm.update(distribution="fake-engine-rocm", toolkit=toolkit)
    rocm.pop("build_image", None)
    data["variants"] = {"rocm": rocm}
    directory.mkdir()
    path = directory / "matrix.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    make_wheel(directory / "wheelhouse" / "rocm", dist="fake-engine-rocm", python=MINOR, init=FAKE_INIT)
    for item in [directory, *directory.rglob("*")]:
        shutil.chown(item, user)
    return path


def _smoke_as(user: str, workspace: Path, matrix: Path, **env: str) -> subprocess.CompletedProcess[str]:
    python = workspace / "toolkit" / "bin" / "python"
    argv = ["smoke", "--variant", "rocm", "--python", MINOR, "--json"]
    for image in IMAGES:
        argv += ["--image", image]
    environment = {"HOME": str(matrix.parent), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **env}
    assignments = [f"{k}={v}" for k, v in environment.items()]
    command = ["runuser", "-u", user, "--", "env", "-i", *assignments, str(python), "-m", "release"]
    return subprocess.run(
        [*command, "--matrix", str(matrix), *argv],
        capture_output=True,
        text=True,
        cwd=matrix.parent,
        timeout=900,
        check=False,
    )


def test_the_runner_user_is_really_unprivileged(user: str) -> None:
    argv = ["runuser", "-u", user, "--", "id", "-u"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert int(proc.stdout) != 0


def test_simulated_images_as_a_user_through_a_user_namespace(user: str, workspace: Path) -> None:
    matrix = _matrix(workspace / "userns", user, toolkit=HOST_HIP or "")
    proc = _smoke_as(user, workspace, matrix)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = {r["image"]: r for r in json.loads(proc.stdout)["results"]}
    assert sorted(results) == sorted(IMAGES)
    assert all(r["ok"] for r in results.values()), proc.stderr
    location = next(s for s in results["rocm-opt-prefix"]["steps"] if s["name"] == "runtime location")
    assert location["detail"] == "/opt/rocm-6.4.3/lib/libamdhip64.so.5.2.21153"
    assert not Path("/opt/rocm-6.4.3").exists(), "the simulation changed the host"


def test_without_user_namespaces_or_sudo_the_error_names_both_ways(user: str, workspace: Path) -> None:
    if shutil.which("sudo"):
        pytest.skip("sudo is installed here: the no-sudo failure mode cannot be shown")
    matrix = _matrix(workspace / "no-userns", user, toolkit=HOST_HIP or "")
    proc = _smoke_as(user, workspace, matrix, **{NO_USERNS_ENV: "1"})
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    error = [line for line in proc.stderr.splitlines() if "mount namespace" in line]
    assert len(error) == 1, proc.stderr
    assert f"switched off by {NO_USERNS_ENV}=1" in error[0]
    assert "sudo is not installed" in error[0]
    assert "kernel.unprivileged_userns_clone=1" in error[0]
    assert "kernel.apparmor_restrict_unprivileged_userns=0" in error[0]
    assert "passwordless sudo" in error[0]


def test_a_host_runtime_of_another_major_is_named_with_the_install_command(
    user: str, workspace: Path
) -> None:
    """The release matrix declares ROCm 6.4 (libamdhip64.so.6); this host has HIP 5.2 (.so.5)."""
    matrix = _matrix(workspace / "major", user, toolkit="6.4")
    proc = _smoke_as(user, workspace, matrix)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "libamdhip64.so.5" in proc.stderr
    assert "declares toolkit 6.4 (matrix.yaml:" in proc.stderr
    assert "binds libamdhip64.so.6" in proc.stderr
    assert "release toolchain install rocm 6.4 --runtime-only" in proc.stderr
