"""The inputs hash of every local image of matrix.yaml, computed in Python, against the goldens the
shell-only make-image.sh computed for the same recipes (tests/unit/data/image_inputs.json): the
same recipe has the same inputs, and every input changes the hash."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from release.config.matrix import load
from release.machine import images
from release.machine.debian import DEFAULT_MIRROR
from release.machine.recipe import Digests, Recipe, inputs_hash, inputs_text, read_digests
from release.plan.steps import make_plan

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = json.loads((Path(__file__).parent / "data" / "image_inputs.json").read_text(encoding="utf-8"))
LEAF = "80d9cd69b99b0f01110eb15e1f036d3d62f1e6ca96952d890988690acc25040f"
"""The digest of today's leaf scripts (make-image.sh, _common.sh): a change to them makes every local
image again, so it is written here on purpose, with the change."""


@pytest.fixture(autouse=True)
def _interpreters(fake_interpreters: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """The interpreters the goldens were recorded with (/opt/test-pythons/3.X.0), and the default
    mirror they were recorded with (whatever this machine's apt sources name)."""
    monkeypatch.setenv("DEBIAN_MIRROR", DEFAULT_MIRROR)


def test_the_recipe_mirror_is_the_one_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """images.recipe_of takes the mirror from debian_mirror (DEBIAN_MIRROR first): the goldens above
    are the default mirror's, so the images of the default mirror keep their inputs."""
    default = _matrix_recipes()
    assert {recipe.mirror for recipe in default} == {"http://deb.debian.org/debian"}
    monkeypatch.setenv("DEBIAN_MIRROR", "http://mirror.example/debian")
    moved = _matrix_recipes()
    assert {recipe.mirror for recipe in moved} == {"http://mirror.example/debian"}
    digests = Digests(leaf="a" * 64, toolkit="b" * 64)
    for before, after in zip(default, moved, strict=True):
        assert inputs_hash(inputs_text(before, digests)) != inputs_hash(inputs_text(after, digests)), (
            after.tag
        )


def _matrix_recipes() -> list[Recipe]:
    plan = make_plan(load(ROOT / "matrix.yaml"))
    variants = plan.variants.values()
    built = [v.build_image.local_recipe for v in variants if v.build_image.local_recipe is not None]
    served = [i.local for v in variants for i in v.images if i.local is not None]
    standins = [i.standin for v in variants for i in v.images if i.standin is not None]
    return [images.recipe_of(image) for image in dict.fromkeys([*built, *served, *standins])]


def _with_bases(recipe: Recipe, name: str) -> list[tuple[str, Recipe]]:
    """The recipe and every image it is a layer over, named as the goldens name them."""
    found = [(name, recipe)]
    while (layer := recipe.layer()) is not None:
        kind, recipe = layer
        name += f" without its {kind}"
        found.append((name, recipe))
    return found


def _old_digests(golden: dict[str, object], *, ca: bool) -> Digests:
    """The digests the shell read when it recorded `golden` (the file's, or the entry's own)."""
    own = golden.get("digests", {})
    assert isinstance(own, dict)
    leaf, toolkit = own.get("leaf", GOLDEN["leaf"]), own.get("toolkit", GOLDEN["toolkit"])
    return Digests(
        leaf=leaf, toolkit=toolkit, therock=own.get("therock", ""), ca=(tuple(GOLDEN["ca"]),) if ca else ()
    )


def test_every_matrix_image_and_its_bases_have_the_inputs_the_shell_script_computed() -> None:
    checked = set()
    for recipe in _matrix_recipes():
        for ca in (False, True):
            name = recipe.tag + (" (a CA certificate)" if ca else "")
            for step, made in _with_bases(recipe, name):
                assert step in GOLDEN["images"], f"{step}: no golden (record it with the shell that made it)"
                golden = GOLDEN["images"][step]
                digests = _old_digests(golden, ca=ca)
                text = inputs_text(made, digests)
                # The shell did not name the image a layer is over; the last line does now.
                if (layer := made.layer()) is not None:
                    text, over = text.rsplit("\n", 1)
                    assert over == f"over={layer[0]} {inputs_hash(inputs_text(layer[1], digests))}", step
                assert text == golden["text"], step
                assert inputs_hash(text) == golden["inputs"], step
                checked.add(step)
    # Goldens of images another branch's matrix.yaml adds (the TheRock stand-ins) wait for it.
    pending = {name for name in GOLDEN["images"] if "therock" in name}
    assert set(GOLDEN["images"]) - checked <= pending, "goldens of images matrix.yaml no longer has"


def test_the_leaf_scripts_are_the_ones_the_labels_are_made_with() -> None:
    """The labels' first input: a change to make-image.sh or _common.sh makes every image again."""
    leaf = read_digests(ROOT / "scripts", ca_dir=ROOT / "absent").leaf
    assert leaf == LEAF, (
        f"scripts/make-image.sh or scripts/_common.sh changed (digest {leaf}): every local image will be "
        "made again; if that is meant, write the digest into LEAF in tests/unit/test_image_inputs.py"
    )


CHANGES = {
    "tag": None,
    "suite": "sid",
    "mirror": "http://mirror.example/debian",
    "include": ("libfoo1",),
    "pythons": ("3.12",),
    "env_python": "3.10",
    "minbase": False,
    "gcc": "13",
    "auditwheel": "auditwheel>=7",
    "runtime_prefix": "/opt/x/lib",
    "runtime_via": "LD_LIBRARY_PATH",
    "runtime_libs": ("libx.so*",),
    "runtime_links": "/opt/x/links",
    "base_pythons": ("3.12", "3.13"),
    "toolkit_install": "bash scripts/install-cuda.sh 13.0",
}


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(Recipe) if f.name != "homes"])
def test_every_input_changes_the_hash(field: str) -> None:
    base = Recipe(
        tag="localhost/x", suite="trixie", pythons=("3.13",),
        homes=(("3.10", "/p/3.10"), ("3.12", "/p/3.12"), ("3.13", "/p/3.13")),
    )  # fmt: skip
    digests = Digests(leaf="a" * 64, toolkit="b" * 64)
    before = inputs_hash(inputs_text(base, digests))
    changed = dataclasses.replace(base, **{field: CHANGES[field]}) if CHANGES[field] is not None else base
    after = inputs_hash(inputs_text(changed, digests))
    assert (before == after) == (field == "tag"), field  # the tag is a name, not an input
    if field == "toolkit_install":
        other = dataclasses.replace(digests, toolkit="c" * 64)
        assert inputs_hash(inputs_text(changed, other)) != after
    sdk = dataclasses.replace(base, runtime_prefix="/opt/venv", runtime_via="rocm_sdk")
    sdk_hash = inputs_hash(inputs_text(sdk, digests))
    assert inputs_hash(inputs_text(sdk, dataclasses.replace(digests, therock="e" * 64))) != sdk_hash
    for other in (
        dataclasses.replace(digests, leaf="c" * 64),
        dataclasses.replace(digests, ca=(("/usr/local/share/ca-certificates/x.crt", "d" * 64),)),
    ):
        assert inputs_hash(inputs_text(base, other)) != before
    moved = dataclasses.replace(base, homes=(("3.13", "/q/3.13"),))
    assert inputs_hash(inputs_text(moved, digests)) != before


def test_a_layer_is_made_again_when_the_image_under_it_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A layout layer's recipe names only its own libraries; the image under it moves the runtime
    libraries recipe.RUNTIME_LIBS names. A change there (libhiprtc added) changed the image under
    it but not the layer's own facts, and an old layer over an old image was kept as up to date."""
    from release.machine import recipe as recipe_mod

    layout = Recipe(
        tag="localhost/x", suite="trixie", pythons=("3.13",), homes=(("3.13", "/p/3.13"),),
        include=("libamdhip64-7/experimental",), runtime_prefix="/opt/rocm/lib",
        runtime_libs=("libamdhip64.so*",),
    )  # fmt: skip
    digests = Digests(leaf="a" * 64, toolkit="b" * 64)
    before = inputs_hash(inputs_text(layout, digests))
    monkeypatch.setattr(recipe_mod, "RUNTIME_LIBS", (*recipe_mod.RUNTIME_LIBS, "libnew.so*"))
    assert inputs_hash(inputs_text(layout, digests)) != before
