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

from release.config.facts import ImageFacts, Layout, digest_of, probe_pins
from release.config.matrix import Image, LoadedMatrix
from release.config.names import ascii_int
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
    if sim.runtime == "prefix" and sim.via in ("ld.so.conf.d", "LD_LIBRARY_PATH"):
        return Layout(runtime="prefix", prefix=sim.prefix, via=sim.via)
    if sim.runtime == "prefix":  # none, rocm_sdk: the loader resolves nothing; the import's places do
        return Layout(runtime="absent")
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


_Compared = tuple[Row | None, Disagreement | None]
"""One fact compared: its table row (if the declaration speaks of it) and the disagreement, if any."""


def compare(loaded: LoadedMatrix, name: str, facts: ImageFacts) -> tuple[list[Row], list[Disagreement]]:
    """Every fact of image `name` the declaration speaks of, held against `facts`."""
    compared = [check(loaded, name, facts) for check in (_compare_python, _compare_glibc, _compare_runtime)]
    rows = [row for row, _ in compared if row is not None]
    problems = [problem for _, problem in compared if problem is not None]
    if facts.toolkit_version:
        rows.append(Row(name, "toolkit", "-", facts.toolkit_version, "ok"))
    return rows, problems


def _compare_python(loaded: LoadedMatrix, name: str, facts: ImageFacts) -> _Compared:
    """The Pythons declared against those the image has."""
    image = loaded.matrix.images[name]
    base = f"images.{name}"
    declared = declared_pythons(loaded, image)
    if facts.pythons is None:
        return Row(name, "python", _versions(declared), "unknown", "unknown"), None
    has = sorted(facts.pythons, key=lambda v: tuple(ascii_int(p, high=999) or 0 for p in v.split(".")))
    lacking = [v for v in declared if v not in facts.pythons]
    row = Row(name, "python", _versions(declared), _versions(has), "differs" if lacking else "ok")
    if not lacking:
        return row, None
    usable = [v for v in has if v in loaded.matrix.python] or has
    key = f"{base}.python" if image.python else base
    fix = f"set python: {json.dumps(usable)}" if image.python else f"add python: {json.dumps(usable)}"
    if not usable:
        fix = "this image has no CPython: remove it from the variants' images"
    return row, Disagreement(
        loaded.path.name,
        _line(loaded, f"{base}.python", base),
        key,
        f"Python {_versions(list(declared))}",
        f"Python {_versions(has)} only",
        fix,
    )


def _compare_glibc(loaded: LoadedMatrix, name: str, facts: ImageFacts) -> _Compared:
    """The platform floor's glibc against the image's."""
    platform = loaded.matrix.platform
    floor = parse_platform_tag(platform.floor_of(platform.machines[0]))  # serving legs: the first machine
    if facts.glibc is None:
        want = f">= {floor.libc[0]}.{floor.libc[1]}" if floor.libc else "-"
        return Row(name, "glibc", want, "unknown", "unknown"), None
    if floor.libc is None:
        return None, None
    want = f"{floor.libc[0]}.{floor.libc[1]}"
    try:
        older = tuple(int(p) for p in facts.glibc.split(".")[:2]) < floor.libc
    except ValueError:
        older = False
    row = Row(name, "glibc", f">= {want} ({floor.text})", facts.glibc, "differs" if older else "ok")
    if not older:
        return row, None
    return row, Disagreement(
        loaded.path.name,
        _line(loaded, "platform.floor", f"images.{name}"),
        "platform.floor",
        floor.text,
        f"glibc {facts.glibc}",
        f"wheels tagged {floor.text} cannot install there: lower the floor, or drop images.{name}",
    )


def _compare_runtime(loaded: LoadedMatrix, name: str, facts: ImageFacts) -> _Compared:
    """The runtime layout declared (simulate, expect) against the one found."""
    image = loaded.matrix.images[name]
    base = f"images.{name}"
    want_layout = expected_layout(image)
    if want_layout is None:
        return None, None
    found_layout = facts.layout
    if found_layout is None:
        return Row(name, "runtime", want_layout.spelled(), "unknown", "unknown"), None
    same = _same_layout(want_layout, found_layout)
    where = ", ".join(f"{s} -> {p}" for s, p in facts.runtime.items() if p) or "no runtime"
    found = f"{found_layout.spelled()} ({where})"
    row = Row(name, "runtime", want_layout.spelled(), found, "ok" if same else "differs")
    if same:
        return row, None
    if image.expect == "runtime-missing":
        key, fix = f"{base}.expect", "remove `expect: runtime-missing`, or use an image without the runtime"
    else:
        key, fix = f"{base}.simulate", f"set simulate: {found_layout.spelled()}"
    return row, Disagreement(
        loaded.path.name, _line(loaded, key, f"{base}.simulate", base), key, want_layout.spelled(), found, fix
    )


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


def awaiting_digests(loaded: LoadedMatrix, recorded: Mapping[str, ImageFacts]) -> dict[str, str]:
    """`pin: probe` tags that `recorded` (the file, with what a probe just found) gives no digest:
    image name -> why."""
    return {
        name: "awaits its digest (pin: probe): no probe has recorded one"
        for name, image in loaded.matrix.images.items()
        if image.awaiting_digest and not probe_pins({name: image}, recorded)
    }


def refuse_missing_pythons(loaded: LoadedMatrix) -> None:
    """A declared Python that a serving image's recorded facts lack (for the digest declared now)
    stops `release plan --github release` and `release smoke` before anything is built or
    installed: one line per image, a `SmokeError`."""
    lacking = missing_pythons(loaded, loaded.image_facts)
    if lacking:
        raise SmokeError("\n".join(str(d) for d in lacking))
