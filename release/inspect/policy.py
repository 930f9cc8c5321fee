"""The manylinux policies of auditwheel: which system libraries and symbol versions a tag allows."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

from release.config.names import ascii_int
from release.inspect.versions import parse_version


@dataclass(frozen=True)
class Policy:
    """One manylinux policy of auditwheel: the system libraries and symbol versions it allows."""

    name: str
    libc: tuple[int, int]
    libraries: frozenset[str]
    symbol_versions: Mapping[str, Mapping[str, Sequence[str]]]
    """arch -> version prefix (GLIBC, GLIBCXX, CXXABI, GCC…) -> the versions allowed."""

    def max_allowed(self, arch: str, prefix: str) -> tuple[int, ...] | None:
        """The newest version with this prefix the policy allows on this architecture."""
        allowed = self.symbol_versions.get(arch, {}).get(prefix)
        if allowed is None:
            return None
        return _newest(tuple(allowed))


@cache
def _newest(versions: tuple[str, ...]) -> tuple[int, ...]:
    return max((parse_version(v) for v in versions), default=())


def policies_from_json(document: object) -> tuple[Policy, ...]:
    """Policies from the data of auditwheel's `manylinux-policy.json`, oldest first."""
    result: list[Policy] = []
    if not isinstance(document, list):
        return ()
    for entry in document:
        name = entry.get("name", "") if isinstance(entry, dict) else ""
        match = re.match(r"^manylinux_([0-9]+)_([0-9]+)$", name, re.ASCII)
        if not match:
            continue
        result.append(
            Policy(
                name=name,
                libc=(ascii_int(match.group(1), high=99) or 0, ascii_int(match.group(2), high=999) or 0),
                libraries=frozenset(entry.get("lib_whitelist") or ()),
                symbol_versions=entry.get("symbol_versions") or {},
            )
        )
    return tuple(sorted(result, key=lambda p: p.libc))


def policy_for(policies: Iterable[Policy], libc: tuple[int, int]) -> Policy | None:
    """The newest policy a glibc version satisfies (`manylinux_2_42` -> the newest one known)."""
    best: Policy | None = None
    for policy in policies:
        if policy.libc <= libc and (best is None or policy.libc > best.libc):
            best = policy
    return best
