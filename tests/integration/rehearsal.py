"""What the `release rehearse` tests share: a copy of this repository (its matrix as it is, or one
holding only the variants a test names), the toolkit's `rehearse` run against it, and the job
table it prints. The tests are test_rehearse.py (the real matrix through publish),
test_rehearse_second_build.py (the same tag's second builds and registry-image smoke jobs, over the
same wheels, which the run's store shares) and test_rehearse_failures.py (rehearsals that must fail,
and where), in files of their own so that xdist hands them to different workers."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from release.config.machines import machine_of_tag
from release.config.matrix import load
from release.machine.containers import ContainerEngine
from release.plan.steps import make_plan
from release.settings import in_ci
from tests import ci_time

from .conftest import one_machine

ROOT = Path(__file__).resolve().parents[2]
PYTHON = "3.12"
LOCAL_FLOOR = "manylinux_2_39_x86_64"  # what matrix.yaml's Debian trixie build images allow
NARROW = ("--python", PYTHON, "--floor", LOCAL_FLOOR)
"""The jobs' checkout: one Python (CI time) and the floor the local trixie build images honestly
allow (glibc 2.41, GCC 14) in place of manylinux_2_28, whose image is in a registry."""
PARTS = ("pyproject.toml", "README.md", "release", "packaging", "scripts", "engine", ".github")


def need_podman() -> None:
    """Skip the calling test module where no container engine answers (fail under CI, which must
    have installed podman)."""
    if ContainerEngine.answering() is None:
        if in_ci():
            pytest.fail("podman is not working here: .ci/run must install it (scripts/setup-podman.sh)")
        pytest.skip("no podman or docker answers (run scripts/setup-podman.sh)", allow_module_level=True)


def matrix_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    return data


def real_repo(directory: Path) -> Path:
    """This repository as it is, matrix.yaml included."""
    for part in (*PARTS, "matrix.yaml"):
        source = ROOT / part
        if source.is_dir():
            shutil.copytree(
                source, directory / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
            )
        else:
            directory.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, directory / part)
    return directory


def make_repo(
    directory: Path,
    variants: dict[str, dict[str, Any]],
    images: dict[str, Any] | None = None,
    *,
    pythons: list[str] | None = None,
    floor: str | None = None,
    machines: tuple[str, ...] = ("x86_64",),
    variant_wheels: dict[str, Any] | None = None,
    hardware: dict[str, Any] | None = None,
) -> Path:
    """A repository like ours (toolkit, engine, workflows) whose matrix holds `variants`. Its
    Pythons and floor stay matrix.yaml's unless given: a rehearsal narrows them for its jobs with
    `NARROW`, and the local images stay the ones the real matrix makes. Its machines are x86_64's
    alone unless given (an aarch64 job here runs only Debian's Python under emulation); no hardware
    tiers unless given."""
    real_repo(directory)
    data = matrix_data()
    if pythons is not None:
        data["python"] = pythons
    if floor is not None:
        data["platform"]["floor"] = floor
    if floor is not None and machine_of_tag(floor) is not None:  # one machine's tag: its alone
        one_machine(data)
    else:
        data["platform"]["architectures"] = list(machines)
    data["variants"] = variants
    if variant_wheels is not None:
        data["variant_wheels"] = variant_wheels
    elif not set((data.get("variant_wheels") or {}).get("variants", ())) <= set(variants):
        data.pop("variant_wheels")  # a variant set is made of each of its variants
    data["images"] = images or {}
    data["hardware"] = hardware or {}
    # Lists of scalars in flow style (`python: ["3.10", ...]` on one line, which --python narrows).
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=1000)
    (directory / "matrix.yaml").write_text(text, encoding="utf-8")
    return directory


def cpu_build_image() -> dict[str, Any]:
    """matrix.yaml's cpu build image under the tag it gets there (`localhost/xfer-build-cpu`): the
    real matrix's rehearsal and the adopter's use the same image, so a run makes it once."""
    declared: dict[str, Any] = matrix_data()["variants"]["cpu"]["build_image"]
    return {"local": make_plan(load(ROOT / "matrix.yaml")).variant("cpu").build_image.local, **declared}


def cpu(**extra: Any) -> dict[str, Any]:
    data = matrix_data()["variants"]["cpu"]
    return {**data, "images": [], "build_image": cpu_build_image(), **extra}


def rehearse(
    repo: Path, work: Path, *args: str, timeout: float = 1500, store: bool = True
) -> subprocess.CompletedProcess[str]:
    """`release rehearse` of `repo`'s matrix. With `store`, its jobs' builds take the wheels the run's
    store holds from the same inputs and put there what they build (tests/ci_time.py `store_env`;
    a test about building or failing to build passes False)."""
    shared = [f"--env={k}={v}" for k, v in ci_time.store_env().items()] if store else []
    proc = subprocess.run(
        [sys.executable, "-m", "release", "--matrix", str(repo / "matrix.yaml"), "rehearse",
         "--tag", "v0.2.0", "--work", str(work), *shared, *args],
        cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)}, text=True, capture_output=True,
        timeout=timeout, check=False,
    )  # fmt: skip
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    return proc


REAL_MATRIX_JOBS = {
    "publish": ("plan", "build", "smoke", "check-resolution", "publish-pypi", "github-release", "hardware"),
    "second build": ("plan", "build", "second-build", "smoke-image"),
}
"""release.yml's jobs, in two rehearsals of the real matrix (`--job`) that xdist runs side by side:
each builds every variant, the wheels compiled once through the run's store (the second to ask
waits on the key's lock and takes the first's). Together they are every job of release.yml."""


def real_matrix_rehearsal(tmp_path: Path, work: Path, part: str) -> subprocess.CompletedProcess[str]:
    """The real matrix's rehearsal, its jobs those of `part` (REAL_MATRIX_JOBS), passed."""
    jobs = [word for job in REAL_MATRIX_JOBS[part] for word in ("--job", job)]
    proc = rehearse(real_repo(tmp_path / "repo"), work, *NARROW, "--arch", "x86_64", *jobs, timeout=3000)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    return proc


def rocm_registry_images() -> tuple[list[str], list[str], list[str]]:
    """matrix.yaml's rocm images that name a registry container, as (smoke-image runs it here as its
    stand-in, elsewhere: none of them holds PYTHON, awaiting: declared by tag, pin: probe, no job
    runs in them)."""
    data = matrix_data()
    registry = [name for name in data["variants"]["rocm"]["images"] if data["images"][name].get("container")]
    awaiting = [name for name in registry if data["images"][name].get("pin") == "probe"]
    registry = [name for name in registry if name not in awaiting]
    elsewhere = [name for name in registry if PYTHON not in data["images"][name].get("python", [PYTHON])]
    return [name for name in registry if name not in elsewhere], elsewhere, awaiting


def table(stdout: str) -> dict[str, tuple[str, str, int]]:
    """job -> (runs as, status, seconds), from the job table."""
    rows = {}
    for line in stdout.splitlines():
        match = re.fullmatch(r"(\S.*?)\s{2,}(\S.*?)\s{2,}(success|failure|skipped)\s+(\d+)", line.rstrip())
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3), int(match.group(4)))
    return rows
