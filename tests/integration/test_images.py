"""Image simulation mechanics, proven with a tiny program that links -lamdhip64 (no wheel needed).

Each layout runs the program inside a mount namespace and reads, from the program's own
/proc/self/maps, which file the loader mapped; the host must be unchanged afterwards.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from release.config.matrix import Simulation
from release.smoke.image import (
    Bind,
    Sandbox,
    distribution_libdir,
    ensure_minbase,
    host_package,
    missing_libraries,
    runtime_files,
)

pytestmark = pytest.mark.integration

LIBDIR = distribution_libdir()
HIP = LIBDIR / "libamdhip64.so.5"
RUNTIME_GLOBS = ("libamdhip64.so*", "libhsa-runtime64.so*")

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root")
needs_hip = pytest.mark.skipif(not HIP.exists(), reason="Debian's HIP runtime (libamdhip64-dev) is absent")

PROGRAM = r"""
#include <stdio.h>
#include <string.h>
extern int hipRuntimeGetVersion(int *);
int main(void) {
    int v = 0;
    hipRuntimeGetVersion(&v);
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096];
    while (fgets(line, sizeof line, maps)) {
        char *path = strchr(line, '/');
        if (path && strstr(path, "libamdhip64")) { fputs(path, stdout); break; }
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def hip_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not HIP.exists():
        pytest.skip("libamdhip64 not installed")
    src = tmp_path_factory.mktemp("prog") / "hipmap.c"
    src.write_text(PROGRAM)
    exe = src.with_suffix("")
    subprocess.run(
        ["cc", "-o", str(exe), str(src), "-Wl,--no-as-needed", "-lamdhip64"], check=True, capture_output=True
    )
    return exe


def _host_state() -> tuple[str, str, tuple[str, ...], bool]:
    cache = hashlib.sha256(Path("/etc/ld.so.cache").read_bytes()).hexdigest()
    # Mounts that other work on this machine makes or removes are not ours: podman's storage, the
    # network namespaces it binds under /run/netns, and the /proc, /sys and /dev that make-image.sh
    # binds into the root it is building under its work directory while another test makes an image
    # (mountinfo's fifth field is the mount point).
    others = ("/var/lib/containers/storage/", "/run/containers/storage/", "/run/netns")
    others += ("/var/tmp/xfer-images/",)
    mounts = "".join(
        line
        for line in Path("/proc/self/mountinfo").read_text().splitlines(keepends=True)
        if not line.split()[4].startswith(others)
    )
    hip = tuple(sorted(p.name for p in LIBDIR.glob("libamdhip64*")))
    return cache, mounts, hip, Path("/opt/rocm").exists()


@pytest.fixture
def host_unchanged() -> Iterator[None]:
    before = _host_state()
    yield
    assert _host_state() == before, "a simulation changed the host (loader cache, mounts or files)"


@pytest.fixture(scope="module")
def runtime() -> tuple[str, ...]:
    return runtime_files(LIBDIR, RUNTIME_GLOBS)


def _sandbox(tmp_path: Path, name: str, sim: Simulation, runtime: tuple[str, ...]) -> Sandbox:
    return Sandbox(name, sim, workdir=tmp_path, runtime=runtime, libdir=LIBDIR)


@needs_hip
def test_runtime_files_move_the_runtime_and_keep_system_libraries(runtime: tuple[str, ...]) -> None:
    assert "libamdhip64.so.5" in runtime
    assert "libhsa-runtime64.so.1" in runtime
    assert "libhsakmt.so.1" in runtime  # only the runtime needs it
    assert not any(n.startswith(("libnuma", "libelf", "libstdc++", "libc.")) for n in runtime)


@needs_root
@needs_hip
def test_system_layout_resolves_from_the_distribution_directory(
    tmp_path: Path, hip_program: Path, runtime: tuple[str, ...], host_unchanged: None
) -> None:
    box = _sandbox(tmp_path, "distro", Simulation(runtime="system"), runtime)
    result = box.run([str(hip_program)])
    assert result.returncode == 0, result.output
    assert Path(result.stdout.strip()).parent == LIBDIR.resolve()


@needs_root
@needs_hip
def test_prefix_layout_through_ld_so_conf_d(
    tmp_path: Path, hip_program: Path, runtime: tuple[str, ...], host_unchanged: None
) -> None:
    sim = Simulation(runtime="prefix", prefix="/opt/rocm-6.4.1/lib", via="ld.so.conf.d")
    box = _sandbox(tmp_path, "opt", sim, runtime)
    result = box.run([str(hip_program)])
    assert result.returncode == 0, result.output
    assert result.stdout.strip() == "/opt/rocm-6.4.1/lib/libamdhip64.so.5.2.21153"
    listing = box.run(["sh", "-c", f"ls {LIBDIR} | grep -c -e amdhip64 -e hsa-runtime64 -e hsakmt || true"])
    assert listing.stdout.strip() == "0", "the distribution directory still holds the runtime"
    conf = box.run(["cat", "/etc/ld.so.conf.d/zz-release-simulated-runtime.conf"])
    assert conf.stdout.strip() == "/opt/rocm-6.4.1/lib"


@needs_root
@needs_hip
def test_prefix_layout_through_ld_library_path_only(
    tmp_path: Path, hip_program: Path, runtime: tuple[str, ...], host_unchanged: None
) -> None:
    sim = Simulation(runtime="prefix", prefix="/opt/rocm/lib", via="LD_LIBRARY_PATH")
    box = _sandbox(tmp_path, "llp", sim, runtime)
    result = box.run([str(hip_program)])
    assert result.returncode == 0, result.output
    assert result.stdout.strip() == "/opt/rocm/lib/libamdhip64.so.5.2.21153"
    without = box.run(["env", "-u", "LD_LIBRARY_PATH", str(hip_program)])
    assert without.returncode != 0
    assert missing_libraries(without.output) == ("libamdhip64.so.5",)


@needs_root
@needs_hip
def test_absent_layout_hides_the_runtime(
    tmp_path: Path, hip_program: Path, runtime: tuple[str, ...], host_unchanged: None
) -> None:
    box = _sandbox(tmp_path, "absent", Simulation(runtime="absent"), runtime)
    result = box.run([str(hip_program)])
    assert result.returncode == 127
    assert "libamdhip64.so.5: cannot open shared object file" in result.stderr
    ldd = box.run(["ldd", str(hip_program)])
    assert missing_libraries(ldd.stdout) == ("libamdhip64.so.5",)


@needs_root
@needs_hip
def test_a_failing_command_leaves_nothing_mounted(
    tmp_path: Path, runtime: tuple[str, ...], host_unchanged: None
) -> None:
    sim = Simulation(runtime="prefix", prefix="/opt/rocm-6.4.1/lib", via="ld.so.conf.d")
    box = _sandbox(tmp_path, "fail", sim, runtime)
    result = box.run(["sh", "-c", "exit 3"])
    assert result.returncode == 3
    assert not Path("/opt/rocm-6.4.1").exists()


@pytest.fixture(scope="session")
def minbase() -> Path:
    tool = shutil.which("debootstrap") or Path("/usr/sbin/debootstrap").exists()
    if os.geteuid() != 0 or not tool:
        pytest.skip("the minbase image needs root and debootstrap")
    return ensure_minbase()


@needs_root
def test_minbase_image_runs_the_hosts_interpreter(
    tmp_path: Path, minbase: Path, host_unchanged: None
) -> None:
    import sys

    home = Path(sys.base_prefix)
    sim = Simulation(runtime="absent", rootfs="debootstrap-minbase")
    binds = [Bind(path=home), Bind(path=tmp_path, read_only=False)]
    box = Sandbox("minbase", sim, workdir=tmp_path, rootfs=minbase, binds=binds)
    version = box.run(["cat", "/etc/debian_version"])
    assert version.stdout.startswith("12."), version.output
    exe = Path(sys.executable).resolve()
    result = box.run([str(exe), "-c", "import sys; print(sys.version_info[:2])"])
    assert result.returncode == 0, result.output
    assert result.stdout.strip() == str(tuple(sys.version_info[:2]))
    written = box.run(["sh", "-c", f"echo hi > {tmp_path}/out; touch {home}/x 2>/dev/null || echo ro"])
    assert written.stdout.strip() == "ro"
    assert (tmp_path / "out").read_text() == "hi\n"
    assert not (Path(minbase) / tmp_path.relative_to("/")).exists(), "the cached tree was written to"


@needs_root
def test_a_missing_system_library_is_named_with_its_package(
    tmp_path: Path, minbase: Path, host_unchanged: None
) -> None:
    sim = Simulation(runtime="absent", rootfs="debootstrap-minbase")
    box = Sandbox("mb", sim, workdir=tmp_path, rootfs=minbase)
    # minbase has libstdc++6 (apt needs it); remove it from this namespace's overlay only
    result = box.run(["sh", "-c", "rm -f /usr/lib/x86_64-linux-gnu/libstdc++.so.6*; ldd /usr/bin/apt"])
    assert missing_libraries(result.output) == ("libstdc++.so.6",)
    assert host_package("libstdc++.so.6") == "libstdc++6"
    assert (minbase / "usr/lib/x86_64-linux-gnu/libstdc++.so.6").exists()
