"""Container image references as matrix.yaml writes them: `name[:tag][@sha256:<digest>]`.

A tag can be moved to other content after a release was tested against it; a digest cannot. A
serving image that a release job runs (release.yml's smoke-image jobs, the hardware tests) is
therefore expected by digest; `unpinned_message` says how to get one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_HOST = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]+)?$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True)
class ImageReference:
    """One parsed reference."""

    name: str
    tag: str | None
    digest: str | None

    @property
    def pinned(self) -> bool:
        return self.digest is not None


def parse_image_reference(text: str) -> ImageReference:
    """Split and check a reference; ValueError says what is wrong with it."""
    if not text or text != text.strip():
        msg = "an empty reference, or one with surrounding spaces"
        raise ValueError(msg)
    name, _, digest = text.partition("@")
    if digest and not _DIGEST.match(digest):
        msg = f"digest {digest!r} is not sha256:<64 lowercase hex digits>"
        raise ValueError(msg)
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = None
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
        if not _TAG.match(tag):
            msg = f"tag {tag!r} is not a tag (letters, digits, _ . -; at most 128)"
            raise ValueError(msg)
    parts = name.split("/")
    registry = len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost")
    host = parts[0] if registry else None
    path = parts[1:] if host is not None else parts
    if host is not None and not _HOST.match(host):
        msg = f"registry {host!r} is not a host name"
        raise ValueError(msg)
    bad = [p for p in path if not _COMPONENT.match(p)]
    if not path or bad:
        msg = f"repository {'/'.join(path)!r} is not lowercase path components (a-z 0-9 . _ -)"
        raise ValueError(msg)
    return ImageReference(name=name, tag=tag, digest=digest or None)


def unpinned_message(text: str) -> str:
    """Why a tag-only reference is not enough for a release, and the fix."""
    ref = parse_image_reference(text)
    shown = f"{ref.name}:{ref.tag}" if ref.tag else ref.name
    return (
        f"{text!r} is a tag, which can be moved to other content after the release is tested: "
        f"pin it by digest, `{shown}@sha256:<digest>` (`skopeo inspect docker://{text}` or "
        "`docker buildx imagetools inspect` prints it)"
    )
