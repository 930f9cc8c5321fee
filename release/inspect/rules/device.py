"""The rule about GPU code objects: present only when the variant declares them, for every
declared architecture."""

from __future__ import annotations

from release.inspect.rules.registry import Finding, RuleContext, listing, not_applicable, rule


@rule("device-code")
def device_code(ctx: RuleContext) -> Finding:
    """GPU code objects present when the variant declares none, or declared architectures missing."""
    if ctx.variant is None:
        return not_applicable(ctx)
    carrying = [e for e in ctx.wheel.elf_files if e.device_sections]
    found_arch = sorted({a for e in carrying for a in e.architectures})
    paths = tuple(e.path for e in carrying)
    if not ctx.variant.device_code:
        if carrying:
            what = [f"{e.path} ({', '.join(e.device_sections)})" for e in carrying]
            archs = f" for {', '.join(found_arch)}" if found_arch else ""
            return Finding(
                "fail",
                f"GPU code objects{archs} in {listing(what)}, but variant {ctx.variant.name} "
                "declares device_code: false",
                paths,
            )
        return Finding("pass", f"no GPU code objects (variant {ctx.variant.name}: device_code: false)")
    missing = [a for a in ctx.variant.architectures if a not in found_arch]
    if not carrying or missing:
        return Finding(
            "fail",
            f"declared architectures missing from the GPU code objects: {', '.join(missing)} "
            f"(found: {', '.join(found_arch) or 'none'})",
            paths,
        )
    return Finding("pass", f"GPU code objects for {', '.join(found_arch)}", paths)
