"""Symbol version names (`GLIBC_2.34`, `GLIBCXX_3.4.29`) and the versions they carry.

Version names come from untrusted ELF files: only ASCII digits are numbers here (`re.ASCII`, and
`release.config.names.ascii_int`), so `GLIBC_2.٣٤` is no version at all, never 2.34.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from release.config.names import ascii_int

_VERSIONED = re.compile(r"^([A-Z][A-Z_]*?)_([0-9]+(?:\.[0-9]+)*)$", re.ASCII)
_PART_LIMIT = 1 << 31
"""A part of a version larger than this is no version a C library writes."""


def parse_version(text: str) -> tuple[int, ...]:
    """'2.34' -> (2, 34); a part that is not ASCII digits ends the version ('2.3.4a' -> (2, 3))."""
    parts: list[int] = []
    for piece in text.split("."):
        value = ascii_int(piece, high=_PART_LIMIT, digits=10)
        if value is None:
            break
        parts.append(value)
    return tuple(parts)


def split_versioned(name: str) -> tuple[str, str] | None:
    """'GLIBCXX_3.4.29' -> ('GLIBCXX', '3.4.29'); 'GLIBC_PRIVATE' and 'GLIBC_2.٣٤' -> None."""
    match = _VERSIONED.match(name)
    if match is None:
        return None
    return match.group(1), match.group(2)


def max_required(requirements: Iterable[tuple[str, str]], prefix: str) -> str | None:
    """The newest version with this prefix among (library, version name) pairs."""
    best: str | None = None
    for _library, name in requirements:
        split = split_versioned(name)
        if split is None or split[0] != prefix:
            continue
        if best is None or parse_version(split[1]) > parse_version(best):
            best = split[1]
    return best
