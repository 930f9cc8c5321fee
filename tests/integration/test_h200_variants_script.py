"""docs/records/h200/variants.sh exits with the status of what it ran (uv's install, then the selftest),
and stops its index server on every way out. Run for real with bash, python's http.server and pip;
uv and the installed engine are stand-ins (no uv wheel or GPU here), named as such: the stand-in
uv lays out a fake xfer-engine whose selftest exits with the status the test asks for."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "records" / "h200" / "variants.sh"

STANDIN_UV = r"""#!python
# STAND-IN for uv (tests/integration/test_h200_variants_script.py): no uv wheel exists here.
import os, pathlib, sys

args = sys.argv[1:]
if args[:1] == ["--version"]:
    print("uv 0.0.0 (stand-in)")
    sys.exit(0)
if int(os.environ.get("STANDIN_UV_RC", "0")):
    print("error: stand-in uv fails", file=sys.stderr)
    sys.exit(int(os.environ["STANDIN_UV_RC"]))
target = pathlib.Path(args[args.index("--target") + 1])
info = target / "xfer_engine-0.1.0.dist-info"
for folder in (info, target / "xfer", target / "bin"):
    folder.mkdir(parents=True, exist_ok=True)
(info / "variant.json").write_text('{"variants": {"cu130": {}}}')
(info / "METADATA").write_text("Name: xfer-engine\n")
(target / "xfer" / "__init__.py").write_text("")
rc = int(os.environ.get("STANDIN_SELFTEST_RC", "0"))
(target / "xfer" / "__main__.py").write_text(f"import sys\nprint('{{}}')\nsys.exit({rc})\n")
(target / "bin" / "xfer-master").write_text("#!/bin/sh\n")
print("Installed 1 package (stand-in)")
"""


def _standin_uv_wheel(path: Path) -> None:
    """A wheel holding the stand-in as its `uv` script (pip puts it in --target's bin/)."""
    dist = "uv-0.0.0"
    files = {
        f"{dist}.dist-info/METADATA": "Metadata-Version: 2.1\nName: uv\nVersion: 0.0.0\n",
        f"{dist}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
        f"{dist}.data/scripts/uv": STANDIN_UV,
    }
    record = "".join(f"{name},,\n" for name in files) + f"{dist}.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as whl:
        for name, text in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o100755 << 16  # a regular, executable file
            info.create_system = 3  # Unix: pip keeps the executable bit
            whl.writestr(info, text)
        whl.writestr(f"{dist}.dist-info/RECORD", record)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def carry(tmp_path: Path) -> Path:
    """The working directory the script expects: .hw-carry/variants with uv's wheel and the index;
    `python3` on PATH is this environment's Python (it has pip)."""
    variants = tmp_path / ".hw-carry" / "variants"
    (variants / "index").mkdir(parents=True)
    (variants / "index" / "xfer_engine-0.1.0-py3-none-any.whl").write_bytes(b"not used by the stand-in")
    _standin_uv_wheel(variants / "uv-0.0.0-py3-none-any.whl")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "python3"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    return tmp_path


@pytest.mark.parametrize(
    ("uv_rc", "selftest_rc", "expected"),
    [(3, 0, 3), (0, 5, 5), (0, 0, 0)],
    ids=["uv-fails", "selftest-fails", "both-pass"],
)
def test_the_script_exits_with_the_status_of_what_it_ran(
    carry: Path, uv_rc: int, selftest_rc: int, expected: int
) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "PATH": f"{carry / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "VARIANTS_TMP": str(carry / "tmp"),
        "VARIANTS_PORT": str(port),
        "OUT": str(carry / "out"),
        "STANDIN_UV_RC": str(uv_rc),
        "STANDIN_SELFTEST_RC": str(selftest_rc),
    }
    (carry / "tmp").mkdir()
    (carry / "out").mkdir()
    done = subprocess.run(
        ["bash", str(SCRIPT)], cwd=carry, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == expected, done.stdout + done.stderr
    assert f"uv rc={uv_rc}" in done.stdout
    if uv_rc == 0:
        assert f"selftest rc={selftest_rc}" in done.stdout and "variant ['cu130']" in done.stdout
    else:
        assert "selftest rc=" not in done.stdout  # nothing runs after a failed install
    with socket.socket() as s:  # the index server is gone: nothing listens on its port
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed connection may linger
        s.bind(("127.0.0.1", port))
