"""A full or read-only destination and a closed stdout end in one line, with nothing partial left
under a final name (real tmpfs mounts in a private mount namespace; root only)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
