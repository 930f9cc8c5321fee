"""A serving image's declaration (matrix.yaml) held against its facts (`release.config.facts`):
every disagreement names the matrix line, what the image has, and the edit to make.

Pure: facts come in (recorded, or just probed by `release.smoke.probe`), rows and disagreements
go out. `release images probe` prints them; smoke refuses a leg whose declared Python the image's
recorded facts lack before anything is installed; `release ready` reports pinned images whose
facts are missing or belong to another digest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from release.config.facts import ImageFacts, Layout, digest_of
from release.config.matrix import Image, LoadedMatrix
from release.errors import SmokeError
from release.wheel.names import parse_platform_tag


@dataclass(frozen=True)
class Disagreement:
    """One declared fact the image contradicts."""

    file: str
    line: int | None
    key: str
    declared: str
    found: str
    fix: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.key}: declares {self.declared}, but the image has {self.found}: {self.fix}"


@dataclass(frozen=True)
class Row:
    image: str
    fact: str
    declared: str
    found: str
    status: str  # ok, differs, unknown


def image_sonames(loaded: LoadedMatrix, name: str) -> tuple[str, ...]:
    """The runtime sonames the variants that smoke in image `name` bind."""
    found: list[str] = []
    for variant in loaded.matrix.variants.values():
        if name not in variant.images:
            continue
        backend = loaded.backends.get(variant.backend)
        if backend is not None and variant.toolkit is not None:
            found += backend.sonames_for(variant.toolkit)
    return tuple(dict.fromkeys(found))


def declared_pythons(loaded: LoadedMatrix, image: Image) -> tuple[str, ...]:
    return image.python or loaded.matrix.python


def expected_layout(image: Image) -> Layout | None:
    """The layout the declaration says the image has (None: it says nothing about it)."""
    if image.expect == "runtime-missing":
        return Layout(runtime="absent")
    sim = image.simulate
    if sim is None:
        return None
    if sim.runtime == "prefix":
        return Layout(runtime="prefix", prefix=sim.prefix, via=sim.via)
    return Layout(runtime=sim.runtime)


def current(loaded: LoadedMatrix, name: str, facts: ImageFacts | None) -> ImageFacts | None:
    """`facts` where they belong to the image as declared now: the same pinned digest (or, for
    an unpinned or local reference, the same reference); None where the image moved on."""
    if facts is None:
        return None
    reference = loaded.matrix.images[name].container
    if reference is None:
        return facts
    digest = digest_of(reference)
    return facts if (facts.digest == digest if digest else facts.reference == reference) else None


def _line(loaded: LoadedMatrix, *keys: str) -> int | None:
    return next((loaded.lines[k] for k in keys if k in loaded.lines), None)


def _versions(values: tuple[str, ...] | list[str]) -> str:
    return ", ".join(values) if values else "none"


def compare(loaded: LoadedMatrix, name: str, facts: ImageFacts) -> tuple[list[Row], list[Disagreement]]:
    """Every fact of image `name` the declaration speaks of, held against `facts`."""
    image = loaded.matrix.images[name]
    file = loaded.path.name
    base = f"images.{name}"
    rows: list[Row] = []
    problems: list[Disagreement] = []

    declared = declared_pythons(loaded, image)
    if facts.pythons is None:
        rows.append(Row(name, "python", _versions(declared), "unknown", "unknown"))
    else:
        has = sorted(facts.pythons, key=lambda v: tuple(int(p) for p in v.split(".")))
        lacking = [v for v in declared if v not in facts.pythons]
        rows.append(Row(name, "python", _versions(declared), _versions(has), "differs" if lacking else "ok"))
        if lacking:
            usable = [v for v in has if v in loaded.matrix.python] or has
            key = f"{base}.python" if image.python else base
            fix = f"set python: {json.dumps(usable)}" if image.python else f"add python: {json.dumps(usable)}"
            if not usable:
                fix = "this image has no CPython: remove it from the variants' images"
            problems.append(
                Disagreement(
                    file,
                    _line(loaded, f"{base}.python", base),
                    key,
                    f"Python {_versions(list(declared))}",
                    f"Python {_versions(has)} only",
                    fix,
                )
            )

    floor = parse_platform_tag(loaded.matrix.platform.floor)
    if facts.glibc is None:
        rows.append(
            Row(
                name,
                "glibc",
                f">= {floor.libc[0]}.{floor.libc[1]}" if floor.libc else "-",
                "unknown",
                "unknown",
            )
        )
    elif floor.libc is not None:
        want = f"{floor.libc[0]}.{floor.libc[1]}"
        try:
            older = tuple(int(p) for p in facts.glibc.split(".")[:2]) < floor.libc
        except ValueError:
            older = False
        rows.append(
            Row(name, "glibc", f">= {want} ({floor.text})", facts.glibc, "differs" if older else "ok")
        )
        if older:
            problems.append(
                Disagreement(
                    file,
                    _line(loaded, "platform.floor", base),
                    "platform.floor",
                    floor.text,
                    f"glibc {facts.glibc}",
                    f"wheels tagged {floor.text} cannot install there: "
                    f"lower the floor, or drop images.{name}",
                )
            )

    want_layout = expected_layout(image)
    if want_layout is not None:
        found_layout = facts.layout
        if found_layout is None:
            rows.append(Row(name, "runtime", want_layout.spelled(), "unknown", "unknown"))
        else:
            same = _same_layout(want_layout, found_layout)
            where = ", ".join(f"{s} -> {p}" for s, p in facts.runtime.items() if p) or "no runtime"
            rows.append(
                Row(
                    name,
                    "runtime",
                    want_layout.spelled(),
                    f"{found_layout.spelled()} ({where})",
                    "ok" if same else "differs",
                )
            )
            if not same:
                if image.expect == "runtime-missing":
                    key, fix = (
                        f"{base}.expect",
                        "remove `expect: runtime-missing`, or use an image without the runtime",
                    )
                else:
                    key, fix = f"{base}.simulate", f"set simulate: {found_layout.spelled()}"
                problems.append(
                    Disagreement(
                        file,
                        _line(loaded, key, f"{base}.simulate", base),
                        key,
                        want_layout.spelled(),
                        f"{found_layout.spelled()} ({where})",
                        fix,
                    )
                )
    if facts.toolkit_version:
        rows.append(Row(name, "toolkit", "-", facts.toolkit_version, "ok"))
    return rows, problems


def _same_layout(want: Layout, found: Layout) -> bool:
    if want.runtime != found.runtime:
        return False
    if want.runtime != "prefix":
        return True
    return (want.prefix or "").rstrip("/") == (found.prefix or "").rstrip("/") and want.via == found.via


def missing_pythons(loaded: LoadedMatrix, recorded: Mapping[str, ImageFacts]) -> list[Disagreement]:
    """Images whose recorded facts (for the digest declared now) lack a declared Python: what
    smoke refuses before anything is installed."""
    found = []
    for name in loaded.matrix.images:
        facts = current(loaded, name, recorded.get(name))
        if facts is None:
            continue
        found += [
            d for d in compare(loaded, name, facts)[1] if d.key in (f"images.{name}", f"images.{name}.python")
        ]
    return found


def pinned_without_facts(loaded: LoadedMatrix, recorded: Mapping[str, ImageFacts]) -> dict[str, str]:
    """Registry images pinned by digest whose facts are missing or belong to another digest:
    image name -> why."""
    out: dict[str, str] = {}
    for name, image in loaded.matrix.images.items():
        if image.container is None or digest_of(image.container) is None:
            continue
        facts = recorded.get(name)
        if facts is None:
            out[name] = "no recorded facts"
        elif current(loaded, name, facts) is None:
            out[name] = f"facts recorded for {facts.digest or facts.reference}, not the pinned digest"
    return out


def refuse_missing_pythons(loaded: LoadedMatrix) -> None:
    """A declared Python that a serving image's recorded facts lack (for the digest declared now)
    stops `release plan --github release` and `release smoke` before anything is built or
    installed: one line per image, a `SmokeError`."""
    lacking = missing_pythons(loaded, loaded.image_facts)
    if lacking:
        raise SmokeError("\n".join(str(d) for d in lacking))
