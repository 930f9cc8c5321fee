"""scripts/python-debian.sh for real: CPython 3.14 from Debian sid's packages (the apt download is
cached under ~/.cache/release/python-debian, as bootstrap.sh leaves it), relocated into a pyenv-like
versions directory of the test's own, runs on this older Debian with sid's C library beside it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from release.machine.interpreters import find_interpreter, python_headers

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "python-debian.sh"


def _install(pyenv: Path, version: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYENV_ROOT": str(pyenv)}
    return subprocess.run(
        ["bash", str(SCRIPT), version], env=env, text=True, capture_output=True, timeout=600, check=False
    )


def test_python_314_from_debian_sid_is_a_self_contained_pyenv_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pyenv = tmp_path / "pyenv"
    proc = _install(pyenv, "3.14")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (home,) = (pyenv / "versions").iterdir()
    assert home.name.startswith("3.14.")
    monkeypatch.setenv("PYENV_ROOT", str(pyenv))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    exe = find_interpreter("3.14")
    assert exe == home / "bin" / "python3.14"
    assert python_headers(exe, "3.14").is_file()
    pyconfig = (home / "include" / "python3.14" / "pyconfig.h").read_text(encoding="utf-8")
    assert "#define SIZEOF_VOID_P 8" in pyconfig  # the real one, not Debian's multiarch wrapper
    probe = (
        "import json, os, sys, sysconfig, ssl, sqlite3, lzma, ctypes\n"
        "v = sysconfig.get_config_vars()\n"
        "print(json.dumps({'prefix': sys.prefix, 'paths': sysconfig.get_paths(), 'cc': v['CC'],"
        " 'cxx': v['CXX'], 'wheels': v.get('WHEEL_PKG_DIR'), 'libc': os.confstr('CS_GNU_LIBC_VERSION')}))\n"
    )
    ran = subprocess.run([str(exe), "-c", probe], text=True, capture_output=True, check=True, timeout=60)
    info = json.loads(ran.stdout)
    assert info["prefix"] == str(home)
    assert all(path.startswith(str(home)) for path in info["paths"].values()), info["paths"]
    assert info["paths"]["purelib"] == f"{home}/lib/python3.14/site-packages"
    assert (info["cc"], info["cxx"], info["wheels"]) == ("gcc", "g++", "")
    assert tuple(int(p) for p in info["libc"].split()[1].split(".")) > (2, 41)  # sid's, not this machine's
    interp = subprocess.run(["readelf", "-l", str(exe)], text=True, capture_output=True, check=True).stdout
    assert f"[Requesting program interpreter: {home}/lib/" in interp
    # a venv with pip, from the bundled wheel alone
    venv = tmp_path / "venv"
    subprocess.run([str(exe), "-m", "venv", str(venv)], check=True, timeout=120)
    argv = [str(venv / "bin" / "python"), "-m", "pip", "-V"]
    pip = subprocess.run(argv, text=True, capture_output=True, check=False, timeout=60)
    assert pip.returncode == 0 and "(python 3.14)" in pip.stdout, pip.stdout + pip.stderr
    # run again: kept as it is
    again = _install(pyenv, "3.14")
    assert again.returncode == 0 and f"already at {exe}" in again.stdout, again.stdout + again.stderr


@pytest.mark.parametrize(
    ("version", "says"),
    [("3", "usage: python-debian.sh 3.X"), ("3.99", "Debian sid has no python3.99 package")],
)
def test_a_version_debian_lacks_is_one_line(tmp_path: Path, version: str, says: str) -> None:
    proc = _install(tmp_path / "pyenv", version)
    assert proc.returncode != 0
    (line,) = proc.stderr.strip().splitlines()
    assert says in line and "error:" in line
