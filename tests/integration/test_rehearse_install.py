"""The rehearsal's install step: uv (the default) and pip, as the workflow writes it, leave the same
environment: the toolkit wheel at the lowest allowed versions of its dependencies, pip in the venv.
And the toolkit's install in a container build (once, in `before-all`) takes uv where the image
has it, pip where not."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from release import requirement as toolkit_pin
from release.builder.container import install_command
from release.config.pins import requirement
from release.machine.interpreters import find_interpreter
from release.rehearse.services import current_user
from release.rehearse.steps import Instance, Setup, _install
from release.rehearse.workflow import Step
from release.variants.resolution import uv_binary

from .conftest import ROOT

pytestmark = pytest.mark.integration
PY = "3.12"


def install(work: Path, wheel: Path, *, uv: Path | None) -> tuple[str, list[str]]:
    """One job's install step (`python -m pip install "$TOOLKIT"`, --toolkit WHEEL): (its note,
    the venv's `pip freeze`)."""
    (work / "toolcache").mkdir(parents=True)
    setup = Setup(
        repo=ROOT, work=work, artifacts=work / "artifacts", toolcache=work / "toolcache",
        user=current_user(), lowest=True, index_url="", gh_dir=work / "gh", container_host=None,
        log=print, toolkit_wheel=wheel, uv=uv,
    )  # fmt: skip
    instance = Instance(setup=setup, slug="job", user=setup.user, contexts={}, env={})
    instance.workspace.mkdir(parents=True)
    interpreter = find_interpreter(PY)
    assert interpreter is not None
    # `python` on PATH as setup-python leaves it: a directory holding that interpreter as `python`.
    bindir = work / "toolcache" / "bin"
    bindir.mkdir()
    (bindir / "python").symlink_to(interpreter)
    env = {"HOME": str(work), "LANG": "C.UTF-8", "PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin",
           "TOOLKIT": toolkit_pin()}  # fmt: skip
    step = Step(job="build", index=1, label="Install the toolkit", kind="install",
                raw={"run": 'python -m pip install "$TOOLKIT"'})  # fmt: skip
    note = _install(instance, step, env)
    venv = instance.home / "toolkit-venv" / "bin" / "python"
    frozen = subprocess.run(
        [str(venv), "-m", "pip", "freeze", "--all", "--exclude", "pip", "--exclude", "setuptools",
         "--exclude", "wheel"],
        capture_output=True, text=True, check=True, env={**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    ).stdout.splitlines()  # fmt: skip
    return note, sorted(line.split(" @ ")[0] for line in frozen)


@pytest.mark.skipif(uv_binary() is None, reason="uv comes with the toolkit (pip install -e .[test])")
@pytest.mark.slow  # 44 and 50 s in two fresh runs: pip's install without a cache is most of it
def test_uv_and_pip_install_steps_leave_the_same_environment(toolkit_wheel: Path, tmp_path: Path) -> None:
    found = uv_binary()
    assert found is not None
    uv = tmp_path / "uv-home" / "uv"
    (uv.parent / "cache").mkdir(parents=True)
    shutil.copyfile(found, uv)
    uv.chmod(0o755)
    by_uv, with_uv = install(tmp_path / "uv", toolkit_wheel, uv=uv)
    by_pip, with_pip = install(tmp_path / "pip", toolkit_wheel, uv=None)
    assert "by uv (venv --seed, pip install)" in by_uv and "by uv" not in by_pip
    assert f"pip install {toolkit_wheel.name} (--toolkit, in place of {toolkit_pin()})" in by_pip
    assert with_uv == with_pip, set(with_uv) ^ set(with_pip)
    assert "gpu-wheel-release" in {line.split("==")[0] for line in with_uv}
    # The lowest pins hold: auditwheel at its lower bound, read from the wheel's METADATA.
    bound = requirement("auditwheel").split(">=")[1].split(",")[0]
    assert f"auditwheel=={bound}" in with_uv, with_uv
    # pip is in the uv-made venv, as `python -m venv` leaves it (later steps may run it).
    pip = tmp_path / "uv" / "jobs" / "job" / "toolkit-venv" / "bin" / "pip"
    assert pip.exists()


def fake_tools(directory: Path, names: tuple[str, ...]) -> Path:
    """Stand-ins that record how they were called (the branch is what is under test, not the install)."""
    directory.mkdir(parents=True)
    for name in names:
        tool = directory / name
        tool.write_text(f'#!/bin/sh\necho "{name} $*" >> "{directory}/calls"\n', encoding="utf-8")
        tool.chmod(0o755)
    return directory


@pytest.mark.parametrize("has_uv", [True, False])
def test_the_containers_toolkit_install_uses_uv_where_the_image_has_it(tmp_path: Path, has_uv: bool) -> None:
    tools = fake_tools(tmp_path / "bin", ("python", "uv") if has_uv else ("python",))
    command = install_command(" --constraint /project/pip-constraints.txt /project", into=f"{tools}/python")
    subprocess.run(["/bin/sh", "-c", command], env={"PATH": f"{tools}:/usr/bin:/bin"}, check=True)
    (call,) = (tools / "calls").read_text(encoding="utf-8").splitlines()
    args = "--constraint /project/pip-constraints.txt /project"
    if has_uv:
        assert call == f"uv pip install --quiet --python {tools}/python {args}"
    else:
        assert call == f"python -m pip install --quiet {args}"
