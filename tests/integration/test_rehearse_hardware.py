"""`release rehearse --workflow .github/workflows/hardware.yml --tag v0.2.0` for real: the plan
job, one single-node leg and one prefill/decode pair, with this machine standing in for the
self-hosted GPU runners, the `gh` stand-in for the GitHub Release and this run's artifacts, and
the local vLLM stand-in image for the serving image no registry gives here.

The matrix is trimmed, and says so: the cpu variant (a host build of one Python takes about a
minute; a ROCm wheel would need the ROCm build image) declares the vllm-rocm serving image and
two tiers of the real hardware section (MI300X single node, the MI350X two-node tier). Without a
GPU every leg runs up to the engine's device selftest, which must report a skip with its reason.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from release.config.matrix import load
from release.machine.containers import ContainerEngine
from release.machine.images import ensure, exists
from release.plan.steps import make_plan
from release.settings import in_ci
from tests import ci_time

from .conftest import HOST_FLOOR, PRESENT_PYTHONS, ROOT, one_machine, toolkit

pytestmark = pytest.mark.integration
ENGINE = ContainerEngine.answering()
if ENGINE is None:
    if in_ci():
        pytest.fail("podman is not working here: .ci/run must install it (scripts/setup-podman.sh)")
    pytest.skip("no podman or docker answers (run scripts/setup-podman.sh)", allow_module_level=True)
if "3.12" not in PRESENT_PYTHONS:
    pytest.skip("the vllm-rocm image declares Python 3.12, which is not here", allow_module_level=True)

PARTS = ("pyproject.toml", "README.md", "release", "packaging", "scripts", "engine", ".github")
IMAGE = "vllm-rocm"
TIERS = ("mi300x", "mi350x-pd")
SINGLE = f"cp312-cpu-{IMAGE}-mi300x"
PAIR = f"cp312-cpu-{IMAGE}-mi350x-pd"


@pytest.fixture(scope="module")
def standin() -> str:
    """The local image that stands in for the vLLM ROCm image (made when absent, as root)."""
    plan = make_plan(load(ROOT / "matrix.yaml"))
    image = next(i for i in plan.variant("rocm").images if i.name == IMAGE)
    assert image.standin is not None and ENGINE is not None
    if not exists(ENGINE, image.standin.tag):
        if os.geteuid() != 0:
            pytest.skip(f"{image.standin.tag} is absent and only root makes it")
        ensure(ENGINE, image.standin, log=print)
    return image.standin.tag


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Our repository with the trimmed matrix, and the cpu wheel of v0.2.0 built here."""
    directory = tmp_path_factory.mktemp("hardware-repo") / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for part in PARTS:
        source = ROOT / part
        if source.is_dir():
            shutil.copytree(source, directory / part, ignore=ignore)
        else:
            directory.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, directory / part)
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["python"] = ["3.12"]
    data["platform"]["floor"] = HOST_FLOOR  # what a host build honestly meets: releasable
    one_machine(data)
    data["variants"] = {"cpu": {**data["variants"]["cpu"], "images": [IMAGE], "hardware": list(TIERS)}}
    data["images"] = {IMAGE: data["images"][IMAGE]}
    data["hardware"] = {name: data["hardware"][name] for name in TIERS}
    (directory / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    matrix = str(directory / "matrix.yaml")
    wheelhouse = str(directory / "wheelhouse")
    toolkit("--matrix", matrix, "build", "--variant", "cpu", "--tag", "v0.2.0", "--wheelhouse", wheelhouse,
            timeout=900, env=ci_time.store_env())  # fmt: skip
    return directory


def rehearse(repo: Path, work: Path, assets: Path, standin: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "release", "--matrix", str(repo / "matrix.yaml"), "rehearse",
         "--workflow", str(repo / ".github" / "workflows" / "hardware.yml"), "--tag", "v0.2.0",
         "--work", str(work), "--release-assets", str(assets),
         "--env", f"RELEASE_IMAGE_STANDINS={data_container()}={standin}"],
        cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)}, text=True, capture_output=True,
        timeout=1500, check=False,
    )  # fmt: skip
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    return proc


def data_container() -> str:
    reference = load(ROOT / "matrix.yaml").matrix.images[IMAGE].container
    assert reference is not None
    return reference


def table(stdout: str) -> dict[str, str]:
    rows = {}
    for line in stdout.splitlines():
        match = re.fullmatch(r"(\S.*?)\s{2,}(\S.*?)\s{2,}(success|failure|skipped)\s+(\d+)", line.rstrip())
        if match:
            rows[match.group(1)] = match.group(3)
    return rows


def log(work: Path, job: str) -> str:
    return (work / "logs" / f"{job.replace(' ', '-')}.log").read_text(encoding="utf-8")


@pytest.mark.slow
def test_hardware_yml_rehearses_every_leg_up_to_the_skipped_device_selftest(
    repo: Path, work: Path, standin: str
) -> None:
    proc = rehearse(repo, work, repo / "wheelhouse", standin)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    rows = table(proc.stdout)
    assert rows == {
        "plan": "success", SINGLE: "success", f"{PAIR} prefill": "success", f"{PAIR} decode": "success"
    }  # fmt: skip
    assert "prefill, decode: run at the same time" in proc.stdout
    # hardware.yml builds nothing: no build image is made or checked for it (the trimmed matrix's
    # one-Python recipe would replace the full one's image, which the rest of the run then remade).
    said = "hardware.yml runs no `release build`, `reproduce` or `smoke`: no build image is made"
    assert said in proc.stdout
    assert not [line for line in proc.stdout.splitlines() if "[images]" in line and "-build-" in line]
    for job, role in ((SINGLE, "single"), (f"{PAIR} prefill", "prefill"), (f"{PAIR} decode", "decode")):
        text = log(work, job)
        assert f"{standin} stands in for {data_container()}" in text
        # Never a pass without a GPU: a skip, with the engine's reason.
        assert re.search(rf"selftest \({role}\)\s+skip\s+device: no GPU \(.+\)", text), text[-3000:]
        assert "xfer-master --version  pass" in text
    # The wheel came from the GitHub Release (stand-in), checked against its releasable report.
    calls = [json.loads(line) for line in (work / "github" / "calls.jsonl").read_text().splitlines()]
    downloads = [c for c in calls if c[:2] == ["release", "download"]]
    assert len(downloads) == 3 and all("xfer_engine_cpu-*-cp312-cp312-*.whl" in c for c in downloads)
    assert "matches; releasable" in log(work, SINGLE)
    # The pair met through this run's artifacts: the address one way, decode's done file back.
    artifacts = work / "github" / "runs" / "1" / "artifacts"
    address = json.loads((artifacts / f"{PAIR}-address" / "address.json").read_text())
    assert re.fullmatch(r"[\d.]+:\d+", address["master"])
    assert (artifacts / f"{PAIR}-done" / "address.json.done").read_text().strip() == "ok"
    record = work / "jobs" / f"{PAIR}-prefill" / "workspace" / "out" / "address.json.leg.json"
    served = next(c for c in json.loads(record.read_text())["checks"] if c["step"] == "selftest (prefill)")
    assert served["status"] == "skip"
    assert served["data"]["served_until"] == "decode done" and served["data"]["received"]["verified"]


@pytest.mark.slow
def test_a_wheel_that_is_not_the_verified_one_fails_every_leg_and_decode_stops_at_once(
    repo: Path, work: Path, standin: str, tmp_path: Path
) -> None:
    """The release holds a wheel whose bytes are not the ones its report verified: the single leg
    and prefill fail on the sha256; prefill still publishes why it has no master, so decode stops
    at once instead of waiting out its 30 minutes."""
    assets = tmp_path / "assets"
    shutil.copytree(repo / "wheelhouse", assets)
    wheel = next(assets.rglob("*.whl"))
    with wheel.open("ab") as f:
        f.write(b"\0")
    proc = rehearse(repo, work, assets, standin)
    assert proc.returncode != 0
    rows = table(proc.stdout)
    assert rows[SINGLE] == rows[f"{PAIR} prefill"] == rows[f"{PAIR} decode"] == "failure"
    assert "is not the verified one" in log(work, SINGLE)
    assert "is not the verified one" in log(work, f"{PAIR} prefill")
    decode = log(work, f"{PAIR} decode")
    # prefill's own failure, published where its address would be: decode names the cause.
    assert "prefill published no master: " in decode and "is not the verified one" in decode
    assert "Traceback" not in proc.stdout + proc.stderr
