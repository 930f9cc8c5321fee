"""`release rehearse` for real: release.yml's jobs run here in order, build/smoke/publish as the
unprivileged `runner` user, cibuildwheel under podman in a local build image, the upload to a
pypiserver on 127.0.0.1 and the GitHub Release to the `gh` stand-in.

One Python (3.12) and the cpu variant keep the passing rehearsal to a few minutes once the local
build image exists (the first run makes it from Debian packages). The failing rehearsals stop
early: a broken before-all fails the build job, and the jobs after it are skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from release.build.toolchain import container_engine
from release.environment import in_ci

from .conftest import LocalImages

ROOT = Path(__file__).resolve().parents[2]
PYTHON = "3.12"
FLOOR = "manylinux_2_35_x86_64"  # what the Debian 12 build image honestly allows (GLIBCXX_3.4.30)
LOCAL_FLOOR = "manylinux_2_39_x86_64"  # what matrix.yaml's Debian trixie build images allow
BUILD_IMAGE = {"local": "localhost/rehearse-build-cpu", "debian": {"suite": "bookworm", "gcc": "suite"}}
"""Debian 12 (glibc 2.36) with its own GCC 12: bookworm carries no gcc-14."""
PARTS = ("pyproject.toml", "README.md", "release", "packaging", "scripts", "engine", ".github")

pytestmark = pytest.mark.integration
if container_engine() is None:
    if in_ci():
        pytest.fail("podman is not working here: .ci/run must install it (scripts/setup-podman.sh)")
    pytest.skip("no podman or docker answers (run scripts/setup-podman.sh)", allow_module_level=True)


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
    floor: str = FLOOR,
) -> Path:
    """A repository like ours (toolkit, engine, workflows) whose matrix holds `variants`."""
    real_repo(directory)
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["python"] = [PYTHON]
    data["platform"]["floor"] = floor
    data["variants"] = variants
    if not set((data.get("variant_wheels") or {}).get("variants", ())) <= set(variants):
        data.pop("variant_wheels")  # a variant set is made of each of its variants
    data["images"] = images or {}
    data["hardware"] = {}
    (directory / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return directory


def cpu(**extra: Any) -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))["variants"]["cpu"]
    return {**data, "images": [], "build_image": BUILD_IMAGE, **extra}


def rehearse(repo: Path, work: Path, *args: str, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "release", "--matrix", str(repo / "matrix.yaml"), "rehearse",
         "--tag", "v0.2.0", "--work", str(work), *args],
        cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)}, text=True, capture_output=True,
        timeout=timeout, check=False,
    )  # fmt: skip
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    return proc


def table(stdout: str) -> dict[str, tuple[str, str, int]]:
    """job -> (runs as, status, seconds), from the job table."""
    rows = {}
    for line in stdout.splitlines():
        match = re.fullmatch(r"(\S.*?)\s{2,}(\S.*?)\s{2,}(success|failure|skipped)\s+(\d+)", line.rstrip())
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3), int(match.group(4)))
    return rows


@pytest.mark.skipif(os.geteuid() != 0, reason="the local build images are made as root")
@pytest.mark.slow
def test_the_real_matrix_rehearses_through_publish(
    tmp_path: Path, work: Path, local_images: LocalImages
) -> None:
    """matrix.yaml as it is: cpu, cuda (CUDA 13.0 from NVIDIA's PyPI wheels in the local build
    image) and rocm (HIP 7.2) are built, verified, smoke-tested (rocm in all its images, the two
    registry serving images stood in for and named) and published; musa is held back for want of
    MUSA_INSTALLER: the plan job names it with its reason, no job of it runs, and the release
    notes say why; the hardware tests are dispatched.

    Two lines of the jobs' checkout differ, said in the log: one Python (CI time), and the floor
    the local Debian trixie build images honestly allow (glibc 2.41, GCC 14) in place of
    manylinux_2_28, whose image is in a registry. The local images are made from matrix.yaml as it
    is, so they are the ones the rest of the suite uses."""
    musa = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))["variants"]["musa"]
    reason = musa["held_back"]
    assert "MUSA_INSTALLER" in reason
    # Its jobs would make their images one after another as each needs one (a fresh machine has
    # none): made here first, three side by side, the jobs find them up to date (the same recipes).
    local_images.make_all(local_images.matrix_recipes())
    repo = real_repo(tmp_path / "repo")
    proc = rehearse(repo, work, "--python", PYTHON, "--floor", LOCAL_FLOOR, timeout=3000)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    assert f"the jobs' checkout of matrix.yaml: python [{PYTHON}] (--python;" in proc.stdout
    assert f"the jobs' checkout of matrix.yaml: platform.floor {LOCAL_FLOOR} (--floor;" in proc.stdout
    rows = table(proc.stdout)
    assert not [job for job in rows if "musa" in job]  # held back: not a failed job, not a job at all
    py = PYTHON.replace(".", "")
    jobs = ["plan", "publish to PyPI", "GitHub Release", "start the hardware tests"]
    for variant in ("cpu", "cuda", "rocm"):
        jobs += [f"build cp{py}-{variant}-manylinux_x86_64", f"smoke cp{py}-{variant}-manylinux_x86_64"]
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    registry = [name for name in data["variants"]["rocm"]["images"] if data["images"][name].get("container")]
    # smoke-image: the registry images that hold this Python (SGLang's ROCm 7.2.0 image is 3.10 only)
    elsewhere = [name for name in registry if PYTHON not in data["images"][name].get("python", [PYTHON])]
    assert elsewhere == ["sglang-rocm"]
    registry = [name for name in registry if name not in elsewhere]
    jobs += [f"smoke cp{py}-rocm-{name}" for name in registry]
    assert not [job for job in rows if any(name in job for name in elsewhere)]
    jobs += [f"resolution {PYTHON}"]
    for job in jobs:
        assert rows[job][1] == "success", (job, rows)
    # The images made here ran in the rocm smoke job; each registry image ran as its stand-in, named.
    smoke_log = (work / "logs" / f"smoke-cp{py}-rocm-manylinux_x86_64.log").read_text(encoding="utf-8")
    for name in data["variants"]["rocm"]["images"]:
        if name not in registry and name not in elsewhere:
            assert f"localhost/xfer-smoke-{name}" in smoke_log, name
    # Each image's layout: the runtime loaded from where the image puts it, or the import refused in
    # the guard's own words, naming .so.7 (no runtime at all; ROCm 6.4's libamdhip64.so.6 only).
    located = {
        "rocm-distro": "/usr/lib/x86_64-linux-gnu/libamdhip64.so.7",
        "rocm-opt-prefix": "/opt/rocm-7.2.4/lib/libamdhip64.so.7",
        "rocm-ld-library-path": "/opt/rocm/lib/libamdhip64.so.7",
    }
    for name, where in located.items():
        assert re.search(
            rf"^\[{PYTHON} {name}\] runtime location \.\.\. ok .*: {re.escape(where)}", smoke_log, re.M
        )
    for name in ("rocm-absent", "rocm6-only"):
        refused = rf"^\[{PYTHON} {name}\] import xfer refused \.\.\. ok .*needs libamdhip64\.so\.7 \("
        assert re.search(refused, smoke_log, re.M), name
    for name in registry:
        log = (work / "logs" / f"smoke-cp{py}-rocm-{name}.log").read_text(encoding="utf-8")
        assert f"stand-in for {data['images'][name]['container']}" in log, name
    # Before publishing: the installs a user would type, the variant set included.
    resolution = (work / "logs" / f"resolution-{PYTHON}.log").read_text(encoding="utf-8")
    assert re.search(r"^\d+ installs, 1 Python\(s\), \d index setup\(s\): all right$", resolution, re.M)
    assert re.search(
        rf"PASS +per-name +{PYTHON} +uv install xfer-engine-rocm: .*binds libamdhip64\.so\.7", resolution
    )
    assert re.search(r"PASS +variants .*\[cu130\] \(binds libcudart\.so\.13\)", resolution), resolution[
        -3000:
    ]
    assert "Upload with trusted publishing: twine upload dist/* to http://127.0.0.1:" in proc.stdout
    packages = {p.name for p in (work / "index" / "packages").iterdir()}
    for distribution in ("xfer_engine_cpu", "xfer_engine", "xfer_engine_rocm"):
        assert f"{distribution}-0.2.0-cp{py}-cp{py}-{LOCAL_FLOOR}.whl" in packages, packages
    assert not [name for name in packages if name.startswith("xfer_engine_musa-")]
    release = work / "github" / "releases" / "local" / "rehearsal" / "v0.2.0"
    wheel = f"xfer_engine-0.2.0-cp{py}-cp{py}-{LOCAL_FLOOR}.whl"
    assert {p.name for p in release.iterdir()} >= {wheel, wheel + ".verify.json"}
    # The job ran release.yml's own line, with the workflow's env, and the lowest pins.
    build = f"build cp{py}-cuda-manylinux_x86_64"
    log = (work / "logs" / f"{build}.log".replace(" ", "-")).read_text(encoding="utf-8")
    assert '$ python -m release build --variant "$VARIANT" --python "$PYTHON" --tag "$TAG" --container' in log
    assert "binds libcudart.so.13" in log
    pins = (work / "jobs" / build.replace(" ", "-") / "files" / "lowest-pins.txt").read_text(encoding="utf-8")
    assert re.search(r"^auditwheel==\d", pins, re.M)
    publish_log = (work / "logs" / "publish-to-PyPI.log").read_text(encoding="utf-8")
    assert "release-checks" in publish_log
    assert f"held back (not expected, not released): musa: {reason}" in publish_log
    plan_log = (work / "logs" / "plan.log").read_text(encoding="utf-8")
    assert f"held back (not released): musa (xfer-engine-musa): {reason}" in plan_log
    calls = (work / "github" / "calls.jsonl").read_text(encoding="utf-8")
    words = [word for line in calls.splitlines() for word in json.loads(line)]
    assert f"- `xfer-engine-musa` (musa): {reason}" in "\n".join(words)
    assert "hardware.yml" in words  # the hardware tests dispatched at the tag
    # The tables the jobs wrote to $GITHUB_STEP_SUMMARY, as GitHub shows them on the run's page.
    summary = (work / "summary.md").read_text(encoding="utf-8")
    assert "## plan" in summary and "#### Held back: not released" in summary
    assert "#### Release-day checks of v0.2.0" in summary and "| --- |" in summary


@pytest.mark.slow
def test_a_broken_before_all_fails_the_build_job_and_skips_the_rest(tmp_path: Path, work: Path) -> None:
    """A MUSA variant whose before-all (install-musa.sh with the declared toolkit) cannot install
    anything in the build image: the build job fails, as on GitHub, and publishing never starts."""
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))["variants"]["musa"]
    data.pop("held_back")  # matrix.yaml holds musa back; here its build runs, as it would on GitHub
    musa = {**data, "build_image": {"local": BUILD_IMAGE["local"]}}
    repo = make_repo(tmp_path / "repo", {"musa": musa})
    proc = rehearse(repo, work, "--latest")
    assert proc.returncode != 0
    build = f"build cp{PYTHON.replace('.', '')}-musa-manylinux_x86_64"
    rows = table(proc.stdout)
    assert rows[build][1] == "failure"
    assert rows["publish to PyPI"][1] == "skipped"
    assert f"{build}: step 'Build in the manylinux image" in proc.stderr
    log = (work / "logs" / f"{build.replace(' ', '-')}.log").read_text(encoding="utf-8")
    assert "install-musa.sh" in log
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_smoke_that_needs_root_fails_as_the_runner_user(tmp_path: Path, work: Path) -> None:
    """The cpu wheel's clean-minbase image is a simulation (mount namespaces, chroot). As the runner
    user, with user namespaces switched off (RELEASE_SMOKE_NO_USERNS=1, as on a runner that
    restricts them) and no sudo, it cannot run: the smoke job fails, as it would on GitHub, and
    nothing is published."""
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    minbase = {k: v for k, v in data["images"]["clean-minbase"].items() if k != "debian"}  # simulated
    images = {"clean-minbase": minbase}
    repo = make_repo(tmp_path / "repo", {"cpu": cpu(images=["clean-minbase"])}, images)
    proc = rehearse(repo, work, "--latest", "--env", "RELEASE_SMOKE_NO_USERNS=1")
    assert proc.returncode != 0
    rows = table(proc.stdout)
    smoke = f"smoke cp{PYTHON.replace('.', '')}-cpu-manylinux_x86_64"
    assert rows[f"build cp{PYTHON.replace('.', '')}-cpu-manylinux_x86_64"][1] == "success"
    assert rows[smoke][1] == "failure"
    assert rows["publish to PyPI"][1] == "skipped"
    assert f"{smoke}: step 'Fresh venv, import, master binary" in proc.stderr
    log = (work / "logs" / f"{smoke.replace(' ', '-')}.log").read_text(encoding="utf-8")
    assert "root" in log


@pytest.mark.skipif(os.geteuid() != 0, reason="the local ROCm build image is made as root")
@pytest.mark.slow
def test_a_too_low_auditwheel_bound_fails_the_rehearsal(tmp_path: Path, work: Path) -> None:
    """auditwheel 6.1.0 takes `--exclude` literally (no wildcards): with the toolkit's lower bound
    at 6.1.0 the lowest-pins install repairs with it, the ROCm runtime is vendored, and verify's
    vendored-runtime rule fails the build job."""
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))["variants"]["rocm"]
    # Debian 12's HIP 5.2 (auditwheel 6.1.0 knows no policy past manylinux_2_39, so a trixie image,
    # glibc 2.41, would be refused before the repair): Debian 12 meets manylinux_2_36, and the
    # repair takes that floor at once.
    recipe = {"suite": "bookworm", "gcc": "suite", "packages": ["libamdhip64-dev"]}
    rocm = {
        **data,
        "toolkit": "5.2",
        "images": [],
        "hardware": [],
        "build_image": {"local": "localhost/rehearse-build-rocm", "debian": recipe},
    }
    repo = make_repo(tmp_path / "repo", {"rocm": rocm}, floor="manylinux_2_36_x86_64")
    pyproject = repo / "pyproject.toml"
    text = re.sub(r'"auditwheel>=[^"]*"', '"auditwheel>=6.1.0"', pyproject.read_text(encoding="utf-8"))
    pyproject.write_text(text, encoding="utf-8")
    proc = rehearse(repo, work)
    assert proc.returncode != 0
    build = f"build cp{PYTHON.replace('.', '')}-rocm-manylinux_x86_64"
    assert table(proc.stdout)[build][1] == "failure"
    log = (work / "logs" / f"{build.replace(' ', '-')}.log").read_text(encoding="utf-8")
    assert "auditwheel==6.1.0" in (
        work / "jobs" / build.replace(" ", "-") / "files" / "lowest-pins.txt"
    ).read_text(encoding="utf-8")
    assert "vendored-runtime" in log
