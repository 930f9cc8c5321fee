"""The release manifest: one JSON file for the whole checked set.

It lists each wheel's name, variant, size and sha256, the sha256 of its verify report, the
toolkit version that checked it, and what is known of the toolkits and images that built and
smoke-tested it; `inputs` records what a rebuild needs (the source commit, `SOURCE_DATE_EPOCH`,
tool versions, each variant's image (a local one with its installed packages), toolkit, settings
and environment), and each wheel its build identifier and compilers, so that `release reproduce`
can rebuild it and compare the bytes.
`release release-checks --manifest` writes it, before anything is published;
every later hand-off (preflight, `dist/`, the index listing, a downloaded GitHub Release)
compares what it holds against it (`release verify-release`). It is attached to the GitHub
Release and attested there, never uploaded to the index.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from release import __version__
from release.atomic import write_text
from release.errors import PublishError
from release.plan.resolve import ResolvedVariant
from release.publish import handoff
from release.wheel.files import not_regular, read_json, reason, walk
from release.wheel.names import REPORT_SUFFIX

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
    identifier: str = ""
    """The build step that made it (`cp312-cpu-manylinux_x86_64`): what `release reproduce
    --identifier` names."""
    compilers: tuple[str, ...] = ()
    """The compilers its verify report found in its ELF files' `.comment` sections."""

    @property
    def path(self) -> str:
        """Its full relative path in the release (`<variant>/<name>`, as release-checks found it)."""
        return f"{self.variant}/{self.name}" if self.variant else self.name


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
    inputs: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The manifest; `held_back` names the matrix's variants left out on purpose
    (`{name: {"distribution": ..., "reason": ...}}`), so the set says what it is not; `inputs`
    is what a rebuild needs (`release.reproduce.inputs.collect`)."""
    return {
        "manifest_version": MANIFEST_VERSION,
        "tag": tag,
        "version": version,
        "toolkit_version": __version__,
        "wheels": [
            {
                "name": e.name,
                "path": e.path,
                "variant": e.variant,
                "distribution": e.distribution,
                "size": e.size,
                "sha256": e.sha256,
                "report_sha256": e.report_sha256,
                **({"identifier": e.identifier} if e.identifier else {}),
                **({"compilers": list(e.compilers)} if e.compilers else {}),
                **(_variant_facts(variants[e.variant]) if e.variant in variants else {}),
            }
            for e in sorted(entries, key=lambda e: e.name)
        ],
        "held_back": {name: dict(facts) for name, facts in sorted((held_back or {}).items())},
        **({"inputs": dict(inputs)} if inputs is not None else {}),
    }


def write(path: Path, manifest: Mapping[str, object]) -> Path:
    """Written under a temporary name beside `path`, then renamed."""
    text = json.dumps(manifest, indent=2) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text(path, text)


def load(path: Path) -> dict[str, dict[str, object]]:
    """The manifest's wheels by file name; `PublishError` for anything that is not a manifest."""
    return load_document(path)[1]


def load_document(path: Path) -> tuple[dict[str, object], dict[str, dict[str, object]]]:
    """(the whole manifest, its wheels by file name); `PublishError` for anything that is not a
    manifest."""
    try:
        document = read_json(path, MANIFEST_LIMIT)
    except OSError as exc:
        msg = f"{path}: cannot read the release manifest ({reason(exc)})"
        raise PublishError(msg) from None
    except ValueError as exc:
        msg = f"{path}: not a JSON release manifest ({exc})"
        raise PublishError(msg) from None
    wheels = document.get("wheels") if isinstance(document, dict) else None
    if not isinstance(document, dict) or document.get("manifest_version") != MANIFEST_VERSION:
        msg = f"{path}: not a release manifest of version {MANIFEST_VERSION}"
        raise PublishError(msg)
    if not isinstance(wheels, list) or not wheels:
        msg = f"{path}: lists no wheels"
        raise PublishError(msg)
    found: dict[str, dict[str, object]] = {}
    paths: set[str] = set()
    for i, wheel in enumerate(wheels):
        ok = (
            isinstance(wheel, dict)
            and isinstance(wheel.get("name"), str)
            and str(wheel["name"]).endswith(".whl")
            and "/" not in str(wheel["name"])
            and str(wheel["name"]).isprintable()
            and isinstance(wheel.get("sha256"), str)
            and isinstance(wheel.get("size"), int)
        )
        if not ok or not isinstance(wheel, dict):
            msg = f"{path}: wheels[{i}] is not a wheel entry (name, size, sha256)"
            raise PublishError(msg)
        name = str(wheel["name"])
        rel = _relative_path(wheel, name)
        if rel is None:
            msg = f"{path}: wheels[{i}].path is not a relative path ending in /{name}"
            raise PublishError(msg)
        if name in found or rel in paths:
            msg = f"{path}: wheels[{i}] lists {rel} twice: a manifest names every file once"
            raise PublishError(msg)
        found[name] = {**wheel, "path": rel}
        paths.add(rel)
    return document, found


def _relative_path(wheel: Mapping[str, object], name: str) -> str | None:
    """The entry's full relative path (`path`, else `<variant>/<name>`), or None when it is not a
    plain relative path to a file called `name`."""
    variant = wheel.get("variant")
    default = f"{variant}/{name}" if isinstance(variant, str) and variant else name
    rel = wheel.get("path", default)
    if not isinstance(rel, str) or rel.startswith("/") or "\\" in rel or not rel.isprintable():
        return None
    parts = rel.split("/")
    if parts[-1] != name or any(part in ("", ".", "..") for part in parts):
        return None
    return rel


def check_directory(
    wheels: Mapping[str, Mapping[str, object]], directory: Path, *, ignore: Sequence[Path] = ()
) -> list[str]:
    """`directory` holds exactly the manifest's files, byte for byte, and nothing else.

    Each wheel is at its full relative path (`<variant>/<name>`) or, in a flat layout (`dist/`,
    a GitHub Release), at its name; a verify report beside a wheel must be the one the manifest
    names. Every other file, anywhere below (an added script, a copy of a wheel in another
    folder, a link), is refused; so is a file that is not a regular file. `ignore` names files
    that are not part of the release (the manifest itself).
    """
    if not directory.is_dir():
        return [f"{directory}: no such directory"]
    problems, seen, reports = _sort_directory(wheels, directory, ignore)
    problems += [
        f"{e['path']}: in the manifest, not in {directory}"
        for n, e in sorted(wheels.items())
        if n not in seen
    ]
    problems += _check_wheel_bytes(wheels, seen)
    problems += _check_reports(wheels, seen, reports)
    return problems


def _sort_directory(
    wheels: Mapping[str, Mapping[str, object]], directory: Path, ignore: Sequence[Path]
) -> tuple[list[str], dict[str, Path], list[tuple[Path, str]]]:
    """Walk `directory`: the files refused, each manifest wheel found ({name: path}) and each
    verify report found beside a manifest place ([(report, wheel name)])."""
    skipped = {p.resolve() for p in ignore}
    by_place = {str(e["path"]): n for n, e in wheels.items()} | {n: n for n in wheels}
    problems: list[str] = []
    seen: dict[str, Path] = {}
    reports: list[tuple[Path, str]] = []
    for path in sorted(walk(directory)):
        if path.is_dir() and not path.is_symlink():
            continue
        rel = path.relative_to(directory).as_posix()
        if not path.is_symlink() and path.resolve() in skipped:  # (a link, a loop too, is refused below)
            continue
        refused = None if path.is_file() and not path.is_symlink() else (not_regular(path) or "a link")
        if refused:
            problems.append(f"{directory}/{rel}: {refused}, not a regular file of the release (refused)")
            continue
        wheel_rel = rel.removesuffix(REPORT_SUFFIX)
        if rel.endswith(REPORT_SUFFIX) and wheel_rel in by_place:
            reports.append((path, by_place[wheel_rel]))
            continue
        name = by_place.get(rel)
        if name is None:
            problems.append(f"{directory}/{rel}: not in the manifest (refused)")
            continue
        if name in seen:
            problems.append(f"{directory}/{rel}: a second copy of {name} (also {seen[name]}): refused")
            continue
        seen[name] = path
    return problems, seen, reports


def _check_wheel_bytes(wheels: Mapping[str, Mapping[str, object]], seen: Mapping[str, Path]) -> list[str]:
    """Each wheel found has the manifest's sha256 and size."""
    problems = []
    for name, path in sorted(seen.items()):
        entry = wheels[name]
        found = handoff.sha256_of(path)
        if found != entry["sha256"]:
            problems.append(handoff.mismatch(str(path), str(entry["sha256"]), found))
        elif path.stat().st_size != entry["size"]:
            problems.append(f"{path}: {path.stat().st_size} bytes, the manifest says {entry['size']}")
    return problems


def _check_reports(
    wheels: Mapping[str, Mapping[str, object]], seen: Mapping[str, Path], reports: Sequence[tuple[Path, str]]
) -> list[str]:
    """Each verify report lies beside its wheel and has the sha256 the manifest names."""
    problems = []
    for report, name in reports:
        expected = wheels[name].get("report_sha256")
        if name in seen and report.parent != seen[name].parent:
            problems.append(f"{report}: a report away from its wheel {seen[name]} (refused)")
        elif expected:
            digest = handoff.sha256_of(report)
            if digest != expected:
                problems.append(
                    f"{report}: report sha256 {digest} is not the manifest's {expected} "
                    "(the report changed after the set was checked)"
                )
    return problems


def check_listing(wheels: Mapping[str, Mapping[str, object]], listing: Mapping[str, str | None]) -> list[str]:
    """The index lists every wheel of the manifest with the manifest's sha256."""
    problems = []
    for name, entry in sorted(wheels.items()):
        if name not in listing:
            problems.append(f"{name}: not listed on the index")
        elif listing[name] is None:
            problems.append(
                f"{name}: listed on the index without a sha256: not a confirmation (fetch it, or check "
                "the downloaded release against the manifest)"
            )
        elif listing[name] != entry["sha256"]:
            listed = str(listing[name])
            problems.append(handoff.mismatch(f"{name} on the index", str(entry["sha256"]), listed))
    return problems
