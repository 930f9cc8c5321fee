"""The adopter's release is rehearsed with every variant it builds (issue 43): the workflows
`release init --ci github --variants cpu,cuda,rocm` wrote into another project (test_adoption.py's
ringlet, whose CMake `option()`s USE_CUDA and USE_HIP link the CUDA or HIP runtime, in a fresh
repository outside this one, adopted from the toolkit's wheel) run here as this repository's do
(test_rehearse.py), with the installed toolkit's `release rehearse`: cpu, cuda and rocm are built
in their local build images, verified, smoke-tested and published to the local index on 127.0.0.1,
one Python.

The container builds run the backend's `bash scripts/install-X.sh` (before-all) from the installed
toolkit's own scripts: before issue 43 only a source tree's were copied, and every GPU variant of
every adopter failed there. The adopter's jobs install the toolkit pinned (`pip install
"$TOOLKIT"`); no index holds this version, so `--toolkit` hands them the wheel the test built (and
the container builds install the same bytes). The maintainer's `yours:` lines are filled in: each
variant builds in the local Debian trixie build image of our own matrix (our recipes under our
tags, which the real-matrix rehearsal and the rest of the suite make: no image of its own here),
the rocm variant is smoke-tested also in our `rocm-distro` image (the HIP runtime where Debian puts
it; the adopter's tag of the same recipe), and later the cpu variant declares our vLLM serving
image and MI300X tier for hardware.yml. ringlet requires torch, which smoke and the builds' import
test leave out (`engine.smoke.requirements.skip`), so neither installs it, and the import test
asks no index. ringlet needs no recent glibc symbol, so its wheels meet the matrix's manylinux_2_28
floor from those images, and this host installs them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from release import requirement
from release.config.matrix import load
from release.config.pythons import python
from release.machine.containers import STANDINS_ENV
from release.machine.interpreters import find_interpreter
from release.plan.resolve import LocalImage
from release.plan.steps import make_plan

from .conftest import ROOT, LocalImages, fresh_venv
from .rehearsal import need_podman, table
from .test_adoption import FILES, PY, TAG, git, needs_tools
from .test_adoption import fresh_repository as ringlet_repository
from .toolkit_install import InstalledToolkit, user_env

pytestmark = [pytest.mark.integration, pytest.mark.container]
need_podman()

CP = f"cp{PY.replace('.', '')}"
IMAGE, TIER = "vllm-rocm", "mi300x"
VARIANTS = ("cpu", "cuda", "rocm")
DISTRIBUTIONS = {"cpu": "ringlet_cpu", "cuda": "ringlet", "rocm": "ringlet_rocm"}
BOUND = {"cpu": [], "cuda": ["libcudart.so.13"], "rocm": ["libamdhip64.so.7"]}
RUNTIME_IMAGE = "rocm-distro"
"""Our matrix's local image with the HIP runtime where Debian installs it: the rocm smoke job runs
ringlet's self-test there against a real libamdhip64.so.7 (this host has none)."""
OURS = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))


def standin_recipe() -> LocalImage:
    """Our matrix's local stand-in for the vLLM ROCm image (test_rehearse_hardware.py's)."""
    image = next(i for i in make_plan(load(ROOT / "matrix.yaml")).variant("rocm").images if i.name == IMAGE)
    assert image.standin is not None
    return image.standin


def gpu_repository(root: Path) -> Path:
    """ringlet for every Python our matrix builds (so its build image recipes are ours exactly)."""
    lowest, text = OURS["python"][0], FILES["pyproject.toml"]
    pyproject = re.sub(r'requires-python = "[^"]*"', f'requires-python = ">={lowest}"', text)
    # torch in Requires-Dist, as real engines have it, which no smoke command imports: left out
    # (engine.smoke.requirements.skip) of smoke and of the container build's import test.
    pyproject = pyproject.replace("requires-python", 'dependencies = ["torch>=2.0"]\nrequires-python')
    return ringlet_repository(root, {**FILES, "pyproject.toml": pyproject})


def edit_matrix(repo: Path, edit: Any, message: str) -> None:
    """The maintainer edits matrix.yaml (`edit(data)`) and commits; lists of scalars stay on one
    line, as init writes them (`python: [...]`, which `rehearse --python` narrows)."""
    matrix = repo / "matrix.yaml"
    data = yaml.safe_load(matrix.read_text(encoding="utf-8"))
    edit(data)
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=1000)
    matrix.write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def fill_in(data: dict[str, Any], images: LocalImages) -> None:
    """The maintainer's `yours:` lines: the toolkits, the local build images (our recipes, under
    our tags), an image with the HIP runtime for rocm, the smoke self-test."""
    # init proposes the GIL Pythons; the free-threaded rows are the maintainer's choice
    assert data["python"] == [v for v in OURS["python"] if not python(v).free_threaded], data["python"]
    data["python"] = list(OURS["python"])  # the maintainer adds the free-threaded rows, as ours has
    for name in VARIANTS:
        variant = data["variants"][name]
        ours = OURS["variants"][name]
        if "toolkit" in ours:
            variant["toolkit"] = ours["toolkit"]
        variant["build_image"] = {"local": images.build_recipe(name).tag, **ours["build_image"]}
    data["variants"]["rocm"]["images"] = [RUNTIME_IMAGE]
    data["images"] = {RUNTIME_IMAGE: OURS["images"][RUNTIME_IMAGE]}
    data["engine"]["smoke"]["commands"] = [["ringlet-info"]]
    data["engine"]["smoke"]["requirements"] = {"skip": ["torch"]}


def serving_image_and_tier(data: dict[str, Any]) -> None:
    """The cpu variant must work in the vLLM ROCm serving image and is tested on the MI300X runners,
    both as our matrix.yaml declares them (its smoke simulates the image with the host's ROCm
    runtime, which a cpu variant has no reason to install: added for hardware.yml alone)."""
    data["variants"]["cpu"]["images"] = [IMAGE]
    data["variants"]["cpu"]["hardware"] = [TIER]
    data["images"][IMAGE] = OURS["images"][IMAGE]
    data["hardware"] = {TIER: OURS["hardware"][TIER]}


def rehearse(
    installed_toolkit: InstalledToolkit, repo: Path, work: Path, toolkit: Path, standin: str, *args: str
) -> subprocess.CompletedProcess[str]:
    container = load(ROOT / "matrix.yaml").matrix.images[IMAGE].container
    proc = installed_toolkit.run(
        "release", "rehearse", "--tag", TAG, "--work", str(work), "--toolkit", str(toolkit), "--python", PY,
        "--env", f"{STANDINS_ENV}={container}={standin}", *args,
        cwd=repo, check=False, timeout=2400,
    )  # fmt: skip
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    return proc


def job_log(work: Path, job: str) -> str:
    return (work / "logs" / f"{job.replace(' ', '-')}.log").read_text(encoding="utf-8")


@needs_tools
@pytest.mark.skipif(PY != "3.12", reason=f"the vLLM image (its stand-in here) holds Python 3.12, not {PY}")
@pytest.mark.skipif(os.geteuid() != 0, reason="the rehearsal's jobs run as the runner user, made as root")
@pytest.mark.slow
def test_the_adopters_release_yml_rehearses_cpu_cuda_and_rocm_through_publish_and_hardware_yml_to_the_device(
    installed_toolkit: InstalledToolkit, toolkit_wheel: Path, local_images: LocalImages, tmp_path: Path,
    work: Path,
) -> None:  # fmt: skip
    """The workflows init wrote, as they are, with the installed toolkit's `release rehearse`."""
    run = installed_toolkit.run
    # Made when absent, else checked against their recipes (seconds: one maker per tag).
    tags = {name: local_images.make(local_images.build_recipe(name)) for name in VARIANTS}
    standin = local_images.make(standin_recipe())
    repo = gpu_repository(tmp_path)
    said = run("release", "init", "--ci", "github", "--variants", ",".join(VARIANTS), cwd=repo).stdout
    assert "src/ringlet/__init__.py: variant guard added" in said, said
    edit_matrix(repo, lambda data: fill_in(data, local_images), "release toolkit, filled in")
    run("release", "plan", cwd=repo)
    # The adopter's rocm-distro is our recipe under the adopter's tag: the same image, tagged.
    # The rehearsal makes it (as root, before the jobs) by tagging ours, which the suite shares.
    ours = local_images.smoke_recipe(RUNTIME_IMAGE)
    (runtime,) = [i.local for i in make_plan(load(repo / "matrix.yaml")).variant("rocm").images if i.local]
    assert runtime == replace(ours, tag=runtime.tag), runtime
    local_images.make(ours)
    # The rehearsal's local index (pypiserver), as the error without it says: the `rehearse` extra.
    run("python", "-m", "pip", "install", "--quiet", f"{toolkit_wheel}[rehearse]", cwd=repo)

    proc = rehearse(installed_toolkit, repo, work, toolkit_wheel, standin)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    rows = table(proc.stdout)
    jobs = ["plan", f"resolution {PY}", "publish to PyPI", "GitHub Release"]
    jobs += [f"build {name}-x86_64" for name in VARIANTS]  # one build job per variant and machine
    kinds = ("second build", "smoke")
    jobs += [f"{kind} {CP}-{name}-manylinux_x86_64" for name in VARIANTS for kind in kinds]
    for job in jobs:
        assert rows[job][1] == "success", (job, rows)
    assert rows["start the hardware tests"][1] == "skipped"  # no hardware tier yet
    # Every job installed the toolkit wheel in place of the pinned requirement, at its lowest pins,
    # read from the wheel's METADATA (the adopter's pyproject.toml declares none of the toolkit's).
    pinned = requirement()
    assert f'TOOLKIT: "{pinned}"' in (repo / ".github" / "workflows" / "release.yml").read_text()
    assert f"pip install {toolkit_wheel.name} (--toolkit, in place of {pinned})" in proc.stdout
    for name, tag in tags.items():
        build = f"build {name}-x86_64"
        files = work / "jobs" / build.replace(" ", "-")
        pins = (files / "files" / "lowest-pins.txt").read_text(encoding="utf-8")
        assert re.search(r"^auditwheel==\d", pins, re.M), pins
        log = job_log(work, build)
        assert f"[{name}] cibuildwheel in {tag} through" in log, log[-4000:]
        # The container build installed the same toolkit wheel (no index holds it) to repair with.
        installed = (f"{{project}}/{toolkit_wheel.name}", f"/project/{toolkit_wheel.name}")
        assert any(path in log for path in installed), log[-3000:]
        # The import test installed the wheel offline, torch left out: nothing came from an index.
        assert log.count("Testing wheel") == 1 and "torch-2" not in log, log[-4000:]
        if name != "cpu":  # before-all ran the installed toolkit's install script
            staged = files / "workspace" / "build" / name / "container"
            assert (staged / "scripts" / f"install-{name}.sh").is_file(), name
    # The images the rest of the suite made, found up to date by the installed toolkit's
    # make-image.sh (the same inputs), the adopter's rocm-distro tagged: the rehearsal made none.
    for tag in [*tags.values(), runtime.tag]:
        assert re.search(
            rf"^\[images\] image {re.escape(tag)}: (up to date, kept|tagged) ", proc.stdout, re.M
        ), tag
    assert not re.search(r"^\[images\] image \S+: made ", proc.stdout, re.M), proc.stdout[:3000]

    # Smoke: torch left out of every leg; the self-test judged where the runtime is, the import
    # refused in the guard's words (naming the runtime) where it is not.
    for name in VARIANTS:
        log = job_log(work, f"smoke {CP}-{name}-manylinux_x86_64")
        installs = re.findall(r"^\[\S+ \S+\] pip install \S+ \.\.\. ok .*$", log, re.M)
        assert installs and all(
            line.endswith(": left out: torch>=2.0 (engine.smoke.requirements.skip)") for line in installs
        ), (name, installs, log[-3000:])
        judged = re.search(rf"^\[{PY} host\] ringlet-info \.\.\. ok", log, re.M)
        refused = re.search(rf"^\[{PY} host\] import ringlet refused \.\.\. ok (.*)$", log, re.M)
        assert judged or (refused and any(so.split(".so")[0] in refused.group(1) for so in BOUND[name])), (
            name,
            log[-3000:],
        )
    rocm = job_log(work, f"smoke {CP}-rocm-manylinux_x86_64")
    assert re.search(rf"^\[{PY} {RUNTIME_IMAGE}\] ringlet-info \.\.\. ok", rocm, re.M), rocm[-3000:]

    # Published to the local index, the whole set, each verified as a release wheel; what a user
    # installs from it runs.
    packages = work / "index" / "packages"
    wheels = {p.name.split("-")[0]: p for p in packages.iterdir()}
    assert sorted(wheels) == sorted(DISTRIBUTIONS.values()), wheels
    release = work / "github" / "releases" / "local" / "rehearsal" / TAG
    assets = {p.name for p in release.iterdir()}
    for name, distribution in DISTRIBUTIONS.items():
        wheel = wheels[distribution]
        named = rf"{distribution}-0\.1\.0-{CP}-{CP}-\S*manylinux\S*_x86_64\.whl"
        assert re.fullmatch(named, wheel.name), wheel
        assert {wheel.name, f"{wheel.name}.verify.json"} <= assets
        report = json.loads((release / f"{wheel.name}.verify.json").read_text(encoding="utf-8"))
        failed = [r for r in report["rules"] if r["status"] == "fail"]
        assert report["ok"] is True and not failed, (name, failed)
        assert report["runtime_bound"] == BOUND[name], (name, report["runtime_bound"])
        again = run("release", "verify", "--variant", name, str(wheel), cwd=repo, check=False)
        assert again.returncode == 0, again.stdout + again.stderr
    user = tmp_path / "user-venv"
    interpreter = find_interpreter(PY)
    assert interpreter is not None
    fresh_venv(interpreter, user)
    subprocess.run(
        [str(user / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
         "--find-links", str(packages), "ringlet-cpu==0.1.0"],
        check=True, env={**user_env(), "PIP_CONFIG_FILE": os.devnull},
    )  # fmt: skip
    info = subprocess.run([str(user / "bin" / "ringlet-info")], capture_output=True, text=True, check=True)
    assert json.loads(info.stdout) == {"ok": True, "capacity": 4096}

    # hardware.yml at the tag, once the maintainer adds a serving image and a tier: this machine
    # stands in for the MI300X runner, the rehearsal's GitHub Release for the tag's, the vLLM
    # stand-in for the serving image; the leg runs up to the device step, which reports a skip
    # with the engine's reason.
    edit_matrix(repo, serving_image_and_tier, "the serving image and the hardware tier")
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
