"""`release rehearse` of a release of both machines (issue 48): the cpu and cuda variants for
x86_64 and aarch64, as matrix.yaml declares them, through release.yml's jobs in order, here.

The aarch64 jobs run as GitHub's ubuntu-24.04-arm runners would, with this x86_64 machine's local
design in their place: their build steps cross-compile in the variants' local images (and the
second build compiles again the same way, byte for byte), and their smoke jobs run the wheels
under emulation (binfmt_misc's qemu-user) with Debian's own aarch64 Python, which is why this
rehearsal's Python is that one (3.13): no aarch64 3.12 runs here, and the real matrix's rehearsal
(test_rehearse.py, 3.12) leaves the aarch64 jobs to this one. check-resolution installs the set
once per machine (pip and uv resolve as an aarch64 machine would) and the PEP 825 variant set
(cpu's null variant, cuda's cu130) serves both machines; publish then uploads all four wheels.
The cuda variant keeps its Grace tiers, so the release starts hardware.yml; test_rehearse_grace.py
rehearses that workflow's Grace legs (in a file of its own, so that xdist runs it beside this one).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from release.machine.emulation import DIST_PYTHON, emulation_missing
from release.variants.resolution import FORCE_CUDA

from .conftest import LocalImages
from .rehearsal import LOCAL_FLOOR, cpu, make_repo, matrix_data, need_podman, rehearse, table

pytestmark = pytest.mark.integration
need_podman()

MACHINES = ("x86_64", "aarch64")
VARIANTS = {"cpu": "xfer_engine_cpu", "cuda": "xfer_engine"}
GRACE = ("gh200", "gb200-pd")


@pytest.mark.slow
def test_both_machines_are_built_smoked_resolved_and_published(
    tmp_path: Path, work: Path, local_images: LocalImages
) -> None:
    missing = emulation_missing("aarch64")
    assert missing == "", missing  # .ci/run registers qemu-user-static's aarch64 entry
    local_images.make_all([local_images.build_recipe("cpu"), local_images.build_recipe("cuda")])
    declared = matrix_data()
    assert declared["platform"]["architectures"] == list(MACHINES)  # what the real matrix releases
    assert declared["variants"]["cuda"]["hardware"] == list(GRACE)  # the Grace tiers, as declared
    cuda = {**declared["variants"]["cuda"], "images": []}
    repo = make_repo(
        tmp_path / "repo", {"cpu": cpu(), "cuda": cuda}, machines=MACHINES,
        variant_wheels={"distribution": "xfer-engine", "variants": ["cpu", "cuda"]},
        hardware={tier: declared["hardware"][tier] for tier in GRACE},
    )  # fmt: skip
    proc = rehearse(repo, work, "--python", DIST_PYTHON, "--floor", LOCAL_FLOOR, timeout=3000)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    rows = table(proc.stdout)
    py = "cp" + DIST_PYTHON.replace(".", "")
    jobs = ["plan", f"resolution {DIST_PYTHON}", "publish to PyPI", "GitHub Release"]
    for variant in VARIANTS:
        for machine in MACHINES:
            jobs += [f"build {variant}-{machine}", f"smoke {py}-{variant}-manylinux_{machine}"]
            jobs += [f"second build {py}-{variant}-manylinux_{machine}"]
    assert {job: rows[job][1] for job in jobs} == dict.fromkeys(jobs, "success"), rows
    # in release.yml's order: every build, then the second builds and smokes, then what needs them
    order = list(rows)
    for machine in MACHINES:
        built = order.index(f"build cuda-{machine}")
        assert (
            built
            < order.index(f"smoke {py}-cpu-manylinux_{machine}")
            < order.index(f"resolution {DIST_PYTHON}")
        )
    assert order.index(f"resolution {DIST_PYTHON}") < order.index("publish to PyPI")

    def log(job: str) -> str:
        return (work / "logs" / f"{job}.log").read_text(encoding="utf-8")

    for variant in VARIANTS:
        build = log(f"build-{variant}-aarch64")
        assert '$ python -m release build --variant "$VARIANT" --arch "$ARCH"' in build
        image = f"localhost/xfer-build-{variant}-cross-aarch64"  # the local build image's cross layer
        compiled = f"[{variant}] cross-compiling Python {DIST_PYTHON} for aarch64 in {image}"
        # or taken from the run's store, cross-compiled from the same inputs by another test (the
        # second build below compiles it here again, byte for byte)
        taken = "up to date, the run's store holds its wheel from the same inputs"
        assert compiled in build or taken in build, build[-2000:]
        second = log(f"second-build-{py}-{variant}-manylinux_aarch64")
        assert "1 wheel(s) rebuilt from second-build-manifest.json: identical, byte for byte" in second
        smoke = log(f"smoke-{py}-{variant}-manylinux_aarch64")
        selftest = rf"^\[{DIST_PYTHON} qemu-aarch64\] python -m xfer selftest --json \.\.\. ok .*ok: true$"
        assert re.search(selftest, smoke, re.M), smoke[-3000:]
        assert "1/1 passed" in smoke
        assert "qemu" not in log(f"smoke-{py}-{variant}-manylinux_x86_64")
    resolution = log(f"resolution-{DIST_PYTHON}")
    assert "aarch64 wheels: pip and uv resolve as a manylinux_2_39_aarch64 machine would" in resolution
    for machine in MACHINES:
        for installer in ("pip", "uv"):
            for name in ("xfer-engine-cpu", "xfer-engine"):
                line = rf"^PASS +per-name +{DIST_PYTHON} +{installer} install {name} on {machine}: "
                assert re.search(line, resolution, re.M), (line, resolution[-3000:])
        forced = rf"^PASS +variants .* on {machine} \({FORCE_CUDA}=13\.0\): .*\[cu130\]"
        assert re.search(forced, resolution, re.M), resolution[-3000:]
    assert re.search(r"^\d+ installs, 1 Python\(s\), 4 index setup\(s\): all right$", resolution, re.M)
    publish = log("publish-to-PyPI")
    assert (
        "expected-files: cpu: 2 of 2 wheel(s)" in publish
        and "expected-files: cuda: 2 of 2 wheel(s)" in publish
    )
    packages = {p.name for p in (work / "index" / "packages").iterdir()}
    assert packages == {
        f"{stem}-0.2.0-{py}-{py}-{LOCAL_FLOOR.removesuffix('_x86_64')}_{machine}.whl"
        for stem in VARIANTS.values() for machine in MACHINES
    }  # fmt: skip
    assert "gh workflow run hardware.yml" in log("start-the-hardware-tests")
