"""The adopter's release is rehearsed: the workflows `release init --ci github` wrote into another
project (test_adoption.py's ringlet, adopted from the toolkit's wheel) run here as this
repository's do (test_rehearse.py), with the installed toolkit's `release rehearse`.

The adopter's jobs install the toolkit pinned (`pip install "$TOOLKIT"`); no index holds this
version, so `--toolkit` hands them the wheel the test built (and the container build installs the
same bytes). The maintainer's `yours:` lines are filled in: the cpu variant builds in the local
Debian trixie build image of our own matrix (the one the real-matrix rehearsal makes: no image of
its own here), and declares our vLLM serving image and MI300X tier. ringlet needs no glibc symbol,
so its wheel meets the matrix's manylinux_2_28 floor from that image, and this host installs it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from release import requirement
from release.config.matrix import load
from release.machine.containers import STANDINS_ENV
from release.machine.interpreters import find_interpreter
from release.plan.resolve import LocalImage
from release.plan.steps import make_plan

from .conftest import ROOT, LocalImages, fresh_venv
from .rehearsal import table
from .test_adoption import PY, TAG, adopted_repository, needs_tools
from .toolkit_install import InstalledToolkit, user_env

pytestmark = pytest.mark.integration
CP = f"cp{PY.replace('.', '')}"
IMAGE, TIER = "vllm-rocm", "mi300x"


def standin_recipe() -> LocalImage:
    """Our matrix's local stand-in for the vLLM ROCm image (test_rehearse_hardware.py's)."""
    image = next(i for i in make_plan(load(ROOT / "matrix.yaml")).variant("rocm").images if i.name == IMAGE)
    assert image.standin is not None
    return image.standin


def fill_in(repo: Path, declared: dict[str, str]) -> None:
    """The maintainer's `yours:` lines: {pattern of the line: its replacement}."""
    matrix = repo / "matrix.yaml"
    text = matrix.read_text(encoding="utf-8")
    for pattern, replacement in declared.items():
        text, count = re.subn(pattern, lambda m, r=replacement: m.expand(r), text)
        assert count == 1, (pattern, text)
    matrix.write_text(text, encoding="utf-8")


def build_image(tag: str) -> dict[str, str]:
    """The cpu variant builds in a local image (no registry here)."""
    return {r"(?m)^(    backend: cpu\n)": rf"\1    build_image: {{local: {tag}}}\n"}


def serving_image_and_tier() -> dict[str, str]:
    """The cpu variant must work in the vLLM ROCm serving image and is tested on the MI300X runners,
    both as our matrix.yaml declares them (its smoke simulates the image with the host's ROCm
    runtime, which a cpu variant has no reason to install: added for hardware.yml alone)."""
    ours = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    return {
        r"(?m)^(    backend: cpu\n)": rf"\1    images: [{IMAGE}]\n    hardware: [{TIER}]\n",
        r"(?m)^images: \{\}$": "images: " + json.dumps({IMAGE: ours["images"][IMAGE]}),
        r"(?m)^hardware: \{\}$": "hardware: " + json.dumps({TIER: ours["hardware"][TIER]}),
    }


def rehearse(
    installed_toolkit: InstalledToolkit, repo: Path, work: Path, toolkit: Path, standin: str, *args: str
) -> subprocess.CompletedProcess[str]:
    container = load(ROOT / "matrix.yaml").matrix.images[IMAGE].container
    proc = installed_toolkit.run(
        "release", "rehearse", "--tag", TAG, "--work", str(work), "--toolkit", str(toolkit),
        "--env", f"{STANDINS_ENV}={container}={standin}", *args,
        cwd=repo, check=False, timeout=1500,
    )  # fmt: skip
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    return proc


@needs_tools
@pytest.mark.skipif(PY != "3.12", reason=f"the vLLM image (its stand-in here) holds Python 3.12, not {PY}")
@pytest.mark.skipif(os.geteuid() != 0, reason="the rehearsal's jobs run as the runner user, made as root")
@pytest.mark.slow
def test_the_adopters_release_yml_rehearses_through_publish_and_hardware_yml_to_the_device(
    installed_toolkit: InstalledToolkit, toolkit_wheel: Path, local_images: LocalImages, tmp_path: Path,
    work: Path,
) -> None:  # fmt: skip
    """The workflows init wrote, as they are, with the installed toolkit's `release rehearse`."""
    # Made when absent, else checked against its recipe (seconds: one maker per tag).
    recipe = local_images.build_recipe("cpu")
    local_images.make(recipe)
    standin = local_images.make(standin_recipe())
    repo, _ = adopted_repository(installed_toolkit, tmp_path)
    fill_in(repo, build_image(recipe.tag))
    # The rehearsal's local index (pypiserver), as the error without it says: the `rehearse` extra.
    installed_toolkit.run("python", "-m", "pip", "install", "--quiet", f"{toolkit_wheel}[rehearse]", cwd=repo)
    # The cpu variant (the workflow_dispatch `variant` input; rocm would need ROCm's build image).
    proc = rehearse(installed_toolkit, repo, work, toolkit_wheel, standin, "--variant", "cpu")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    rows = table(proc.stdout)
    for job in ("plan", "build cpu-x86_64", f"smoke {CP}-cpu-manylinux_x86_64",
                f"resolution {PY}", "publish to PyPI", "GitHub Release"):  # fmt: skip
        assert rows[job][1] == "success", (job, rows)
    assert rows["start the hardware tests"][1] == "skipped"  # no hardware tier yet
    assert not [job for job in rows if "rocm-manylinux" in job]
    # Every job installed the toolkit wheel in place of the pinned requirement, at its lowest pins,
    # read from the wheel's METADATA (the adopter's pyproject.toml declares no dependency).
    pinned = requirement()
    assert f'TOOLKIT: "{pinned}"' in (repo / ".github" / "workflows" / "release.yml").read_text()
    assert f"pip install {toolkit_wheel.name} (--toolkit, in place of {pinned})" in proc.stdout
    build = "build-cpu-x86_64"
    pins = (work / "jobs" / build / "files" / "lowest-pins.txt").read_text(encoding="utf-8")
    assert re.search(r"^auditwheel==\d", pins, re.M), pins
    # The container build installed the same wheel (no index holds it) to repair with.
    log = (work / "logs" / f"{build}.log").read_text(encoding="utf-8")
    assert f"{{project}}/{toolkit_wheel.name}" in log or f"/project/{toolkit_wheel.name}" in log, log[-3000:]
    # Published to the local index, and what a user installs from it runs.
    packages = work / "index" / "packages"
    (wheel,) = (p.name for p in packages.iterdir())
    assert re.fullmatch(rf"ringlet_cpu-0\.1\.0-{CP}-{CP}-\S*manylinux\S*_x86_64\.whl", wheel), wheel
    release = work / "github" / "releases" / "local" / "rehearsal" / TAG
    assert {wheel, f"{wheel}.verify.json"} <= {p.name for p in release.iterdir()}
    user = tmp_path / "user-venv"
    interpreter = find_interpreter(PY)
    assert interpreter is not None
    fresh_venv(interpreter, user)
    subprocess.run(
        [str(user / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index", "--find-links",
         str(packages), "ringlet-cpu==0.1.0"],
        check=True, env={**user_env(), "PIP_CONFIG_FILE": os.devnull},
    )  # fmt: skip
    info = subprocess.run([str(user / "bin" / "ringlet-info")], capture_output=True, text=True, check=True)
    assert json.loads(info.stdout) == {"ok": True, "capacity": 4096}

    # hardware.yml at the tag, once the maintainer adds a serving image and a tier: this machine
    # stands in for the MI300X runner, the rehearsal's GitHub Release for the tag's, the vLLM
    # stand-in for the serving image; the leg runs up to the device step, which reports a skip
    # with the engine's reason.
    fill_in(repo, serving_image_and_tier())
    hardware = work.parent / "hardware"
    proc = rehearse(
        installed_toolkit, repo, hardware, toolkit_wheel, standin,
        "--workflow", str(repo / ".github" / "workflows" / "hardware.yml"), "--release-assets", str(release),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    leg = f"{CP}-cpu-{IMAGE}-{TIER}"
    ran = {job: row[1] for job, row in table(proc.stdout).items() if row[1] != "skipped"}
    assert ran == {"plan": "success", leg: "success"}  # no two-node tier: prefill and decode skipped
    text = (hardware / "logs" / f"{leg}.log").read_text(encoding="utf-8")
    assert "matches; releasable" in text  # the wheel release.yml published, from its GitHub Release
    assert f"{standin} stands in for " in text
    skipped = r"selftest \(single\)\s+skip\s+device: no GPU \(ringlet has no GPU transport\)"
    assert re.search(skipped, text), text[-3000:]
