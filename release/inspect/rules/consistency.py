"""consistency: the wheels of one release agree with each other.

One version throughout; the same engine-owned files in every variant (Python builds of one variant
identical; across variants the same paths, apart from files whose names mark them as one runtime's);
each variant binds only its own runtime and carries no other variant's runtime libraries.
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from release.inspect.rules.registry import Finding, RuleContext, listing, matches, release_rule

if TYPE_CHECKING:
    from release.plan.resolve import ResolvedVariant

_PYTHON_SUFFIX = re.compile(r"\.(cpython-[^.]*|abi3|pypy[^.]*)(?=\.so$)")


def _owned(ctx: RuleContext, variant: ResolvedVariant) -> dict[str, str]:
    """Engine-owned files (the import package and scripts) -> content digest; extension modules
    under their name without the Python tag, with no digest (they differ per Python)."""
    elves = {e.path for e in ctx.wheel.elf_files}
    owned: dict[str, str] = {}
    for member in ctx.wheel.members:
        path = member.install_path
        if path.startswith((variant.import_name + "/", "<scripts>/")):
            if member.name in elves:
                owned[_PYTHON_SUFFIX.sub("", path)] = ""
            else:
                owned[path] = member.digest
    return owned


def _runtime_words(variant: ResolvedVariant) -> set[str]:
    """Words that mark a file as this variant's runtime's: its backend, its runtime library stems."""
    stems = {re.sub(r"^lib|[.*].*$", "", g) for g in variant.runtime_globs}
    return {w.lower() for w in {variant.backend_name, *stems} if len(w) > 2}


Ours = Sequence[tuple[int, RuleContext, "ResolvedVariant"]]
Globs = tuple[str, ...]


def _files(ours: Ours) -> dict[int, list[str]]:
    problems: dict[int, list[str]] = defaultdict(list)
    owned = {i: _owned(ctx, v) for i, ctx, v in ours}
    by_variant: dict[str, list[int]] = defaultdict(list)
    words: dict[str, set[str]] = {}
    for i, _ctx, v in ours:
        by_variant[v.name].append(i)
        words[v.name] = _runtime_words(v)
    for name, members in by_variant.items():  # one variant: every Python build the same files
        first = owned[members[0]]
        for i in members[1:]:
            differ = sorted(p for p in first.keys() | owned[i].keys() if first.get(p) != owned[i].get(p))
            if differ:
                problems[i].append(f"differs from variant {name}'s other wheels in {listing(differ, 4)}")
    present = {name: set().union(*(owned[i] for i in members)) for name, members in by_variant.items()}
    for name, members in by_variant.items():  # across variants: the same paths, bar one runtime's
        others = set().union(*(w for other, w in words.items() if other != name)) - words[name]
        theirs = set().union(*(paths for other, paths in present.items() if other != name))
        lacks = [p for p in sorted(theirs - present[name]) if not any(w in p.lower() for w in others)]
        for i in members if lacks else ():
            problems[i].append(f"lacks engine files other variants ship: {listing(lacks, 4)}")
    return problems


def _runtimes(ours: Ours, variants: Mapping[str, ResolvedVariant]) -> dict[int, list[str]]:
    problems: dict[int, list[str]] = defaultdict(list)
    for i, ctx, v in ours:
        own = v.runtime_globs
        for other in variants.values():
            if other.backend_name == v.backend_name or not other.runtime_globs:
                continue

            def theirs(name: str, globs: tuple[str, ...] = other.runtime_globs, mine: Globs = own) -> bool:
                return matches(name, globs) and not matches(name, mine)

            bound = sorted({n for e in ctx.wheel.elf_files for n in e.needed if theirs(n)})
            carried = [m.name for m in ctx.wheel.members if theirs(posixpath.basename(m.name))]
            if bound:
                problems[i].append(f"binds variant {other.name}'s runtime ({', '.join(bound)})")
            if carried:
                problems[i].append(f"carries variant {other.name}'s runtime libraries: {listing(carried, 3)}")
    return problems


@release_rule(
    "consistency",
    alone="checked across the wheels of one release (`release verify` given all of them and the matrix)",
)
def consistency(contexts: Sequence[RuleContext], variants: Mapping[str, ResolvedVariant]) -> list[Finding]:
    """One version, the same engine files, and each variant bound to its own runtime only."""
    ours = [(i, c, c.variant) for i, c in enumerate(contexts) if c.variant is not None]
    if len(ours) < 2:
        alone = "one wheel of the release: nothing to compare it with"
        return [Finding("not-applicable", alone if c.variant else "needs a variant") for c in contexts]
    problems: dict[int, list[str]] = defaultdict(list)
    versions = Counter(c.wheel.version for _i, c, _v in ours)
    if len(versions) > 1:
        mixed = ", ".join(f"{v} ({n} wheels)" for v, n in versions.most_common())
        for i, _c, _v in ours:
            problems[i].append(f"the release mixes versions: {mixed}")
    for found in (_files(ours), _runtimes(ours, variants)):
        for i, items in found.items():
            problems[i].extend(items)
    findings: list[Finding] = []
    for i, ctx in enumerate(contexts):
        if ctx.variant is None:
            findings.append(Finding("not-applicable", "needs a variant: not one of the release's wheels"))
        elif problems[i]:
            findings.append(Finding("fail", "; ".join(problems[i])))
        else:
            findings.append(Finding("pass", f"consistent with the release's {len(ours) - 1} other wheels"))
    return findings
