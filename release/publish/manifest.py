"""The release manifest: one JSON file for the whole checked set.

It lists each wheel's name, variant, size and sha256, the sha256 of its verify report, the
toolkit version that checked it, and what is known of the toolkits and images that built and
smoke-tested it. `release release-checks --manifest` writes it, before anything is published;
every later hand-off (preflight, `dist/`, the index listing, a downloaded GitHub Release)
compares what it holds against it (`release verify-release`). It is attached to the GitHub
Release and attested there, never uploaded to the index.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from release import __version__
from release.errors import PublishError
from release.plan.resolve import ResolvedVariant
from release.publish import handoff
from release.wheel.names import report_path

MANIFEST_VERSION = 1
MANIFEST_LIMIT = 16 << 20


@dataclass(frozen=True)
class Entry:
    """One wheel of the set as the manifest lists it."""

    name: str
    variant: str
    distribution: str
    size: int
    sha256: str
    report_sha256: str


def _variant_facts(variant: ResolvedVariant) -> dict[str, object]:
    return {
        "toolkit": variant.toolkit,
        "build_image": variant.build_image.release,
        "smoke_images": [image.name for image in variant.images],
    }


def assemble(
    entries: Sequence[Entry],
    variants: Mapping[str, ResolvedVariant],
    *,
    tag: str,
    version: str,
    held_back: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, object]:
    """The manifest; `held_back` names the matrix's variants left out on purpose
    (`{name: {"distribution": ..., "reason": ...}}`), so the set says what it is not."""
    return {
        "manifest_version": MANIFEST_VERSION,
        "tag": tag,
        "version": version,
        "toolkit_version": __version__,
        "wheels": [
            {
                "name": e.name,
                "variant": e.variant,
                "distribution": e.distribution,
                "size": e.size,
                "sha256": e.sha256,
                "report_sha256": e.report_sha256,
                **(_variant_facts(variants[e.variant]) if e.variant in variants else {}),
            }
            for e in sorted(entries, key=lambda e: e.name)
        ],
        "held_back": {name: dict(facts) for name, facts in sorted((held_back or {}).items())},
    }


def write(path: Path, manifest: Mapping[str, object]) -> Path:
    """Written under a temporary name beside `path`, then renamed."""
    text = json.dumps(manifest, indent=2) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, scratch = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        Path(scratch).replace(path)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise
    return path


def load(path: Path) -> dict[str, dict[str, object]]:
    """The manifest's wheels by file name; `PublishError` for anything that is not a manifest."""
    try:
        with path.open("rb") as fh:
            data = fh.read(MANIFEST_LIMIT + 1)
        if len(data) > MANIFEST_LIMIT:
            msg = f"{path}: over {MANIFEST_LIMIT >> 20} MiB: not a release manifest"
            raise PublishError(msg)
        document = json.loads(data)
    except OSError as exc:
        msg = f"{path}: cannot read the release manifest ({exc.strerror})"
        raise PublishError(msg) from None
    except (ValueError, RecursionError) as exc:
        msg = f"{path}: not a JSON release manifest ({str(exc)[:80]})"
        raise PublishError(msg) from None
    wheels = document.get("wheels") if isinstance(document, dict) else None
    if not isinstance(document, dict) or document.get("manifest_version") != MANIFEST_VERSION:
        msg = f"{path}: not a release manifest of version {MANIFEST_VERSION}"
        raise PublishError(msg)
    if not isinstance(wheels, list) or not wheels:
        msg = f"{path}: lists no wheels"
        raise PublishError(msg)
    found: dict[str, dict[str, object]] = {}
    for i, wheel in enumerate(wheels):
        ok = (
            isinstance(wheel, dict)
            and isinstance(wheel.get("name"), str)
            and str(wheel["name"]).endswith(".whl")
            and "/" not in str(wheel["name"])
            and isinstance(wheel.get("sha256"), str)
            and isinstance(wheel.get("size"), int)
        )
        if not ok or not isinstance(wheel, dict):
            msg = f"{path}: wheels[{i}] is not a wheel entry (name, size, sha256)"
            raise PublishError(msg)
        found[str(wheel["name"])] = wheel
    return found


def check_directory(wheels: Mapping[str, Mapping[str, object]], directory: Path) -> list[str]:
    """`directory` (flat, or `<variant>/`) holds exactly the manifest's wheels, byte for byte;
    a report beside a wheel must be the one the manifest names."""
    present = {p.name: p for p in sorted(directory.rglob("*.whl"))} if directory.is_dir() else {}
    problems = [f"{name}: in the manifest, not in {directory}" for name in sorted(set(wheels) - set(present))]
    extra = sorted(set(present) - set(wheels))
    problems += [f"{directory}/{name}: not in the manifest (refused)" for name in extra]
    for name in sorted(set(wheels) & set(present)):
        path, entry = present[name], wheels[name]
        found = handoff.sha256_of(path)
        if found != entry["sha256"]:
            problems.append(handoff.mismatch(str(path), str(entry["sha256"]), found))
        elif path.stat().st_size != entry["size"]:
            problems.append(f"{path}: {path.stat().st_size} bytes, the manifest says {entry['size']}")
        report = report_path(path)
        if report.is_file() and entry.get("report_sha256"):
            digest = handoff.sha256_of(report)
            if digest != entry["report_sha256"]:
                problems.append(
                    f"{report}: report sha256 {digest} is not the manifest's {entry['report_sha256']} "
                    "(the report changed after the set was checked)"
                )
    return problems


def check_listing(wheels: Mapping[str, Mapping[str, object]], listing: Mapping[str, str | None]) -> list[str]:
    """The index lists every wheel of the manifest with the manifest's sha256."""
    problems = []
    for name, entry in sorted(wheels.items()):
        if name not in listing:
            problems.append(f"{name}: not listed on the index")
        elif listing[name] is not None and listing[name] != entry["sha256"]:
            listed = str(listing[name])
            problems.append(handoff.mismatch(f"{name} on the index", str(entry["sha256"]), listed))
    return problems
