"""Installing what a build needs: a backend's toolchain through the install script the toolkit
ships (`scripts/install-<backend>.sh`), and CPython versions from uv, then pyenv, then the
distribution's packages, then Debian unstable's build, whichever answers (`release toolchain install`)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from release import process, settings
from release.config.resources import toolkit_scripts
from release.errors import ReleaseError, ToolchainError, UsageError
from release.machine.interpreters import find_interpreter
from release.wheel.cpython import parse_key

INSTALL_TIMEOUT = 1800  # seconds: a toolkit from a vendor repository is a large download


def script_for(backend: str) -> Path:
    script = toolkit_scripts() / f"install-{backend}.sh"
    if not script.is_file():
        known = sorted(p.name[len("install-") : -len(".sh")] for p in toolkit_scripts().glob("install-*.sh"))
        msg = f"no install script for {backend!r}: the toolkit ships {', '.join(known)} (and `python`)"
        raise UsageError(msg)
    return script


def install_backend(backend: str, version: str | None, *, runtime_only: bool = False) -> int:
    flags = [*([version] if version else []), *(["--runtime-only"] if runtime_only else [])]
    return run_script(script_for(backend), flags)


def run_script(script: Path, args: list[str]) -> int:
    """Run one of the toolkit's bash scripts; its own error line is the message on failure."""
    bash = shutil.which("bash")
    if bash is None:
        msg = "bash not found on PATH: the toolchain install scripts are bash scripts"
        raise ToolchainError(msg)
    argv = [bash, str(script), *args]
    print(f"$ {' '.join(argv)}", flush=True)
    proc = process.stream(argv, timeout=INSTALL_TIMEOUT, session=False)
    if proc.returncode != 0:
        msg = f"{script.name} failed (exit {proc.returncode}); its own error is printed above"
        raise ToolchainError(msg)
    return 0


def _attempt(argv: list[str], timeout: float = INSTALL_TIMEOUT) -> str | None:
    """Run one installer; None on success, else its last line of output."""
    print(f"$ {' '.join(argv)}", flush=True)
    env = settings.environment()
    if not settings.raw("UV_PYTHON_BIN_DIR") and os.access("/usr/local/bin", os.W_OK):
        env["UV_PYTHON_BIN_DIR"] = "/usr/local/bin"  # where the toolkit finds interpreters
    try:
        proc = process.run(argv, timeout=timeout, env=env, session=False)
    except (OSError, process.TimedOut) as exc:
        return str(exc)
    if proc.returncode == 0:
        return None
    lines = [line.strip() for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else f"exit {proc.returncode}"


def _uv() -> str | None:
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.is_file() else shutil.which("uv")


def _apt_has(package: str) -> bool:
    if shutil.which("apt-cache") is None:
        return False
    proc = process.run(["apt-cache", "show", package], timeout=process.QUERY_S)
    return proc.returncode == 0 and bool(proc.stdout.strip())


def _as_root(argv: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return argv
    sudo = shutil.which("sudo")
    return [sudo, *argv] if sudo else argv


def _pyenv() -> str | None:
    root = settings.pyenv_root()
    exe = root / "bin" / "pyenv"
    return str(exe) if exe.is_file() else shutil.which("pyenv")


def _installers(version: str) -> list[tuple[str, list[str] | str]]:
    """(name, argv) of each way to get CPython `version` here, or (name, why it is not available)."""
    ways: list[tuple[str, list[str] | str]] = []
    uv = _uv()
    ways.append(("uv", [uv, "python", "install", version] if uv else "not installed (`pip install uv`)"))
    pyenv = _pyenv()
    ways.append(("pyenv", [pyenv, "install", "--skip-existing", version] if pyenv else "not installed"))
    if version.endswith("t"):  # Debian builds no free-threaded CPython
        ways.append(("apt, debian-sid", "Debian packages no free-threaded CPython"))
        return ways
    packages = [f"python{version}-dev", f"python{version}-venv"]
    apt = _as_root(["apt-get", "install", "-y", "-q", *packages]) if _apt_has(f"python{version}") else None
    ways.append(("apt", apt or f"no python{version} package in this distribution's archive"))
    ways.append(("debian-sid", _debian_sid(version)))
    return ways


def _debian_sid(version: str) -> list[str] | str:
    """argv of `scripts/python-debian.sh VERSION` (Debian unstable's CPython, relocated with its own C
    library), or why it cannot run here."""
    bash, tools = shutil.which("bash"), ("dpkg-deb", "apt-get", "patchelf")
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if bash is None or missing:
        return f"needs bash, {', '.join(tools)} ({' '.join(missing) or 'bash'} not found)"
    return [bash, str(toolkit_scripts() / "python-debian.sh"), version]


def install_python(version: str) -> Path:
    """Make CPython `version` findable: uv, then pyenv, then apt, then Debian unstable's build
    (`scripts/python-debian.sh`); one line naming every attempt.

    uv and pyenv download (uv from github.com, pyenv from python.org); where neither is reachable
    the distribution's packages come next (Debian 12 carries 3.11 only), and last Debian sid's
    binary packages, relocated into pyenv's versions directory with sid's own C library."""
    record = parse_key(version)
    if record is None:
        msg = f"toolchain install python {version}: give a version like 3.12 (or 3.14t, free-threaded)"
        raise UsageError(msg)
    tried: list[str] = []
    for name, way in _installers(version):
        if isinstance(way, str):
            tried.append(f"{name}: {way}")
            continue
        failed = _attempt(way)
        found = find_interpreter(version)
        if found is not None:
            return found
        tried.append(f"{name}: {failed or 'installed, but not where the toolkit looks'}")
    msg = f"no Python {version} could be installed: " + "; ".join(tried)
    raise ToolchainError(msg)


def install_pythons(versions: list[str]) -> int:
    if not versions:
        msg = "toolchain install python: name the versions, e.g. `release toolchain install python 3.12`"
        raise UsageError(msg)
    failures: list[str] = []
    for version in versions:
        found = find_interpreter(version)
        if found is not None:
            print(f"Python {version}: already at {found}")
            continue
        try:
            print(f"Python {version}: installed at {install_python(version)}")
        except ReleaseError as exc:
            failures.append(str(exc))
    if failures:
        raise ToolchainError("\n".join(failures))
    return 0
