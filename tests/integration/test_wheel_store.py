"""The run's wheel store for real (issue 60, release.builder.store): two checkouts of one project
build the same rocm wheel in the local build image. The first is this repository, where `.ci/run`'s
set-up phase built it minutes before (its stamp says so: it is taken up to date and put in the
store; elsewhere it compiles and puts it there); the second, a copy, takes it from the store, every
input the same (the timestamp too: this repository's last commit's), and its bytes are the first's.
The suite's rehearsals share the run's store this way (tests/ci_time.py `store_env`); this test has
a store of its own, so what it counts is its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from release import settings
from release.builder import store
from release.builder.prebuild import source_date_epoch

from .conftest import ROOT, LocalImages, toolkit
from .rehearsal import need_podman, real_repo

pytestmark = pytest.mark.integration
need_podman()


@pytest.mark.slow
def test_a_second_checkout_takes_the_wheel_the_first_built(tmp_path: Path, local_images: LocalImages) -> None:
    local_images.make(local_images.build_recipe("rocm"))
    shared = tmp_path / "store"
    # The timestamp is an input: this repository's is its last commit's, a copy (no git) would have
    # 1980's. Both builds take this repository's, as a CI checkout of one commit does.
    env = {"RELEASE_WHEEL_STORE": str(shared), "SOURCE_DATE_EPOCH": source_date_epoch(ROOT)}
    wheels = []
    # matrix.yaml as it is: its build image is the one the rest of the suite uses (a narrowed matrix
    # would make the image's recipe another one, and replace it)
    for repo in (ROOT, real_repo(tmp_path / "copy")):
        wheelhouse = tmp_path / f"wheelhouse-{len(wheels)}"
        proc = toolkit(
            "--matrix", str(repo / "matrix.yaml"), "build", "--variant", "rocm", "--container",
            "--python", "3.12", "--wheelhouse", str(wheelhouse), cwd=repo, env=env, timeout=1800,
        )  # fmt: skip
        (wheel,) = (wheelhouse / "rocm").glob("*.whl")
        report = json.loads(wheel.with_name(wheel.name + ".verify.json").read_text(encoding="utf-8"))
        assert report["ok"] is True, report  # verified again where it was taken
        wheels.append((wheel, proc.stdout))
    (first, built), (second, taken) = wheels
    did = [e["did"] for e in store.events(shared)]
    if settings.switch("RELEASE_CI_SETUP_RAN"):  # .ci/run: the set-up phase's wheel, not compiled again
        assert "cibuildwheel in " not in built and did[0] == "kept", built[-3000:]
    assert did == [did[0], "reused"] and did[0] in ("built", "kept"), did
    assert "cibuildwheel in " not in taken and "up to date, nothing changed since its build" in taken, taken
    assert second.read_bytes() == first.read_bytes()
