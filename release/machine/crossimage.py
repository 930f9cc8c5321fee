"""A variant's cross image (`<build image>-cross-<machine>`, which `release.builder.cross` makes over
the local build image): what it is made of (its label), and finding it for a checkout that did not
make it. A build image's tag carries its checkout (`release.plan.buildimage`), so its cross image's
does too: a checkout takes, by tagging it, the cross layer another made over the same recipe."""

from __future__ import annotations

import hashlib
import re
import shlex
from pathlib import Path

from release.config.machines import MACHINES
from release.config.resources import toolkit_scripts
from release.errors import ReleaseError
from release.machine import images, imaging
from release.machine.containers import ContainerEngine, ContainerStepFailed
from release.machine.emulation import CROSS_LABEL, cross_image_tag
from release.machine.recipe import inputs_hash, inputs_text, read_digests
from release.plan.resolve import ResolvedVariant
from release.wheel.files import read_bounded

SCRIPT_LIMIT = 16 * 2**20
"""The most of one toolkit script read for the digest (they are a few KiB)."""
_ROWS = "{{.Id}} {{.Repository}}"
"""What a listing of images prints of each: its ID and its name."""


def scripts_digest(toolkit: str | None) -> str:
    """What the cross layer's making reads of the toolkit's scripts: cross-build.sh, and the install
    script the toolkit command names (with the helpers both source)."""
    scripts = toolkit_scripts()
    names = ["cross-build.sh", "_common.sh"]
    names += [Path(word).name for word in shlex.split(toolkit or "") if word.endswith(".sh")]
    digest = hashlib.sha256()
    for name in dict.fromkeys(names):
        path = scripts / name
        digest.update(name.encode() + b"\0" + (read_bounded(path, SCRIPT_LIMIT) if path.is_file() else b""))
    return digest.hexdigest()[:16]


def cross_packages(variant: ResolvedVariant, debian_arch: str) -> tuple[str, ...]:
    """The `:arm64` form of every apt package of the variant's system_packages."""
    found: list[str] = []
    for package in variant.system_packages.values():
        found += [f"{name.split('/')[0]}:{debian_arch}" for name in package.apt]
    return tuple(dict.fromkeys(found))


def cross_label(base_id: str, packages: tuple[str, ...], toolkit: str | None) -> str:
    """CROSS_LABEL's value of the cross layer over the image `base_id`: its inputs, whatever its tag."""
    return f"{base_id}:{scripts_digest(toolkit)}:{' '.join(packages)}:{toolkit or ''}"


def made_over(engine: ContainerEngine, label: str) -> str:
    """The ID of a cross image (any tag) labelled `label`, or '' (also when the engine could not
    list its images: the layer is then made, or found absent, as before tags carried the project)."""
    proc = engine.labelled(CROSS_LABEL, label, _ROWS)
    rows = [line.split() for line in proc.stdout.splitlines()] if proc.returncode == 0 else []
    ids = [row[0] for row in rows if row]
    return next((i for i in ids if re.fullmatch(r"[0-9a-f]{64}", i)), "")


def cross_image_present(engine: ContainerEngine, variant: ResolvedVariant, machine: str) -> bool:
    """Whether the variant's cross image for `machine` is here (a cross build makes it). A build
    image's tag carries its checkout (`release.plan.buildimage`): the cross layer another checkout
    made over the image of the same recipe, with the same scripts and packages, is tagged here;
    failing that, the newest one of this project's variant that another checkout made."""
    tag = cross_image_tag(variant.build_image.local, machine)
    if engine.has_image(tag):
        return True
    recipe = variant.build_image.local_recipe
    if recipe is None or not variant.build_image.default_tag:
        return False
    base = _build_image_id(engine, variant)
    packages = cross_packages(variant, MACHINES[machine].debian)
    same = made_over(engine, cross_label(base, packages, recipe.toolkit_install)) if base else ""
    # None of the same recipe (a narrowed checkout: a rehearsal's jobs): what it took when
    # every checkout shared one tag, the newest of this project's variant.
    same = same or images.another_checkouts(engine, variant.build_image.local, f"-cross-{machine}")[0]
    if not same:
        return False
    try:
        engine.tag(same, tag)
    except ContainerStepFailed:
        return False
    return True


def _build_image_id(engine: ContainerEngine, variant: ResolvedVariant) -> str:
    """The ID of the variant's build image: under its tag, or made from the same recipe under
    another checkout's ('' when neither is here)."""
    found = engine.image_id(variant.build_image.local)
    recipe = variant.build_image.local_recipe
    if found or recipe is None:
        return found or ""
    try:
        inputs = inputs_hash(inputs_text(images.recipe_of(recipe), read_digests(toolkit_scripts())))
        return imaging.with_inputs(engine, inputs)
    except ReleaseError:
        return ""
