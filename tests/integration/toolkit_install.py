"""The toolkit as users get it, for the tests that install it: its wheel (`toolkit_wheel`, built once
per run and shared by every xdist worker) and a fresh venv with it installed from that wheel, its
dependencies from the package index (`installed_toolkit`, once per worker). Both fixtures are
registered in conftest.py, so each has one definition: a session fixture imported into several test
modules is set up once per module that imports it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from release import DISTRIBUTION, __version__
from release.machine.interpreters import find_interpreter

from .conftest import ROOT, fresh_venv, made_once, run_shared


@dataclass(frozen=True)
class InstalledToolkit:
    venv: Path
    env: dict[str, str]

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def run(
        self,
        *argv: str,
        cwd: Path,
        check: bool = True,
        timeout: float = 1800,
        extra: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """A command of the venv (`release`, `nox`) as a user in `cwd` runs it; on failure, its output."""
        exe = self.venv / "bin" / argv[0]
        proc = subprocess.run(
            [str(exe), *argv[1:]], cwd=cwd, env={**self.env, **(extra or {})},
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        if check and proc.returncode != 0:
            pytest.fail(f"{' '.join(argv)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc


def base_interpreter() -> Path:
    """The interpreter behind this test run, never a venv's (a venv of a venv inherits nothing)."""
    found = find_interpreter(f"{sys.version_info.major}.{sys.version_info.minor}")
    return found or Path(getattr(sys, "_base_executable", sys.executable))


def user_env(venv: Path | None = None) -> dict[str, str]:
    """This machine's environment without this checkout on the import path or a venv activated."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "RELEASE_MATRIX")}
    path = [
        p for p in env.get("PATH", "").split(os.pathsep) if p and not (Path(p).parent / "pyvenv.cfg").exists()
    ]
    env["PATH"] = os.pathsep.join([*([str(venv / "bin")] if venv else []), *path])
    return env


@pytest.fixture(scope="session")
def toolkit_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toolkit's wheel, built from this checkout once per run (read only: shared)."""
    dist = run_shared(tmp_path_factory, "toolkit-dist")
    with made_once(dist, "the toolkit wheel") as make:
        if make:
            subprocess.run(
                [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                 str(dist), str(ROOT)],
                check=True, capture_output=True, env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
            )  # fmt: skip
    (wheel,) = dist.glob("*.whl")
    assert wheel.name == f"{DISTRIBUTION.replace('-', '_')}-{__version__}-py3-none-any.whl"
    return wheel


@pytest.fixture(scope="session")
def installed_toolkit(
    tmp_path_factory: pytest.TempPathFactory, toolkit_wheel: Path
) -> Iterator[InstalledToolkit]:
    """`pip install <the toolkit wheel>` into a fresh venv, dependencies from the package index."""
    venv = tmp_path_factory.mktemp("toolkit-venv") / "venv"
    env = user_env()
    fresh_venv(base_interpreter(), venv)
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(toolkit_wheel)],
        capture_output=True, text=True, env=env, timeout=900, check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    yield InstalledToolkit(venv, user_env(venv))
