"""The run's wheel store for real (issue 60, release.builder.store): two checkouts of one project
build the cpu wheel in the local build image; the first compiles it and puts it in the store, the
second takes it (every input the same), and the bytes are the first's. The suite's rehearsals share
the run's store this way (tests/ci_time.py `store_env`); this test has a store of its own, so what it
counts is its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from release.builder import store

from .conftest import LocalImages, toolkit
from .rehearsal import LOCAL_FLOOR, PYTHON, cpu, make_repo, need_podman

pytestmark = pytest.mark.integration
need_podman()


@pytest.mark.slow
def test_a_second_checkout_takes_the_wheel_the_first_built(tmp_path: Path, local_images: LocalImages) -> None:
    local_images.make(local_images.build_recipe("cpu"))
    shared = tmp_path / "store"
    env = {"RELEASE_WHEEL_STORE": str(shared)}
    wheels = []
    for name in ("first", "second"):
        repo = make_repo(tmp_path / name, {"cpu": cpu()}, pythons=[PYTHON], floor=LOCAL_FLOOR)
        proc = toolkit(
            "--matrix", str(repo / "matrix.yaml"), "build", "--variant", "cpu", "--container",
            "--tag", "v0.2.0", "--wheelhouse", str(repo / "wheelhouse"), env=env, timeout=1800,
        )  # fmt: skip
        (wheel,) = (repo / "wheelhouse" / "cpu").glob("*.whl")
        report = json.loads(wheel.with_name(wheel.name + ".verify.json").read_text(encoding="utf-8"))
        assert report["ok"] is True, report  # verified again where it was taken
        wheels.append((wheel, proc.stdout))
    (first, built), (second, taken) = wheels
    assert "cibuildwheel in " in built, built[-3000:]
    assert "cibuildwheel in " not in taken and "up to date, nothing changed since its build" in taken, taken
    assert second.read_bytes() == first.read_bytes()
    assert [e["did"] for e in store.events(shared)] == ["built", "reused"]
