"""The tags of local build images: one made from the matrix's recipe carries a short digest of the
project's directory, so two checkouts of one project never replace each other's image
(`release.machine.imaging` tags the image of the same inputs instead of making it again)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from release.config.matrix import LoadedMatrix

TAG_RULE = (
    "a build image made from a recipe is tagged localhost/<import name>-build-<variant>-<8 hex of the "
    "sha256 of the matrix's directory>, so two copies of a project never replace each other's image "
    "(one made from the same recipe is tagged, not made again); a declared build_image.local is kept "
    "as written"
)
"""The rule in one sentence: `release build --container` prints it, docs/local-builds.md says it."""


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
