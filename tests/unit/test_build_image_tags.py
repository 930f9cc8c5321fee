"""The default tag of a build image made from a matrix recipe carries a digest of the matrix's
directory (issue 58 item 7): two copies of one project get two tags, so neither replaces the other's
image; one directory always gets the same tag; a declared `build_image.local` is kept as written."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import yaml

from release import process
from release.builder.cross import ensure_cross_image
from release.config.matrix import loads
from release.machine import images
from release.machine.crossimage import cross_image_present
from release.machine.emulation import CROSS_LABEL, cross_image_tag
from release.plan.buildimage import project_digest
from release.plan.steps import make_plan

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "packaging" / "backends"
REFERENCE = re.compile(r"localhost/[a-z0-9]+(?:-+[a-z0-9]+)*")
"""A podman/docker repository name of one path component under localhost, as the default gives."""


def _tags(directory: Path, edit: object = None) -> dict[str, str]:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"]["source"] = str(ROOT / "engine")
    if callable(edit):
        edit(data)
    directory.mkdir(parents=True, exist_ok=True)
    loaded = loads(
        yaml.safe_dump(data, sort_keys=False), path=directory / "matrix.yaml", backends_dir=BACKENDS
    )
    return {name: v.build_image.local for name, v in make_plan(loaded).variants.items()}


def test_two_directories_give_two_tags_and_one_directory_the_same(tmp_path: Path) -> None:
    first, second = _tags(tmp_path / "a"), _tags(tmp_path / "b")
    again = _tags(tmp_path / "a")
    assert first == again
    digest = hashlib.sha256(str((tmp_path / "a").resolve()).encode()).hexdigest()[:8]
    assert first["rocm"] == f"localhost/xfer-build-rocm-{digest}"
    assert project_digest(tmp_path / "a") == digest
    for name in ("cpu", "cuda", "rocm"):
        assert first[name] != second[name], name
        assert first[name].removesuffix(digest) == second[name].removesuffix(project_digest(tmp_path / "b"))


def test_a_path_through_a_link_is_its_directory(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert _tags(tmp_path / "link") == _tags(tmp_path / "real")


def test_a_declared_local_tag_is_kept_as_written(tmp_path: Path) -> None:
    def declare(data: dict[str, dict[str, dict[str, dict[str, str]]]]) -> None:
        data["variants"]["rocm"]["build_image"]["local"] = "localhost/Mine:one"

    tags = _tags(tmp_path, declare)
    assert tags["rocm"] == "localhost/Mine:one"
    assert tags["cpu"].endswith(f"-{project_digest(tmp_path)}")


def test_the_tag_is_a_valid_reference_for_long_and_odd_names(tmp_path: Path) -> None:
    def rename(data: dict[str, dict[str, object]]) -> None:
        data["engine"]["import_name"] = "Very_" + "long_" * 30 + "Name"
        variants = data["variants"]
        assert isinstance(variants, dict)
        variants["rocm" + "x" * 60] = variants.pop("rocm")

    tags = _tags(tmp_path, rename)
    for tag in [*_tags(tmp_path).values(), *tags.values()]:
        if tag.startswith("localhost/"):
            assert REFERENCE.fullmatch(tag), tag
            assert len(tag) <= 128 - len("-cross-aarch64"), tag  # a cross image's tag is this one's, longer


class _Engine:
    """A FAKE container engine (unit tests start no process): one cross image, labelled, under
    another checkout's tag; what was tagged and committed is recorded."""

    def __init__(self, listed: str) -> None:
        self.listed = listed
        self.tagged: list[tuple[str, str]] = []
        self.committed: list[str] = []

    def image_id(self, _reference: str) -> str:
        return "b" * 64

    def label(self, _reference: str, _key: str) -> str:
        return ""  # no image under this checkout's cross tag yet

    def labelled(self, key: str, value: str, _template: str) -> process.Result:
        assert key == CROSS_LABEL and value.startswith("b" * 64 + ":")
        return process.Result(("podman",), 0, self.listed, "")

    def tag(self, source: str, tag: str) -> None:
        self.tagged.append((source, tag))

    def commit_script(self, _base: str, _script: str, tag: str, **_: object) -> None:
        self.committed.append(tag)


def test_a_cross_layer_made_over_the_same_base_is_tagged_not_made_again() -> None:
    engine = _Engine("a" * 64 + "\n")
    base = "localhost/xfer-build-cuda-0123abcd"
    tag = ensure_cross_image(engine, base, "aarch64", "cuda", ("zlib1g-dev:arm64",), toolkit=None)  # type: ignore[arg-type]
    assert tag == f"{base}-cross-aarch64"
    assert (engine.tagged, engine.committed) == ([("a" * 64, tag)], [])
    engine = _Engine("")
    ensure_cross_image(engine, base, "aarch64", "cuda", ("zlib1g-dev:arm64",), toolkit=None)  # type: ignore[arg-type]
    assert (engine.tagged, engine.committed) == ([], [f"{base}-cross-aarch64"])


class _Store:
    """A FAKE image store for `cross_image_present` (unit tests start no process): no image under
    this checkout's cross tag, the build image `base`, cross layers `labelled`, and `rows` listed."""

    def __init__(self, labelled: str, rows: str) -> None:
        self.found, self.rows = labelled, rows
        self.tagged: list[tuple[str, str]] = []

    def has_image(self, _reference: str) -> bool:
        return False

    def image_id(self, _reference: str) -> str:
        return "b" * 64

    def labelled(self, _key: str, value: str, _template: str) -> process.Result:
        return process.Result(("podman",), 0, self.found if value.startswith("b" * 64) else "", "")

    def listed(self, _template: str) -> process.Result:
        return process.Result(("podman",), 0, self.rows, "")

    def tag(self, source: str, tag: str) -> None:
        self.tagged.append((source, tag))


def test_an_emulated_leg_takes_the_cross_layer_another_checkout_made(tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"]["source"] = str(ROOT / "engine")
    text = yaml.safe_dump(data, sort_keys=False)
    cpu = make_plan(loads(text, path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)).variants["cpu"]
    mine = cross_image_tag(cpu.build_image.local, "aarch64")
    # The same recipe's layer, found by its label.
    store = _Store("c" * 64 + "\n", "")
    assert cross_image_present(store, cpu, "aarch64")  # type: ignore[arg-type]
    assert store.tagged == [("c" * 64, mine)]
    # None of the same recipe (a narrowed checkout): the newest of this variant's, another digest.
    rows = (
        f"{'1' * 64} localhost/xfer-build-cuda-0123abcd-cross-aarch64\n"
        f"{'2' * 64} localhost/xfer-build-cpu-cross-aarch64\n"
        f"{'3' * 64} localhost/xfer-build-cpu-0123abcd-cross-aarch64\n"
        f"{'4' * 64} localhost/xfer-build-cpu-4567abcd-cross-aarch64\n"
    )
    store = _Store("", rows)
    assert cross_image_present(store, cpu, "aarch64")  # type: ignore[arg-type]
    assert store.tagged == [("3" * 64, mine)]
    store = _Store("", rows.replace("cpu", "cuda"))
    assert not cross_image_present(store, cpu, "aarch64")  # type: ignore[arg-type]
    assert store.tagged == []


class _Shelf:
    """A FAKE image store for `images._made` (unit tests start no process): `rows` listed, newest
    first; a tag exists once it was given."""

    name = "podman"

    def __init__(self, rows: str) -> None:
        self.rows = rows
        self.tags: dict[str, str] = {}

    def has_image(self, reference: str) -> bool:
        return reference in self.tags

    def listed(self, _template: str) -> process.Result:
        return process.Result(("podman",), 0, self.rows, "")

    def tag(self, source: str, tag: str) -> None:
        self.tags[tag] = source


def test_a_machine_that_cannot_make_the_image_takes_another_checkout_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_interpreters: object
) -> None:
    """No root (a CI runner, a rehearsal's job) or not the recipe's interpreters (the README's
    container): the image another checkout of the project made is tagged and used as it is."""
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"]["source"] = str(ROOT / "engine")
    text = yaml.safe_dump(data, sort_keys=False)
    rocm = make_plan(loads(text, path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)).variants["rocm"]
    recipe = rocm.build_image.local_recipe
    assert recipe is not None
    monkeypatch.setattr(images.os, "geteuid", lambda: 1000)
    rows = (
        f"{'1' * 64} localhost/xfer-build-rocm-0123abcd-cross-aarch64\n"
        f"{'2' * 64} localhost/xfer-build-rocm\n"
        f"{'3' * 64} localhost/xfer-build-rocm-4567abcd\n"
    )
    said: list[str] = []
    shelf = _Shelf(rows)
    images._made(shelf, recipe, log=said.append)  # type: ignore[arg-type]
    assert shelf.tags == {recipe.tag: "3" * 64}
    other = "localhost/xfer-build-rocm-4567abcd (another checkout's of this project)"
    assert said[0] == f"image {recipe.tag}: the image {other}, tagged"
    assert "present; not re-checking its recipe" in said[1]
