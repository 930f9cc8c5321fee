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

from release.smoke.image import distribution_libdir
from release.smoke.namespace import NO_USERNS_ENV

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
    assert location["detail"] == "/opt/rocm-7.2.4/lib/libamdhip64.so.5.2.21153"
    assert not Path("/opt/rocm-7.2.4").exists(), "the simulation changed the host"


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
    """The release matrix declares ROCm 7.2 (libamdhip64.so.7); this host has HIP 5.2 (.so.5)."""
    matrix = _matrix(workspace / "major", user, toolkit="7.2")
    proc = _smoke_as(user, workspace, matrix)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "libamdhip64.so.5" in proc.stderr
    assert "declares toolkit 7.2 (matrix.yaml:" in proc.stderr
    assert "binds libamdhip64.so.7" in proc.stderr
    assert "release toolchain install rocm 7.2 --runtime-only" in proc.stderr


MINBASE_PROBE = """
import json, os, sys, tempfile
from pathlib import Path
from release.config.matrix import Simulation
from release.smoke.image import Bind, Sandbox
work = Path(tempfile.mkdtemp())
binds = [Bind(path=work, read_only=False), Bind(path=Path(sys.argv[2]))]
sim = Simulation(runtime="absent", rootfs="debootstrap-minbase")
box = Sandbox("clean-minbase", sim, workdir=work, rootfs=Path(sys.argv[1]), binds=binds)
out = {}
for name, command in {
    "debian": ["cat", "/etc/debian_version"],
    "write-work": ["sh", "-c", f"echo hi > {work}/out"],
    "write-ro-bind": ["sh", "-c", f"touch {sys.argv[2]}/x"],
    "write-tree": ["sh", "-c", "touch /etc/x"],
    "write-tmp": ["sh", "-c", "echo t > /tmp/t && cat /tmp/t"],
    "proc": ["sh", "-c", "test -r /proc/self/maps && test -c /dev/null && echo ok"],
}.items():
    r = box.run(command)
    out[name] = [r.returncode, r.stdout.strip()]
out["owner"] = os.stat(work / "out").st_uid
print(json.dumps(out))
"""


def test_the_minbase_tree_in_a_user_namespace(user: str, workspace: Path) -> None:
    """An overlay cannot copy up root-owned directories in a user namespace: the tree is bound in,
    entry by entry, under a private tmpfs; it stays pristine and the work directory writable."""
    from release.smoke.image import ensure_minbase

    tree = workspace / "minbase"
    if not tree.exists():
        subprocess.run(["cp", "-a", str(ensure_minbase()), str(tree)], check=True)
    readonly = workspace / "readonly"
    readonly.mkdir(exist_ok=True)
    probe = workspace / "probe.py"
    probe.write_text(MINBASE_PROBE)
    python = workspace / "toolkit" / "bin" / "python"
    argv = ["runuser", "-u", user, "--", str(python), str(probe), str(tree), str(readonly)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["debian"][0] == 0 and out["debian"][1].startswith("12."), out
    assert out["write-work"][0] == 0
    assert out["owner"] != 0, "files written in the image belong to the user, not root"
    assert out["write-ro-bind"][0] != 0
    assert out["write-tree"][0] != 0
    assert not (tree / "etc" / "x").exists(), "the cached tree was written to"
    assert out["write-tmp"] == [0, "t"]
    assert out["proc"] == [0, "ok"]
