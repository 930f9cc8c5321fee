"""Rebuild wheels of a release from its manifest and compare them with it, byte for byte.

Nothing is checked out here: the rebuild runs in a checkout of the recorded commit (a different
HEAD is refused), with the recorded `SOURCE_DATE_EPOCH` and version, through the build path the
caller hands in (`release reproduce` picks the host or the container build, as `release build`
does). A wheel whose sha256 is not the manifest's is compared member by member with the published
one, where the caller has it (`release.reproduce.compare`).

A rebuild in a local image compares the image's installed packages with the recorded ones
(`image_notes`) and names those that differ. That is a note, not a refusal: the rebuild goes on,
because a newer package (tzdata, a fix in a library the build never links) often leaves the
wheel's bytes unchanged, and remaking the image cannot bring the old versions back (make-image.sh
takes the archives' current ones). Where a wheel then differs, `release reproduce` names the
package differences as the likely cause.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from release import settings
from release.config.names import ascii_int
from release.errors import ReproduceError, UsageError
from release.plan.steps import BuildStep
from release.publish import handoff, manifest
from release.reproduce import compare, inputs
from release.table import printable
from release.wheel.zip import ZipError

MAX_PACKAGES_NAMED = 10
MAX_EPOCH = 253402300799
"""The last second of the year 9999: a recorded SOURCE_DATE_EPOCH beyond it is not a date."""
"""How many differing packages a note names; the rest are counted."""

Rebuild = Callable[[tuple[BuildStep, ...], Path, str], list[Path]]
"""(one variant's steps, its output directory, the version) -> the wheels built there."""


@dataclass(frozen=True)
class Recorded:
    """One wheel as the manifest lists it."""

    name: str
    variant: str
    identifier: str
    sha256: str
    path: str


@dataclass(frozen=True)
class RecordedRelease:
    """What `release reproduce` reads from a manifest."""

    path: Path
    tag: str
    version: str
    inputs: Mapping[str, object]
    wheels: tuple[Recorded, ...]


@dataclass(frozen=True)
class Outcome:
    """One rebuilt wheel against its manifest entry."""

    recorded: Recorded
    rebuilt: Path | None
    sha256: str | None
    report: str = ""
    """Why it differs, member by member, when it does (empty when identical)."""

    @property
    def identical(self) -> bool:
        return self.sha256 == self.recorded.sha256


def read(path: Path) -> RecordedRelease:
    """The manifest's tag, version, inputs and wheels; `ReproduceError` for a manifest written
    before it recorded its inputs (nothing to rebuild with)."""
    document, wheels = manifest.load_document(path)
    recorded_inputs = document.get("inputs")
    if not isinstance(recorded_inputs, dict):
        msg = (
            f"{path}: records no build inputs (a manifest of a toolkit before `release reproduce`): "
            "there is no commit or SOURCE_DATE_EPOCH to rebuild it with"
        )
        raise ReproduceError(msg)
    entries = tuple(
        Recorded(
            name=name,
            variant=str(w.get("variant", "")),
            identifier=str(w.get("identifier", "")),
            sha256=str(w["sha256"]),
            path=str(w["path"]),
        )
        for name, w in sorted(wheels.items())
    )
    return RecordedRelease(
        path=path,
        tag=str(document.get("tag", "")),
        version=str(document.get("version", "")),
        inputs=recorded_inputs,
        wheels=entries,
    )


def _source(release: RecordedRelease) -> Mapping[str, object]:
    found = release.inputs.get("source")
    return found if isinstance(found, dict) else {}


def check_checkout(release: RecordedRelease, root: Path, engine_dirs: Sequence[Path]) -> list[str]:
    """Refuse (one line) unless this checkout is the recorded commit (and the engine's checkout the
    recorded engine commit); the notes worth printing (uncommitted changes) otherwise."""
    source = _source(release)
    commit, engine = source.get("commit"), source.get("engine_commit")
    if not commit and not engine:
        if inputs.git_head(root) is None:
            # A checkout without git (a rehearsal's jobs get a copy of the tree): no commit on
            # either side to compare.
            name = release.path.name
            return [f"note: neither {name} nor this checkout names a git commit: the source is not checked"]
        msg = f"{release.path}: records no source commit: it cannot say which checkout rebuilds it"
        raise ReproduceError(msg)
    checks = [(str(commit), root, "this checkout")] if commit else []
    checks += [(str(engine), d, f"the engine's checkout {d}") for d in engine_dirs if engine and d != root][
        :1
    ]
    for wanted, directory, what in checks:
        head = inputs.git_head(directory)
        if head != wanted:
            msg = (
                f"{what} is at {head or 'no git commit'}, {release.path.name} was built from {wanted}: "
                f"check out {wanted[:12]} (the tag {release.tag}) and run `release reproduce` there"
            )
            raise ReproduceError(msg)
    changed = inputs.git_changes(root)
    if changed:
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        return [f"note: uncommitted changes in {shown}: a difference may come from them"]
    return []


def input_notes(release: RecordedRelease, variants: Mapping[str, Mapping[str, object]]) -> list[str]:
    """Where this checkout and machine differ from the recorded inputs (tool versions, a variant's
    resolved inputs): a rebuild goes on, and a difference is then expected."""
    notes = []
    recorded_tools = release.inputs.get("tools")
    here = inputs.tool_versions()
    if isinstance(recorded_tools, dict):
        for tool in inputs.TOOLS:
            if recorded_tools.get(tool) != here.get(tool):
                notes.append(
                    f"note: {tool} {recorded_tools.get(tool)} built the release, {here.get(tool)} is here"
                )
    recorded_variants = release.inputs.get("variants")
    for name, resolved in sorted(variants.items()):
        now = json.loads(json.dumps(resolved, default=str))  # as the manifest holds it
        then = recorded_variants.get(name) if isinstance(recorded_variants, dict) else None
        if isinstance(then, dict):
            # the image's packages are compared where a rebuild runs in it (`image_notes`)
            then, now = _without_packages(then), _without_packages(now)
            keys = sorted(k for k in set(then) | set(now) if then.get(k) != now.get(k))
            if keys:
                notes.append(
                    f"note: {name}: the matrix here resolves {', '.join(keys)} otherwise than recorded"
                )
    return notes


def _without_packages(variant: Mapping[str, object]) -> dict[str, object]:
    image = variant.get("build_image")
    if not isinstance(image, dict):
        return dict(variant)
    return {**variant, "build_image": {k: v for k, v in image.items() if k not in inputs.PACKAGE_KEYS}}


def image_notes(
    release: RecordedRelease, variant: str, tag: str, query: inputs.PackageQuery
) -> tuple[list[str], int]:
    """(the notes, how many packages differ) for the packages installed in the local image `tag`
    (read through `query`) against the ones the manifest records for `variant`'s local image: a
    note naming the first `MAX_PACKAGES_NAMED` that differ (`name: recorded -> found`) and counting
    the rest; one line where either side is unknown; nothing when they are the same."""
    variants = release.inputs.get("variants")
    recorded = variants.get(variant) if isinstance(variants, dict) else None
    image = recorded.get("build_image") if isinstance(recorded, dict) else None
    image = image if isinstance(image, dict) else {}
    then = image.get("local_packages")
    if not isinstance(then, list):
        why = image.get("local_packages_reason") or "a manifest written before it recorded them"
        return [f"note: {variant}: {release.path.name} records no packages of its local image ({why})"], 0
    found = query(tag)
    if found.packages is None:
        return [f"note: {variant}: the packages of image {tag} cannot be read here: {found.reason}"], 0
    differences = inputs.package_differences(then, found.packages)
    if not differences:
        return [], 0
    shown = [f"  {d}" for d in differences[:MAX_PACKAGES_NAMED]]
    if len(differences) > MAX_PACKAGES_NAMED:
        shown.append(f"  and {len(differences) - MAX_PACKAGES_NAMED} more")
    head = (
        f"note: {variant}: image {tag} holds {len(differences)} package(s) other than "
        f"{release.path.name} records (recorded -> here); a wheel may differ because of them:"
    )
    return [head, *shown], len(differences)


def choose(release: RecordedRelease, patterns: Sequence[str] | None) -> tuple[Recorded, ...]:
    """The manifest's wheels whose identifier matches one of `patterns` (all without any);
    `UsageError` naming the identifiers it has for a pattern that matches none."""
    if not patterns:
        return release.wheels
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(w.identifier, p) for w in release.wheels)]
    if unmatched:
        known = ", ".join(w.identifier for w in release.wheels if w.identifier) or "none"
        msg = f"--identifier {', '.join(unmatched)}: not in {release.path.name} (it lists {known})"
        raise UsageError(msg)
    return tuple(w for w in release.wheels if any(fnmatch.fnmatchcase(w.identifier, p) for p in patterns))


def steps_for(chosen: Sequence[Recorded], builds: Sequence[BuildStep]) -> dict[str, tuple[BuildStep, ...]]:
    """The plan's steps for the chosen wheels, by variant; `ReproduceError` for a wheel whose
    identifier this checkout's matrix does not plan."""
    by_id = {s.identifier: s for s in builds}
    missing = [w.identifier or w.name for w in chosen if w.identifier not in by_id]
    if missing:
        msg = f"{', '.join(missing)}: not a build step of this checkout's matrix (is it the recorded commit?)"
        raise ReproduceError(msg)
    grouped: dict[str, tuple[BuildStep, ...]] = {}
    for wheel in chosen:
        step = by_id[wheel.identifier]
        grouped[step.variant.name] = (*grouped.get(step.variant.name, ()), step)
    return grouped


@contextlib.contextmanager
def recorded_epoch(release: RecordedRelease) -> Iterator[str]:
    """`SOURCE_DATE_EPOCH` set to the recorded one while the block runs (every build path reads it)."""
    epoch = str(release.inputs.get("source_date_epoch") or "")
    if ascii_int(epoch, high=MAX_EPOCH) is None:
        shown = printable(epoch[:40]) or "missing"
        msg = (
            f"{release.path}: inputs.source_date_epoch is {shown}, not a number of seconds "
            f"(ASCII digits, up to {MAX_EPOCH})"
        )
        raise ReproduceError(msg)
    with settings.given("SOURCE_DATE_EPOCH", epoch):
        yield epoch


def reproduce(
    release: RecordedRelease,
    grouped: Mapping[str, tuple[BuildStep, ...]],
    chosen: Sequence[Recorded],
    *,
    rebuild: Rebuild,
    out: Path,
    published: Path | None,
) -> list[Outcome]:
    """Rebuild each variant's chosen steps into `out/<variant>`, with the recorded epoch and
    version, and compare every wheel with the manifest (and with the published wheel in
    `published`, flat or `<variant>/<name>`, when it differs)."""
    built: dict[str, Path] = {}
    with recorded_epoch(release):
        for variant, steps in grouped.items():
            for wheel in rebuild(steps, out / variant, release.version):
                built[wheel.name] = wheel
    return [_outcome(w, built.get(w.name), published) for w in chosen]


def _outcome(recorded: Recorded, rebuilt: Path | None, published: Path | None) -> Outcome:
    if rebuilt is None:
        return Outcome(recorded, None, None, f"{recorded.name}: the rebuild made no wheel of this name")
    digest = handoff.sha256_of(rebuilt)
    if digest == recorded.sha256:
        return Outcome(recorded, rebuilt, digest)
    original = _published(recorded, published)
    if original is None:
        hint = "pass --published DIR (the release's wheels) to name the members that differ"
        return Outcome(
            recorded,
            rebuilt,
            digest,
            f"{recorded.name}: sha256 {digest}, the manifest's {recorded.sha256}; {hint}",
        )
    if handoff.sha256_of(original) != recorded.sha256:
        msg = f"{original}: not the manifest's {recorded.name} (its sha256 is not the recorded one)"
        raise ReproduceError(msg)
    try:
        differences = compare.compare_wheels(original, rebuilt)
    except (OSError, ZipError, ValueError) as exc:
        return Outcome(recorded, rebuilt, digest, f"{recorded.name}: differs, and cannot be compared ({exc})")
    return Outcome(recorded, rebuilt, digest, compare.describe(differences, original, rebuilt))


def _published(recorded: Recorded, directory: Path | None) -> Path | None:
    if directory is None:
        return None
    for candidate in (directory / recorded.path, directory / recorded.name):
        if candidate.is_file():
            return candidate
    return None
