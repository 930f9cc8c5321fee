"""What a build image's name tells: the tag of one made from the matrix's recipe, and the GCC a
release image compiles with. A local build image's default tag carries a short digest of the
project's directory, so two checkouts of one project never replace each other's image
(`release.machine.imaging` tags the image of the same inputs instead of making it again)."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path

from release.config.matrix import LoadedMatrix

TAG_RULE = (
    "a build image made from a recipe is tagged localhost/<import name>-build-<variant>-<8 hex of the "
    "sha256 of the matrix's directory>, so two copies of a project never replace each other's image "
    "(one made from the same recipe is tagged, not made again); a declared build_image.local is kept "
    "as written"
)
"""The rule in one sentence: `release build --container` and `release images` print it, the docs say it."""


def slug(text: str) -> str:
    """`text` lowercased, every character but an ASCII letter or digit a `-`: a tag's part."""
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in text.lower()).strip("-")


def project_digest(root: Path) -> str:
    """8 hex characters of the sha256 of the matrix's directory, resolved: what tells two checkouts
    of one project apart in a local image's tag."""
    return hashlib.sha256(os.fsencode(root.resolve())).hexdigest()[:8]


def default_build_tag(loaded: LoadedMatrix, variant: str) -> str:
    """The tag of a variant's build image made from its recipe where the matrix declares none:
    `localhost/<import name>-build-<variant>-<project digest>`, lowercase, at most 106 characters
    (a cross image adds `-cross-<machine>` and stays a valid reference of at most 128)."""
    name = slug(loaded.matrix.engine.import_name)[:48].strip("-")
    return f"localhost/{name}-build-{slug(variant)[:32].strip('-')}-{project_digest(loaded.root)}"


def checkouts_form(tag: str, suffix: str = "") -> re.Pattern[str] | None:
    """The tags every checkout of one project gives the image `tag` (a default tag: its digest
    is any), with `suffix` after it (`-cross-aarch64`); None for a tag of another form."""
    match = re.fullmatch(r"(localhost/[a-z0-9-]+-build-[a-z0-9-]+)-[0-9a-f]{8}", tag)
    if match is None:
        return None
    return re.compile(re.escape(match.group(1)) + r"-[0-9a-f]{8}" + re.escape(suffix))


RELEASE_IMAGE_GCC: Mapping[str, str] = {
    "manylinux_2_28": "14",
    "manylinux_2_34": "14",
}
"""The GCC major each release image compiles with (cibuildwheel's manylinux images: gcc-toolset-14),
which a local build image matches unless the matrix names another (`build_image.debian.gcc`)."""


def release_image_gcc(release: str) -> str | None:
    """The GCC major of a release image, named (`manylinux_2_28`) or by reference
    (`quay.io/pypa/manylinux_2_28_x86_64:2025.01.01-1`); None when it is not known."""
    name = release.rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]
    known = (gcc for image, gcc in RELEASE_IMAGE_GCC.items() if name == image or name.startswith(f"{image}_"))
    return next(known, None)


def build_gcc(declared: str | None, release: str) -> str | None:
    """A local build image's GCC major: the declared one, none for the suite's own, else the
    release image's."""
    if declared == "suite":
        return None
    return declared or release_image_gcc(release)
