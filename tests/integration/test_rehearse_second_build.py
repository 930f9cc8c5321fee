"""The real matrix's rehearsal, its other half: release.yml's second builds and the smoke jobs in
the registry serving images (their local stand-ins), for the tag test_rehearse.py rehearses through
publish. Both rehearsals build every variant, through the run's wheel store: each wheel is
compiled once, by whichever asks first, and the other takes it (its key's lock). In a file of its
own, so that xdist runs it on another worker beside test_rehearse.py: neither bounds the run alone.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from .conftest import LocalImages
from .rehearsal import PYTHON, matrix_data, need_podman, real_matrix_rehearsal, rocm_registry_images, table

pytestmark = pytest.mark.integration
need_podman()


@pytest.mark.skipif(os.geteuid() != 0, reason="the local build images are made as root")
@pytest.mark.slow
def test_the_real_matrix_builds_again_and_smokes_in_the_registry_images(
    tmp_path: Path, work: Path, local_images: LocalImages
) -> None:
    """matrix.yaml as it is (narrowed as test_rehearse.py narrows it): cpu, cuda and rocm built,
    one identifier of each rebuilt from the manifest in a build root and a container of its own
    and found the same, byte for byte; rocm smoke-tested in each registry image that holds this
    Python, as its local stand-in, named. The images declared by tag (pin: probe) await the
    digest a probe records: no job runs in them, nor in those without this Python. Publishing
    and the rest are test_rehearse.py's (`--job` leaves them out here: skipped, not failed)."""
    data = matrix_data()
    local_images.make_all(local_images.matrix_recipes())  # as test_rehearse.py: whichever asks first makes
    proc = real_matrix_rehearsal(tmp_path, work, "second build")
    rows = table(proc.stdout)
    py = PYTHON.replace(".", "")
    registry, elsewhere, awaiting = rocm_registry_images()
    assert awaiting == ["vllm-rocm-v033", "amd-vllm-rocm10", "sglang-rocm10", "sglang-rocm724"]
    assert elsewhere == ["sglang-rocm"]  # SGLang's ROCm 7.2.0 image is 3.10 only
    assert registry  # some registry image is smoke-tested here
    assert not [job for job in rows if "musa" in job]
    jobs = ["plan"] + [f"build {variant}-x86_64" for variant in ("cpu", "cuda", "rocm")]
    jobs += [f"smoke cp{py}-rocm-{name}" for name in registry]
    # The second build: one identifier per variant rebuilt from the manifest in a build root and a
    # container of its own, before publishing; cpu, cuda and rocm come out the same, byte for byte.
    jobs += [f"second build cp{py}-{variant}-manylinux_x86_64" for variant in ("cpu", "cuda", "rocm")]
    for job in jobs:
        assert rows[job][1] == "success", (job, rows)
    assert not [job for job in rows if any(name in job for name in [*awaiting, *elsewhere])]
    for job in ("smoke", "check-resolution", "publish-pypi", "github-release", "hardware"):
        assert re.search(rf"^\[\d+/\d+\] {job}: skipped \(not among --job\)$", proc.stdout, re.M), job
    assert not (work / "index" / "packages").is_dir() or not list((work / "index" / "packages").iterdir())
    for variant in ("cpu", "cuda", "rocm"):
        second = work / "logs" / f"second-build-cp{py}-{variant}-manylinux_x86_64.log"
        log = second.read_text(encoding="utf-8")
        assert "1 wheel(s) rebuilt from second-build-manifest.json: identical, byte for byte" in log, variant
        # compiled again in a container of its own, never the first build's wheel taken up to date
        assert "cibuildwheel in " in log and "nothing changed since its build" not in log, variant
    for name in registry:
        log = (work / "logs" / f"smoke-cp{py}-rocm-{name}.log").read_text(encoding="utf-8")
        assert f"stand-in for {data['images'][name]['container']}" in log, name
