"""Variant wheels from the per-variant wheels, with no compile: the same files under the shared
distribution's name, a variant label, and `*.dist-info/variant.json`; plus the index's
`{name}-{version}-variants.json`.

`matrix.yaml`'s `variant_wheels` opts in and names the distribution and the variants; each
variant's label and properties come from its resolved backend, toolkit and architectures
(`release.variants.metadata`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.utils import canonicalize_name

from release.atomic import write_bytes
from release.config.matrix import LoadedMatrix
from release.errors import MatrixError, Problem, UsageError
from release.plan.resolve import ResolvedVariant
from release.variants.metadata import (
    DIST_INFO_FILE,
    Description,
    VariantDataError,
    describe,
    dist_info_document,
    document,
    index_file_name,
    provider_data,
    render,
)
from release.wheel.names import (
    InvalidWheelName,
    filename_stem,
    parse_wheel_name,
    split_variant_label,
    variant_wheel_filename,
    version_field,
)
from release.wheel.own import member_names
from release.wheel.rewrite import rewrite_wheel
from release.wheel.sbom import is_sbom, renamed

DEFAULT_OUT = "wheelhouse-variants"
"""Where `release variants` writes, beside the matrix (the wheelhouse holds only `<variant>/`)."""


@dataclass(frozen=True)
class VariantSet:
    """The variant wheels a matrix asks for: one distribution, a description per variant."""

    distribution: str
    descriptions: tuple[Description, ...]
    variants: Mapping[str, ResolvedVariant]
    """The matrix variants described, by name, as the variant wheels' verify sees them: the
    shared distribution's name in place of the per-name one."""

    def variant_for_label(self, label: str) -> ResolvedVariant | None:
        desc = next((d for d in self.descriptions if d.label == label), None)
        return self.variants[desc.variant] if desc else None


def _problem(loaded: LoadedMatrix, key: str, message: str) -> MatrixError:
    return MatrixError([Problem(loaded.path.name, loaded.lines.get(key), key, message)])


def variant_set(loaded: LoadedMatrix, variants: Mapping[str, ResolvedVariant]) -> VariantSet:
    """The matrix's `variant_wheels`, resolved; `MatrixError` naming the key when it is unusable."""
    wanted = loaded.matrix.variant_wheels
    if wanted is None:
        msg = (
            f"{loaded.path.name} has no `variant_wheels`: add e.g. `variant_wheels: {{distribution: "
            f"{next(iter(variants.values())).distribution}}}` to make PEP 825 variant wheels"
        )
        raise UsageError(msg)
    data = provider_data()
    names = wanted.variants or tuple(n for n, v in variants.items() if v.backend_name in data.backends)
    for name in names:
        declared = loaded.matrix.variants.get(name)
        if name not in variants and declared is not None and declared.held_back is not None:
            raise _problem(
                loaded, "variant_wheels.variants",
                f"variant {name!r} is held back ({declared.held_back}): take it out of "
                "variant_wheels.variants, or remove its held_back",
            )  # fmt: skip
        if name not in variants:
            known = ", ".join(variants)
            raise _problem(loaded, "variant_wheels.variants", f"no variant {name!r} (variants: {known})")
    descriptions = []
    for name in names:
        try:
            descriptions.append(describe(variants[name], data))
        except VariantDataError as exc:
            raise _problem(loaded, "variant_wheels.variants", str(exc)) from None
    labels = [d.label for d in descriptions]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise _problem(
            loaded, "variant_wheels.variants",
            f"variants {', '.join(d.variant for d in descriptions if d.label in twice)} share the label "
            f"{twice[0]!r}: one label, one variant (two CPU variants, or two of one toolkit?)",
        )  # fmt: skip
    shared = wanted.distribution
    return VariantSet(
        shared,
        tuple(descriptions),
        {d.variant: replace(variants[d.variant], distribution=shared) for d in descriptions},
    )


_TOP = re.compile(r"^(?P<name>[^/-]+)(?P<rest>-[^/]+\.(?:dist-info|data))(?P<tail>/.*)$")


def _rename_top(stem: str, member: str) -> str:
    """`engine_rocm-0.1.0.dist-info/METADATA` -> `engine-0.1.0.dist-info/METADATA`;
    members outside the `.dist-info` and `.data` directories keep their names."""
    match = _TOP.match(member)
    return f"{stem}{match['rest']}{match['tail']}" if match else member


def _set_name(distribution: str) -> Callable[[bytes], bytes]:
    def edit(data: bytes) -> bytes:
        head, sep, body = data.partition(b"\n\n")
        lines = head.split(b"\n")
        named = [i for i, line in enumerate(lines) if line.lower().startswith(b"name:")]
        if len(named) != 1:
            msg = f"METADATA has {len(named)} Name fields, not one"
            raise VariantDataError(msg)
        lines[named[0]] = b"Name: " + distribution.encode("ascii")
        return b"\n".join(lines) + sep + body

    return edit


def make_wheel(wheel: Path, out: Path, shared: VariantSet, desc: Description) -> Path:
    """One variant wheel in `out` from the per-variant `wheel`. Its SBOMs (auditwheel's, naming
    the libraries repair grafted) move with the dist-info and name the variant wheel's file."""
    name = parse_wheel_name(wheel)
    stem = filename_stem(shared.distribution)
    version_part = version_field(wheel)
    info = f"{stem}-{version_part}.dist-info"
    target = out / variant_wheel_filename(name, shared.distribution, desc.label)
    sboms = {
        _rename_top(stem, member): renamed(stem, version_part, target.name)
        for member in member_names(wheel)
        if is_sbom(member)
    }
    return rewrite_wheel(
        wheel,
        target,
        rename=lambda member: _rename_top(stem, member),
        edit={f"{info}/METADATA": _set_name(shared.distribution), **sboms},
        add={f"{info}/{DIST_INFO_FILE}": render(dist_info_document(desc, shared.descriptions))},
    )


def per_variant_wheels(wheelhouse: Path, variant: ResolvedVariant, version: str | None) -> list[Path]:
    """The variant's wheels in `wheelhouse/<variant>/` (of its per-name distribution)."""
    directory = wheelhouse / variant.name
    found = []
    for path in sorted(directory.glob("*.whl")) if directory.is_dir() else []:
        try:
            parsed = parse_wheel_name(path)
        except InvalidWheelName:
            continue
        if parsed.matches(variant.distribution) and (version is None or parsed.version == version):
            found.append(path)
    return found


def make_variant_wheels(
    shared: VariantSet,
    per_name: Mapping[str, ResolvedVariant],
    wheelhouse: Path,
    out: Path,
    *,
    version: str | None = None,
    log: Callable[[str], None] = print,
) -> tuple[list[Path], list[Path]]:
    """(variant wheels, `-variants.json` files) written to `out` from the wheels in `wheelhouse`.
    Old variant wheels of the distribution in `out` are removed first, so `out` is one set."""
    sources = {
        d.label: per_variant_wheels(wheelhouse, per_name[d.variant], version) for d in shared.descriptions
    }
    missing = [d for d in shared.descriptions if not sources[d.label]]
    if missing:
        names = ", ".join(f"{d.variant} ({wheelhouse / d.variant}/)" for d in missing)
        msg = f"no wheels of {names}{f' at version {version}' if version else ''}: build them first"
        raise UsageError(msg)
    out.mkdir(parents=True, exist_ok=True)
    stem = filename_stem(shared.distribution)
    for old in [*out.glob(f"{stem}-*.whl"), *out.glob(f"{stem}-*-variants.json")]:
        old.unlink()
    made: list[Path] = []
    versions: set[str] = set()
    for desc in shared.descriptions:
        for wheel in sources[desc.label]:
            made.append(make_wheel(wheel, out, shared, desc))
            versions.add(version_field(wheel))
            log(f"{desc.variant:>6} {desc.label:>8}  {made[-1].name}")
    indexes = []
    for version_part in sorted(versions):
        present = [
            d for d in shared.descriptions
            if any(version_field(w) == version_part for w in sources[d.label])
        ]
        written = write_bytes(out / index_file_name(stem, version_part), render(document(present)))
        written.chmod(0o644)
        indexes.append(written)
    return made, indexes


def label_of(path: Path) -> str | None:
    return split_variant_label(path)[1]


def distribution_matches(path: Path, distribution: str) -> bool:
    base, _label = split_variant_label(path)
    try:
        return parse_wheel_name(base).distribution == canonicalize_name(distribution)
    except InvalidWheelName:
        return False

