"""Two copies of one project never replace each other's build image (issue 58 item 7): a build
image made from the matrix's recipe is tagged with a digest of the matrix's directory; a copy with
the same recipe tags the image that is there (no debootstrap, no compiler made cold again), and a
copy with another recipe gets its own image while the first's stays. Real podman, the suite's own
cpu and rocm build images (`LocalImages`): no new base is made here."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from release.config.matrix import load
from release.machine import images
from release.plan.resolve import LocalImage
from release.plan.steps import make_plan

from .conftest import ROOT, LocalImages

pytestmark = pytest.mark.integration


def _copy(directory: Path, cpu: str) -> LocalImage:
    """A copy of the project at `directory` whose `cpu` variant is matrix.yaml's variant `cpu`:
    that variant's build recipe under the copy's own tag."""
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"]["source"] = str(ROOT / "engine")
    data["variants"] = {"cpu": data["variants"][cpu]}
    data.pop("variant_wheels", None)
    directory.mkdir(parents=True)
    (directory / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    recipe = make_plan(load(directory / "matrix.yaml")).variant("cpu").build_image.local_recipe
    assert recipe is not None
    return recipe


def _ensure(local_images: LocalImages, recipe: LocalImage) -> tuple[str, float]:
    """(what making it said, seconds)."""
    said: list[str] = []
    started = time.monotonic()
    images.ensure(local_images.engine, recipe, log=said.append)
    return "\n".join(said), time.monotonic() - started


def test_copies_of_a_project_tag_the_image_of_their_recipe_and_keep_each_other_s(
    local_images: LocalImages, tmp_path: Path
) -> None:
    engine = local_images.engine
    cpu = local_images.make(local_images.build_recipe("cpu"))
    rocm = local_images.make(local_images.build_recipe("rocm"))
    first, second = _copy(tmp_path / "a", "cpu"), _copy(tmp_path / "b", "cpu")
    other = _copy(tmp_path / "c", "rocm")  # the rocm recipe under the copy's cpu tag
    tags = [first.tag, second.tag, other.tag]
    assert len({*tags, cpu, rocm}) == 5, tags
    try:
        for recipe, made_from in ((first, cpu), (second, cpu), (other, rocm)):
            said, seconds = _ensure(local_images, recipe)
            assert f"image {recipe.tag}: tagged (the image of the same recipe)" in said, said
            assert seconds < 60, (recipe.tag, seconds, said)  # a tag, not a debootstrap
            assert engine.image_id(recipe.tag) == engine.image_id(made_from), said
        # Every copy's image is still there, and the suite's own: none replaced another.
        assert engine.image_id(first.tag) == engine.image_id(second.tag) == engine.image_id(cpu)
        assert engine.image_id(other.tag) == engine.image_id(rocm) != engine.image_id(cpu)
        # Asked again, each is up to date under its own tag.
        said, _seconds = _ensure(local_images, first)
        assert f"image {first.tag}: up to date, kept" in said, said
    finally:
        for tag in tags:
            engine.remove_image(tag)  # the tag only: the suite's tags still name both images
    assert engine.has_image(cpu) and engine.has_image(rocm)
