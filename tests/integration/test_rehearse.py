"""`release rehearse` for real on matrix.yaml as it is: release.yml's jobs run here in order,
build/smoke/publish as the unprivileged `runner` user, cibuildwheel under podman in the local build
images, the upload to a pypiserver on 127.0.0.1 and the GitHub Release to the `gh` stand-in.

The tag's second builds and registry-image smoke jobs are test_rehearse_second_build.py's, a
rehearsal of the same tag over the same wheels (the run's store) that another xdist worker runs
beside this one; the rehearsals that must fail are in test_rehearse_failures.py.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from release.rehearse import workflow

from .conftest import LocalImages
from .rehearsal import (
    LOCAL_FLOOR,
    PYTHON,
    REAL_MATRIX_JOBS,
    ROOT,
    matrix_data,
    need_podman,
    real_matrix_rehearsal,
    rocm_registry_images,
    table,
)

pytestmark = pytest.mark.integration
need_podman()


def test_the_two_real_matrix_rehearsals_are_every_job_of_release_yml() -> None:
    """What this file's rehearsal leaves out, test_rehearse_second_build.py's runs: no job of
    release.yml goes unrehearsed (a job added to it must be given to one of them)."""
    flow = workflow.load(ROOT / ".github" / "workflows" / "release.yml")
    parts = REAL_MATRIX_JOBS.values()
    assert set().union(*parts) == set(flow.jobs)
    assert set.intersection(*(set(part) for part in parts)) == {"plan", "build"}


@pytest.mark.skipif(os.geteuid() != 0, reason="the local build images are made as root")
@pytest.mark.slow
def test_the_real_matrix_rehearses_through_publish(
    tmp_path: Path, work: Path, local_images: LocalImages
) -> None:
    """matrix.yaml as it is: cpu, cuda (CUDA 13.0 from NVIDIA's PyPI wheels in the local build
    image) and rocm (HIP 7.2) are built, verified, smoke-tested (rocm in all its local images) and
    published; musa is held back for want of MUSA_INSTALLER: the plan job names it with its
    reason, no job of it runs, and the release notes say why; the hardware tests are dispatched.
    The second builds and the registry images' smoke jobs run in test_rehearse_second_build.py
    (`--job` leaves them out here: skipped, not failed, so publishing goes on as on GitHub).

    Lines of the jobs' checkout differ, each said in the log: one Python (CI time), the floor
    the local Debian trixie build images honestly allow (glibc 2.41, GCC 14) in place of
    manylinux_2_28, whose image is in a registry, and x86_64 alone (with it the cuda variant's
    hardware list loses the Grace tiers): no aarch64 Python 3.12 runs here, even under emulation.
    The local images are made from matrix.yaml as it is, so they are the ones the rest of the
    suite uses."""
    data = matrix_data()
    reason = data["variants"]["musa"]["held_back"]
    assert "MUSA_INSTALLER" in reason
    # Its jobs would make their images one after another as each needs one (a fresh machine has
    # none): made here first, three side by side, the jobs find them up to date (the same recipes).
    local_images.make_all(local_images.matrix_recipes())
    proc = real_matrix_rehearsal(tmp_path, work, "publish")
    # matrix.yaml's aarch64 wheels: their jobs are test_rehearse_machines.py's (Debian's Python
    # under emulation, which has no 3.12), and their Grace tiers go with them
    assert "the jobs' checkout of matrix.yaml: platform.architectures [x86_64] (--arch;" in proc.stdout
    assert "variants' hardware without gb200-pd, gh200 (--arch" in proc.stdout
    assert not [job for job in table(proc.stdout) if "aarch64" in job]
    assert f"the jobs' checkout of matrix.yaml: python [{PYTHON}] (--python;" in proc.stdout
    policy = LOCAL_FLOOR.removesuffix("_x86_64")  # matrix.yaml's floor is a policy: so is the narrowed one
    assert (
        f"the jobs' checkout of matrix.yaml: platform.floor {policy} (--floor {LOCAL_FLOOR}: a policy"
        in proc.stdout
    )
    rows = table(proc.stdout)
    assert not [job for job in rows if "musa" in job]  # held back: not a failed job, not a job at all
    py = PYTHON.replace(".", "")
    jobs = ["plan", "publish to PyPI", "GitHub Release", "start the hardware tests"]
    for variant in ("cpu", "cuda", "rocm"):
        jobs += [f"build {variant}-x86_64", f"smoke cp{py}-{variant}-manylinux_x86_64"]  # a job per variant
    jobs += [f"resolution {PYTHON}"]
    registry, elsewhere, awaiting = rocm_registry_images()
    for job in jobs:
        assert rows[job][1] == "success", (job, rows)
    # The jobs test_rehearse_second_build.py runs: left out here, as a job whose if: is false.
    for job in ("second-build", "smoke-image"):
        assert [row[1] for name, row in rows.items() if name.startswith(f"{job} (every ")] == ["skipped"], (
            rows
        )
        assert re.search(rf"^\[\d+/\d+\] {job}: skipped \(not among --job\)$", proc.stdout, re.M), job
    assert not [job for job in rows if any(name in job for name in registry)]
    # The images made here ran in the rocm smoke job; the registry images are smoke-image's.
    smoke_log = (work / "logs" / f"smoke-cp{py}-rocm-manylinux_x86_64.log").read_text(encoding="utf-8")
    for name in data["variants"]["rocm"]["images"]:
        if name not in registry and name not in elsewhere and name not in awaiting:
            assert f"localhost/xfer-smoke-{name}" in smoke_log, name
    # Each image's layout: the runtime loaded from where the image puts it, or the import refused in
    # the guard's own words, naming .so.7 (no runtime at all; ROCm 6.4's libamdhip64.so.6 only).
    located = {
        "rocm-distro": "/usr/lib/x86_64-linux-gnu/libamdhip64.so.7",
        "rocm-opt-prefix": "/opt/rocm-7.2.4/lib/libamdhip64.so.7",
        "rocm-ld-library-path": "/opt/rocm/lib/libamdhip64.so.7",
        # TheRock's layouts: off the loader's path, found by the import (rocm_sdk; core-X/lib)
        "therock-pip": f"/opt/venv/lib/python{PYTHON}/site-packages/_rocm_sdk_core_10_0_0/lib/"
        "libamdhip64.so.7",
        "therock-os": "/opt/rocm/core-10.0/lib/libamdhip64.so.7",
    }
    for order in ("import torch then import xfer", "import xfer then import torch"):
        assert re.search(rf"^\[{PYTHON} therock-pip\] {order} \.\.\. ok", smoke_log, re.M), order
    for name, where in located.items():
        assert re.search(
            rf"^\[{PYTHON} {name}\] runtime location \.\.\. ok .*: {re.escape(where)}", smoke_log, re.M
        )
    for name in ("rocm-absent", "rocm6-only"):
        refused = rf"^\[{PYTHON} {name}\] import xfer refused \.\.\. ok .*needs libamdhip64\.so\.7 \("
        assert re.search(refused, smoke_log, re.M), name
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
    build = "build cuda-x86_64"
    log = (work / "logs" / f"{build}.log".replace(" ", "-")).read_text(encoding="utf-8")
    line = '$ python -m release build --variant "$VARIANT" --arch "$ARCH" --tag "$TAG"'
    assert line + " --container" in log
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
