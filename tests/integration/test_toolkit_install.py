"""The toolkit as users get it: its wheel, installed with its dependencies into a fresh venv made
from a base interpreter, run outside this repository, must carry everything it reads (backend data,
schemas, toolchain scripts, workflow templates) and needs nothing from a checkout.

`toolkit_wheel` and `installed_toolkit` are shared with test_adoption.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from release import DISTRIBUTION, __version__
from release.build.interpreters import find_interpreter

from .conftest import ROOT

pytestmark = pytest.mark.integration


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
    dist = tmp_path_factory.mktemp("toolkit-dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
         str(ROOT)],
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
    subprocess.run([str(base_interpreter()), "-m", "venv", str(venv)], check=True, env=env)
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(toolkit_wheel)],
        capture_output=True, text=True, env=env, timeout=900, check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    yield InstalledToolkit(venv, user_env(venv))


def test_the_wheel_carries_data_scripts_and_templates(toolkit_wheel: Path) -> None:
    names = set(zipfile.ZipFile(toolkit_wheel).namelist())
    for backend in ("cpu", "cuda", "rocm", "musa"):
        assert f"release/backends_data/{backend}.json" in names
    assert {"release/config/matrix.schema.json", "release/inspect/verify.schema.json"} <= names
    scripts = ("install-rocm.sh", "install-cuda.sh", "install-musa.sh", "_common.sh", "free-disk.sh")
    # a variant whose host lacks the declared toolkit builds in its local image by default: the
    # script that makes it, and the one that sets up podman, come with the toolkit
    scripts += ("make-image.sh", "setup-podman.sh")
    scripts += ("hipcc-host.sh",)  # install-rocm.sh puts it where HIP has no hipcc
    for script in (*scripts, "runtimes.tsv"):
        assert f"release/scripts_data/{script}" in names
    for workflow in ("release.yml", "ci.yml", "hardware.yml"):
        assert f"release/init/templates/{workflow}" in names
    assert "release/nox_sessions.py" in names
    # and nothing of this repository's own: the reference engine, tests, its bootstrap and CI scripts
    own = ("bootstrap.sh", "fresh-ci.sh", "cibw-podman.sh")
    assert not [n for n in names if n.startswith(("engine/", "tests/")) or n.endswith(own)]


def test_installed_toolkit_works_away_from_the_repository(
    installed_toolkit: InstalledToolkit, tmp_path: Path
) -> None:
    project = tmp_path / "elsewhere"  # no packaging/ or scripts/ here, and not the repository
    (project / "proj").mkdir(parents=True)  # the engine: a PEP 517 project (plan checks it exists)
    (project / "proj" / "pyproject.toml").write_text('[project]\nname = "kv"\nversion = "0.1"\n')
    (project / "matrix.yaml").write_text(
        'schema_version: 1\nengine: {source: proj, import_name: kv}\npython: ["3.12"]\n'
        "platform: {floor: manylinux_2_28_x86_64}\n"
        "variants: {rocm: {distribution: kv-rocm, backend: rocm, exclude: ['libamdhip64.so*']},\n"
        "           musa: {distribution: kv-musa, backend: musa}}\n",
        encoding="utf-8",
    )
    plan = installed_toolkit.run("release", "plan", cwd=project)
    assert "cp312-rocm-manylinux_x86_64" in plan.stdout
    where = installed_toolkit.run("python", "-c", "import release; print(release.__file__)", cwd=project)
    assert str(installed_toolkit.venv) in where.stdout, "the test must exercise the installed copy"
    script = installed_toolkit.run("release", "toolchain", "path", "rocm", cwd=project).stdout.strip()
    assert script.startswith(str(installed_toolkit.venv)) and Path(script).is_file()
    # A missing toolkit is named with the toolkit's command, which works here: no repository path.
    check = installed_toolkit.run("release", "toolchain", "check", cwd=project, extra={"MUSA_HOME": ""})
    musa = next(line for line in check.stdout.splitlines() if line.startswith("musa toolkit"))
    assert "`release toolchain install musa`" in musa, check.stdout
    version = installed_toolkit.run("release", "--version", cwd=project).stdout.strip()
    assert version == f"release {__version__}"
