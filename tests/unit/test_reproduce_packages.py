"""The packages of a local build image: recorded in the manifest's inputs (read through a stand-in
for the container run), and named by `release reproduce` where the rebuild's image holds others."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from release.config import matrix
from release.errors import SmokeError
from release.machine.containers import ContainerEngine
from release.plan.resolve import ResolvedBuildImage
from release.plan.steps import make_plan
from release.reproduce import inputs, rebuild

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ["gcc-14=14.2.0-19", "libc6=2.41-12", "tzdata=2025b-4"]


class StandInImages:
    """A stand-in for the container run that lists an image's packages: answers from a table and
    counts the calls per image."""

    def __init__(self, table: dict[str, tuple[str, ...] | None]) -> None:
        self.table = table
        self.calls: dict[str, int] = {}

    def __call__(self, tag: str) -> inputs.ImagePackages:
        self.calls[tag] = self.calls.get(tag, 0) + 1
        found = self.table.get(tag)
        return inputs.ImagePackages(found) if found else inputs.ImagePackages(None, f"image {tag} is absent")


def _plan():  # type: ignore[no-untyped-def]
    return make_plan(matrix.load(ROOT / "matrix.yaml"))


def test_dpkg_output_gives_installed_packages_sorted_by_name() -> None:
    output = (
        "ii  zlib1g:amd64=1:1.3.dfsg-3\n"
        "rc  old-removed=1.0\n"  # removed, its configuration kept: not installed
        "ii  libc6:i386=2.41-12\n"
        "ii  apt=3.0.4\n"
        "garbage\n"
    )
    assert inputs.parse_packages(output) == ("apt=3.0.4", "libc6:i386=2.41-12", "zlib1g:amd64=1:1.3.dfsg-3")


def test_the_manifest_records_each_local_image_s_packages_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputs, "source", lambda root, variants: {"commit": None})  # git is a process
    monkeypatch.setattr(inputs, "source_date_epoch", lambda root: "1700000000")
    plan = _plan()
    tags = {v.build_image.local for v in plan.variants.values()}
    standin = StandInImages({tag: tuple(RECORDED) for tag in tags})
    found = inputs.collect(ROOT, plan.variants, packages=standin)
    variants = found["variants"]
    assert isinstance(variants, dict)
    image = variants["rocm"]["build_image"]
    assert image["local_packages"] == RECORDED
    assert (
        image["local_packages_sha256"]
        == inputs.ImagePackages(tuple(RECORDED)).as_inputs()["local_packages_sha256"]
    )
    assert len(str(image["local_packages_sha256"])) == 64
    assert image["local_packages_reason"] is None
    assert standin.calls == dict.fromkeys(tags, 1)
    json.dumps(found)


def test_an_absent_image_is_recorded_as_null_with_the_reason() -> None:
    plan = _plan()
    found = inputs.variant_inputs(plan.variants["cpu"], StandInImages({}))
    image = found["build_image"]
    assert isinstance(image, dict)
    assert image["local_packages"] is None and image["local_packages_sha256"] is None
    assert image["local_packages_reason"] == f"image {plan.variants['cpu'].build_image.local} is absent"
    unread = inputs.variant_inputs(plan.variants["cpu"])  # no query: nothing run
    assert isinstance(unread["build_image"], dict)
    assert unread["build_image"]["local_packages"] is None
    assert "not read" in str(unread["build_image"]["local_packages_reason"])


def test_an_image_without_a_recipe_is_not_read() -> None:
    standin = StandInImages({"quay.io/x/y:1": ("apt=3.0.4",)})
    image = ResolvedBuildImage(release="manylinux_2_28", local="quay.io/x/y:1", local_recipe=None)
    found = inputs.image_inputs(image, "manylinux_2_28_x86_64", standin)
    assert found["local_packages"] is None
    assert found["local_packages_reason"] == "not a local image made from a recipe"
    assert standin.calls == {}


def test_reading_packages_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (
        inputs.read_packages(None, "localhost/x").reason
        == "no container engine answers here (podman or docker)"
    )
    monkeypatch.setattr(inputs.images, "exists", lambda engine, tag: False)
    assert (
        inputs.read_packages("podman", "localhost/x").reason
        == "image localhost/x is not in podman's store here"
    )
    monkeypatch.setattr(inputs.images, "exists", lambda engine, tag: True)

    def broken(*_args: object, **_kwargs: object) -> str:
        msg = "cannot probe localhost/x (podman run exited 127): sh: 1: dpkg-query: not found\nmore"
        raise SmokeError(msg)

    monkeypatch.setattr(inputs, "run_probe", broken)
    found = inputs.read_packages("podman", "localhost/x")
    assert found.packages is None
    assert found.reason == "cannot probe localhost/x (podman run exited 127): sh: 1: dpkg-query: not found"
    monkeypatch.setattr(inputs, "run_probe", lambda *_a, **_k: "ii  apt=3.0.4\n")
    assert inputs.read_packages("podman", "localhost/x") == inputs.ImagePackages(("apt=3.0.4",))


def test_an_engine_that_hangs_is_no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    def hangs() -> str:
        raise subprocess.TimeoutExpired(["podman", "info"], 30)

    monkeypatch.setattr(ContainerEngine, "answering", staticmethod(hangs))
    found = inputs.package_reader()("localhost/x")
    assert found == inputs.ImagePackages(None, "no container engine answers here (podman or docker)")


def test_differences_name_changed_missing_and_extra_packages() -> None:
    found = ["gcc-14=14.2.0-20", "libc6=2.41-12", "libnew=1.0"]
    assert inputs.package_differences(RECORDED, found) == [
        "gcc-14: 14.2.0-19 -> 14.2.0-20",
        "libnew: absent -> 1.0",
        "tzdata: 2025b-4 -> absent",
    ]
    assert inputs.package_differences(RECORDED, RECORDED) == []


def _release(tmp_path: Path, recorded: object, reason: str | None = None) -> rebuild.RecordedRelease:
    image = {"local": "localhost/b", "local_packages": recorded, "local_packages_reason": reason}
    return rebuild.RecordedRelease(
        path=tmp_path / "release-manifest.json", tag="v1.0", version="1.0",
        inputs={"variants": {"cpu": {"toolkit": None, "build_image": image}}}, wheels=(),
    )  # fmt: skip


def test_a_rebuild_image_with_other_packages_is_named_ten_at_most(tmp_path: Path) -> None:
    recorded = [f"lib{i:02d}=1.0" for i in range(14)]
    here = tuple(f"lib{i:02d}=1.1" for i in range(13))  # 13 newer, lib13 gone
    notes, count = rebuild.image_notes(
        _release(tmp_path, recorded), "cpu", "localhost/b", StandInImages({"localhost/b": here})
    )
    assert count == 14
    assert notes[0].startswith(
        "note: cpu: image localhost/b holds 14 package(s) other than release-manifest.json"
    )
    assert notes[1:3] == ["  lib00: 1.0 -> 1.1", "  lib01: 1.0 -> 1.1"]
    assert len(notes) == 1 + rebuild.MAX_PACKAGES_NAMED + 1
    assert notes[-1] == "  and 4 more"
    same = StandInImages({"localhost/b": tuple(recorded)})
    assert rebuild.image_notes(_release(tmp_path, recorded), "cpu", "localhost/b", same) == ([], 0)


def test_unknown_packages_on_either_side_are_one_note(tmp_path: Path) -> None:
    absent = StandInImages({})
    notes, count = rebuild.image_notes(_release(tmp_path, RECORDED), "cpu", "localhost/b", absent)
    assert (notes, count) == (
        ["note: cpu: the packages of image localhost/b cannot be read here: image localhost/b is absent"],
        0,
    )
    unrecorded = _release(tmp_path, None, "no container engine answers here (podman or docker)")
    notes, count = rebuild.image_notes(unrecorded, "cpu", "localhost/b", absent)
    assert (
        count == 0 and "records no packages of its local image (no container engine answers here" in notes[0]
    )
    assert absent.calls == {"localhost/b": 1}  # nothing recorded: the image is not read


def test_packages_are_not_a_resolved_input_difference(tmp_path: Path) -> None:
    """`input_notes` compares what the matrix resolves; the packages are `image_notes`' (read only
    where the rebuild runs in the image)."""
    release = _release(tmp_path, RECORDED)
    now = {"toolkit": None, "build_image": {"local": "localhost/b", **inputs.NOT_READ.as_inputs()}}
    assert not [n for n in rebuild.input_notes(release, {"cpu": now}) if "cpu:" in n]
    other = {**now, "build_image": {**now["build_image"], "local": "localhost/c"}}
    assert "note: cpu: the matrix here resolves build_image otherwise than recorded" in rebuild.input_notes(
        release, {"cpu": other}
    )
