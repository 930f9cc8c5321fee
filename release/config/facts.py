"""What a serving image really holds, recorded beside the matrix (`images.facts.json`) and keyed by
the image's digest: its Pythons, its C library, where the GPU runtime resolves (the `simulate`
layout it really has) and its toolkit version.

`release images probe` reads the facts from the image itself (`release.smoke.probe`) and
`--write` records them; facts from public sources (an image's Dockerfile, its release notes) may
stand in until a probe runs where a registry is reachable, and say so (`source: public`). The
plan reads the recorded facts once (`release.plan.imagefacts`): a declaration the image
contradicts is an error before anything is installed, and the local stand-ins take the image's
real Pythons and layout.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from release.atomic import write_text
from release.config.names import NAME, NAME_RULE, PYTHON_VERSION
from release.errors import MatrixError, Problem
from release.table import printable
from release.wheel.files import read_json, reason

FACTS_FILE = "images.facts.json"
SCHEMA_VERSION = 1
MAX_FACTS_BYTES = 1 << 20
Source = Literal["probe", "public"]
RuntimeKind = Literal["system", "prefix", "absent"]
Via = Literal["ld.so.conf.d", "LD_LIBRARY_PATH"]
SYSTEM_LIBRARY_DIRS = (
    "/lib",
    "/usr/lib",
    "/lib64",
    "/usr/lib64",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
)
"""Directories the loader searches by default: a runtime found there is the `system` layout."""


@dataclass(frozen=True, kw_only=True)
class Layout:
    """Where the image's loader finds the GPU runtime, in `simulate`'s terms."""

    runtime: RuntimeKind
    prefix: str | None = None
    via: Via | None = None

    def spelled(self) -> str:
        """As it is written in matrix.yaml's `simulate`."""
        if self.runtime != "prefix":
            return f"{{runtime: {self.runtime}}}"
        return f"{{runtime: prefix, prefix: {self.prefix}, via: {self.via}}}"


@dataclass(frozen=True, kw_only=True)
class ImageFacts:
    """One image's facts. `None` means unknown (a public source that does not say)."""

    reference: str
    """The reference the facts are of (a registry reference pinned by digest, or a local tag)."""
    digest: str | None
    """The digest they belong to: a changed digest means probe again."""
    source: Source
    pythons: Mapping[str, str] | None = None
    """CPython version -> its interpreter's path in the image."""
    platforms: Mapping[str, str] = field(default_factory=dict)
    """CPython version -> its `sysconfig.get_platform()`."""
    glibc: str | None = None
    layout: Layout | None = None
    """Where the variant's runtime resolves; None: unknown."""
    runtime: Mapping[str, str | None] = field(default_factory=dict)
    """Runtime soname -> the path it resolves to (None: it does not resolve)."""
    toolkit_version: str | None = None
    notes: tuple[str, ...] = ()
    """Where each fact came from (public sources), or what the probe saw beside them."""

    def to_json(self) -> dict[str, Any]:
        layout = None
        if self.layout is not None:
            layout = {"runtime": self.layout.runtime, "prefix": self.layout.prefix, "via": self.layout.via}
        return {
            "reference": self.reference,
            "digest": self.digest,
            "source": self.source,
            "pythons": dict(self.pythons) if self.pythons is not None else None,
            "platforms": dict(self.platforms),
            "glibc": self.glibc,
            "layout": layout,
            "runtime": dict(self.runtime),
            "toolkit_version": self.toolkit_version,
            "notes": list(self.notes),
        }


def facts_path(matrix_path: Path) -> Path:
    return matrix_path.parent / FACTS_FILE


def _problem(path: Path, where: str, message: str) -> MatrixError:
    return MatrixError([Problem(str(path), None, where, message)])


def _text(value: object, path: Path, where: str, *, optional: bool = True) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
        raise _problem(path, where, "expected a one-line string" + (" or null" if optional else ""))
    return value


def _mapping(value: object, path: Path, where: str) -> dict[str, str | None]:
    if not isinstance(value, dict):
        raise _problem(path, where, "expected an object")
    return {str(k): _text(v, path, f"{where}.{k}") for k, v in value.items()}


def _layout(value: object, path: Path, where: str) -> Layout | None:
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("runtime") not in ("system", "prefix", "absent"):
        raise _problem(path, where, "expected {runtime: system|prefix|absent, prefix, via} or null")
    via = value.get("via")
    if via not in (None, "ld.so.conf.d", "LD_LIBRARY_PATH"):
        raise _problem(path, f"{where}.via", "expected ld.so.conf.d, LD_LIBRARY_PATH or null")
    return Layout(
        runtime=value["runtime"], prefix=_text(value.get("prefix"), path, f"{where}.prefix"), via=via
    )


def _facts(name: str, raw: object, path: Path) -> ImageFacts:
    where = f"images.{name}"
    if not isinstance(raw, dict):
        raise _problem(path, where, "expected an object")
    source = raw.get("source")
    if source not in ("probe", "public"):
        raise _problem(path, f"{where}.source", "expected 'probe' or 'public'")
    pythons = raw.get("pythons")
    for version in pythons if isinstance(pythons, dict) else ():
        if not PYTHON_VERSION.fullmatch(version):
            raise _problem(path, f"{where}.pythons.{printable(version)}", "expected a version like 3.12")
    notes = raw.get("notes", [])
    if not isinstance(notes, list):
        raise _problem(path, f"{where}.notes", "expected a list of strings")
    return ImageFacts(
        reference=_text(raw.get("reference"), path, f"{where}.reference", optional=False) or "",
        digest=_text(raw.get("digest"), path, f"{where}.digest"),
        source=source,
        pythons=None
        if pythons is None
        else {k: v or "" for k, v in _mapping(pythons, path, f"{where}.pythons").items()},
        platforms={
            k: v or "" for k, v in _mapping(raw.get("platforms", {}), path, f"{where}.platforms").items()
        },
        glibc=_text(raw.get("glibc"), path, f"{where}.glibc"),
        layout=_layout(raw.get("layout"), path, f"{where}.layout"),
        runtime=_mapping(raw.get("runtime", {}), path, f"{where}.runtime"),
        toolkit_version=_text(raw.get("toolkit_version"), path, f"{where}.toolkit_version"),
        notes=tuple(_text(n, path, f"{where}.notes", optional=False) or "" for n in notes),
    )


def load_facts(path: Path) -> dict[str, ImageFacts]:
    """The recorded facts by image name; {} when the file does not exist. A malformed file is a
    `MatrixError` naming the file and the key."""
    try:
        raw = read_json(path, MAX_FACTS_BYTES)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise _problem(path, "", f"cannot read it: {reason(exc)}") from None
    except ValueError as exc:
        raise _problem(path, "", str(exc)) from None
    if not isinstance(raw, dict) or raw.get("schema_version") != SCHEMA_VERSION:
        raise _problem(path, "schema_version", f"expected schema_version {SCHEMA_VERSION}")
    images = raw.get("images", {})
    if not isinstance(images, dict):
        raise _problem(path, "images", "expected an object of image name -> facts")
    for name in images:
        if not NAME.fullmatch(name):
            raise _problem(path, f"images.{printable(name)}", f"not an image name {NAME_RULE}")
    return {str(name): _facts(str(name), value, path) for name, value in images.items()}


def save_facts(path: Path, facts: Mapping[str, ImageFacts]) -> Path:
    """Write the facts (sorted by image name), whole or not at all."""
    document = {
        "schema_version": SCHEMA_VERSION,
        "about": (
            "What each serving image holds, keyed by digest: written by `release images probe --write` "
            "(source: probe) or from public sources until a probe runs where a registry is reachable "
            "(source: public). A changed digest means probe again."
        ),
        "images": {name: facts[name].to_json() for name in sorted(facts)},
    }
    return write_text(path, json.dumps(document, indent=2) + "\n")


def digest_of(reference: str) -> str | None:
    """The digest a reference pins (`...@sha256:...`), else None."""
    _, at, digest = reference.partition("@")
    return digest if at else None


class _Pinned(Protocol):
    @property
    def container(self) -> str | None: ...
    @property
    def pin(self) -> str: ...


def probe_pins(images: Mapping[str, _Pinned], facts: Mapping[str, ImageFacts]) -> dict[str, str]:
    """Image name -> `tag@digest` for each `pin: probe` tag whose digest a probe recorded for
    exactly that reference (facts of another tag, or only from public sources, pin nothing)."""
    pins = {}
    for name, image in images.items():
        recorded = facts.get(name)
        if image.pin != "probe" or image.container is None or "@" in image.container or recorded is None:
            continue
        # the probe of the tag, or a later one of the tag pinned by that digest
        if (
            recorded.source == "probe"
            and recorded.digest
            and recorded.reference.partition("@")[0] == image.container
        ):
            pins[name] = f"{image.container}@{recorded.digest}"
    return pins
