"""Symbol version names (`GLIBC_2.34`, `GLIBCXX_3.4.29`) and the versions they carry."""

from __future__ import annotations

import re
from collections.abc import Iterable

_VERSIONED = re.compile(r"^([A-Z][A-Z_]*?)_(\d+(?:\.\d+)*)$")


def parse_version(text: str) -> tuple[int, ...]:
    """'2.34' -> (2, 34); non-numeric parts end the version ('2.3.4a' -> (2, 3))."""
    parts: list[int] = []
    for piece in text.split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


def split_versioned(name: str) -> tuple[str, str] | None:
    """'GLIBCXX_3.4.29' -> ('GLIBCXX', '3.4.29'); 'GLIBC_PRIVATE' -> None."""
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
