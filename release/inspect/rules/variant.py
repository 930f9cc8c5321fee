"""The rule about PEP 825 variant metadata: what an installer reads to pick a variant wheel."""

from __future__ import annotations

import functools

from release.inspect.rules.registry import Finding, RuleContext, listing, matches, rule
from release.variants.metadata import (
    DIST_INFO_FILE,
    VariantDataError,
    describe,
    properties_in,
    read_document,
)
from release.wheel.archive import dist_info_leaf, parse_metadata
from release.wheel.names import split_variant_label


@functools.cache
def _every_runtime() -> tuple[str, ...]:
    """The runtime libraries of every backend the toolkit knows (a null variant binds none)."""
    from release.config.backends import load_backends  # noqa: PLC0415 (start-up time: yaml, schemas)
    from release.config.globs import known_runtime_globs  # noqa: PLC0415
    from release.config.resources import toolkit_backends  # noqa: PLC0415

    backends = load_backends(toolkit_backends())
    return tuple(sorted(known_runtime_globs(backends.values())))


def _bound_runtimes(ctx: RuleContext) -> list[str]:
    globs = _every_runtime()
    found = {n for e in ctx.wheel.elf_files for n in e.needed if matches(n, globs)}
    for name, text in ctx.wheel.texts.items():
        if dist_info_leaf(name) == "METADATA":
            external = parse_metadata(text).get_all("Requires-External") or []
            found.update(r.split(";")[0].strip() for r in external if matches(r.split(";")[0].strip(), globs))
    return sorted(found)


@rule("variant-metadata")
def variant_metadata(ctx: RuleContext) -> Finding:
    """A variant wheel's label and `variant.json`: the schema installers accept, the label's
    syntax, properties that are the variant's backend and toolkit, a null variant that binds no
    GPU runtime."""
    _base, label = split_variant_label(ctx.wheel.path.name)
    members = [m.name for m in ctx.wheel.members if dist_info_leaf(m.name) == DIST_INFO_FILE]
    if label is None and not members:
        return Finding("not-applicable", "not a variant wheel (no label in its name, no variant.json)")
    if label is None:
        return Finding(
            "fail", f"{members[0]}, but no variant label in the file name: installers take a plain wheel",
            tuple(members),
        )  # fmt: skip
    if len(members) != 1:
        return Finding("fail", f"label {label!r}, but {len(members)} {DIST_INFO_FILE} files in the wheel")
    member = members[0]
    data = ctx.wheel.read(member)
    problems = read_document(data, label=label)
    if problems:
        return Finding("fail", f"{member}: {listing(problems, 4)}", (member,))
    properties = properties_in(data, label)
    if ctx.variant is not None:
        try:
            expected = describe(ctx.variant)
        except VariantDataError as exc:
            return Finding("fail", str(exc), (member,))
        wanted = {ns: dict(feats) for ns, feats in expected.properties.items()}
        if expected.label != label or wanted != properties:
            return Finding(
                "fail",
                f"label {label!r} with {properties or 'no properties'}, but variant {ctx.variant.name} "
                f"({ctx.variant.backend_name} {ctx.variant.toolkit or ''}) is {expected.label!r} with "
                f"{wanted or 'no properties'}",
                (member,),
            )
    if not properties:
        bound = _bound_runtimes(ctx)
        if bound:
            return Finding(
                "fail",
                f"the null variant binds the GPU runtime {listing(bound)}: installers give the null "
                "variant to machines with no GPU (make it from a CPU build)",
                (member,),
            )
        return Finding("pass", "the null variant; binds no GPU runtime", (member,))
    lines = [f"{ns} :: {f} :: {v}" for ns, feats in properties.items() for f, vs in feats.items() for v in vs]
    return Finding("pass", f"label {label!r}: {listing(lines)}", (member,))
