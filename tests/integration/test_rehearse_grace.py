"""`release rehearse --workflow .github/workflows/hardware.yml` for the Grace tiers (issue 48): the
cuda variant declares GH200 (one node) and GB200 (prefill and decode on two nodes) and no serving
image, so each tier runs a runner leg of the aarch64 wheel in the runner's own Python. This x86_64
machine stands in for the arm64 runners: every leg runs under emulation (`release hardware
--machine aarch64`: qemu-user in the cuda cross image, Debian's aarch64 Python 3.13) up to the
device selftest, which reports a skip; the pair meets through the run's artifacts.

The tag's GitHub Release is the cross-built cp313 aarch64 wheel with its verify report, written in
release mode against the floor the rehearsal narrows the checkout to (the local images' 2_39), as
test_rehearse_machines.py's release of such a set writes it. The matrix is the real one (its
Pythons, its floor), so the build takes the cuda build image the other tests make, not a recipe
of its own; the rehearsal narrows the jobs' checkout to Debian's 3.13, the matrix's newest there,
which the runner legs take.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from release.machine.emulation import DIST_PYTHON, emulation_missing
from tests import ci_time

from .conftest import toolkit
from .rehearsal import LOCAL_FLOOR, make_repo, matrix_data, need_podman, rehearse, table

pytestmark = pytest.mark.integration
need_podman()

GRACE = ("gh200", "gb200-pd")
PY = "cp" + DIST_PYTHON.replace(".", "")
IMAGE = "localhost/xfer-build-cuda-cross-aarch64"
FLOOR = LOCAL_FLOOR.removesuffix("_x86_64")  # a policy, as the narrowed checkout's: each machine its tag


@pytest.mark.slow
def test_the_grace_runner_legs_rehearse_up_to_the_device_under_emulation(tmp_path: Path, work: Path) -> None:
    missing = emulation_missing("aarch64")
    assert missing == "", missing  # .ci/run registers qemu-user-static's aarch64 entry
    declared = matrix_data()
    assert declared["variants"]["cuda"]["hardware"] == list(GRACE)  # the real matrix's Grace tiers
    cuda = {**declared["variants"]["cuda"], "images": []}
    repo = make_repo(
        tmp_path / "repo", {"cuda": cuda}, machines=("x86_64", "aarch64"),
        hardware={tier: declared["hardware"][tier] for tier in GRACE},
    )  # fmt: skip
    release = tmp_path / "release"
    toolkit(
        "--matrix", str(repo / "matrix.yaml"), "build", "--variant", "cuda", "--arch", "aarch64",
        "--python", DIST_PYTHON, "--tag", "v0.2.0", "--wheelhouse", str(release), timeout=1800,
        env=ci_time.store_env(),  # the wheel test_rehearse_machines.py's job builds, where the same
    )  # fmt: skip
    # The release's report, as the rehearsal's narrowed checkout verifies it (--floor: the local
    # image's manylinux_2_39 in place of manylinux_2_28, whose image is in a registry).
    local = repo / "matrix-local-floor.yaml"
    text = (repo / "matrix.yaml").read_text(encoding="utf-8")
    local.write_text(text.replace("floor: manylinux_2_28", f"floor: {FLOOR}", 1), encoding="utf-8")
    toolkit(
        "--matrix", str(local), "verify", "--release", "--full", "--write-reports", "--variant", "cuda",
        "--version", "v0.2.0", str(release / "cuda"),
    )  # fmt: skip
    proc = rehearse(
        repo, work, "--workflow", str(repo / ".github" / "workflows" / "hardware.yml"),
        "--release-assets", str(release), "--python", DIST_PYTHON, "--floor", LOCAL_FLOOR, timeout=1500,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    single, pair = f"{PY}-cuda-runner-gh200", f"{PY}-cuda-runner-gb200-pd"
    ran = {job: row[1] for job, row in table(proc.stdout).items()}
    assert ran == dict.fromkeys(["plan", single, f"{pair} prefill", f"{pair} decode"], "success"), ran
    set_up = f"The leg's Python (a runner leg; a serving image has its own): Python {DIST_PYTHON}: "
    assert proc.stdout.count(set_up) == 3, proc.stdout[-4000:]  # on each runner, before the leg
    for job, role in ((single, "single"), (f"{pair} prefill", "prefill"), (f"{pair} decode", "decode")):
        text = (work / "logs" / f"{job.replace(' ', '-')}.log").read_text(encoding="utf-8")
        assert f"aarch64 wheel on this x86_64 machine: qemu-user in {IMAGE}" in text, text[-3000:]
        assert re.search(rf"selftest \({role}\)\s+skip\s+device: no GPU \(.+\)", text), text[-3000:]
        assert "xfer-master --version  pass" in text and "matches; releasable" in text
    calls = [json.loads(line) for line in (work / "github" / "calls.jsonl").read_text().splitlines()]
    downloads = [c for c in calls if c[:2] == ["release", "download"]]
    assert len(downloads) == 3 and all(f"xfer_engine-*-{PY}-{PY}-*_aarch64.whl" in c for c in downloads)
    artifacts = work / "github" / "runs" / "1" / "artifacts"
    address = json.loads((artifacts / f"{pair}-address" / "address.json").read_text())
    assert re.fullmatch(r"[\d.]+:\d+", address["master"])
    record = work / "jobs" / f"{pair}-prefill" / "workspace" / "out" / "address.json.leg.json"
    served = next(c for c in json.loads(record.read_text())["checks"] if c["step"] == "selftest (prefill)")
    assert served["status"] == "skip" and served["data"]["received"]["verified"]
