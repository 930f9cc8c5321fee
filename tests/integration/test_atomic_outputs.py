"""A full or read-only destination and a closed stdout end in one line, with nothing partial left
under a final name (real tmpfs mounts in a private mount namespace; root only)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import processes_naming

ROOT = Path(__file__).resolve().parents[2]
WRITE = (
    "import sys\n"
    "from pathlib import Path\n"
    "from release import atomic\n"
    "from release.errors import os_error_line\n"
    "try:\n"
    "    atomic.write_bytes(Path(sys.argv[1]), b'PK' * 200_000)\n"
    "except OSError as exc:\n"
    "    print('error: ' + os_error_line(exc), file=sys.stderr)\n"
    "    sys.exit(1)\n"
)

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare for a private tmpfs"
)


@needs_root
@pytest.mark.parametrize(
    ("options", "remount", "code"),
    [("size=64k", "", "ENOSPC"), ("size=1m", "mount -o remount,ro /mnt &&", "EROFS")],
)
def test_a_full_or_read_only_destination_leaves_nothing(options: str, remount: str, code: str) -> None:
    script = (
        f"mount -t tmpfs -o {options} tmpfs /mnt && {remount} "
        f'{sys.executable} -c "$WRITE" /mnt/x-1.0-py3-none-any.whl; echo rc=$?; ls -A /mnt'
    )
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        env={**os.environ, "WRITE": WRITE, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"({code})" in lines[0]
    assert proc.stdout.strip() == "rc=1"  # and `ls -A /mnt` lists nothing


def test_a_closed_stdout_is_one_line() -> None:
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "release", "plan", "--json"],
            cwd=ROOT, stdout=write, stderr=subprocess.PIPE, text=True, check=False, timeout=60,
        )  # fmt: skip
    finally:
        os.close(write)
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("warning:")]
    assert errors == ["error: stdout was closed before the output was written (EPIPE)"]



def test_sigterm_stops_the_build_and_its_compilers_and_leaves_no_wheel(tmp_path: Path) -> None:
    """SIGTERM to the toolkit alone (as CI's cancel sends it) while cmake and the compilers run:
    exit 143 with the line `terminated`, no cmake, ninja or compiler left behind, no wheel or
    partial file under the wheelhouse, no repair folder left in the temporary directory."""
    import signal
    import time

    from tests.integration.conftest import ONE_PYTHON, write_host_matrix

    matrix = write_host_matrix(tmp_path / "m", pythons=[ONE_PYTHON], variants=["cpu"])
    wheelhouse = tmp_path / "wheelhouse"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "CCACHE_DISABLE": "1", "TMPDIR": str(scratch)}  # a compile that takes seconds
    argv = [sys.executable, "-m", "release", "--matrix", str(matrix), "build", "--variant", "cpu",
            "--wheelhouse", str(wheelhouse)]  # fmt: skip
    pipe = subprocess.PIPE
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=pipe, stderr=pipe, text=True)
    try:
        deadline = time.monotonic() + 300
        while not [p for p in processes_naming(str(tmp_path)) if p != proc.pid]:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no child of the build started within 300 s"
            time.sleep(0.2)
        time.sleep(2)  # cmake configuring or compiling by now
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, out + err
    assert err.strip().splitlines()[-1].endswith("terminated"), err
    assert "Traceback" not in err
    time.sleep(1)
    assert processes_naming(str(tmp_path)) == [], "a child of the build outlived it"
    assert not list(wheelhouse.rglob("*.whl")) and not list(wheelhouse.rglob("*.part"))
    assert not list(scratch.glob("repair-*"))
