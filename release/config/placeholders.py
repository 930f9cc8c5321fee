"""The `yours:` lines `release init` leaves in a matrix for the maintainer, and which are still
unfilled: `release plan` warns on each, so a matrix does not pass with them forgotten.

A marker is a comment saying `yours:` (`# yours: serving images ...`, `description: null  #
yours: a one-line summary`). It annotates its own line when it follows a value, else the next line
that is not a comment; that line is unfilled while its value is still init's placeholder (`{}`,
`[]`, `null`, `""`). A marker above a mapping the maintainer filled, or an optional example left
commented out, says nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

MAX_LINES = 20_000
_PLACEHOLDER = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*:\s*(\{\}|\[\]|null|~|\"\"|'')\s*(?:#.*)?$")


def unfilled(path: Path) -> list[str]:
    """`matrix.yaml:33: engine.smoke.commands is still empty (a yours: line init left for you)`,
    one per unfilled placeholder, in file order."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[:MAX_LINES]
    except OSError:
        return []
    found: list[str] = []
    seen: set[int] = set()
    for index, line in enumerate(lines):
        _, hash_sign, comment = line.partition("#")
        if not hash_sign or "yours:" not in comment:
            continue
        target = index
        if line.lstrip().startswith("#"):  # a comment line: it annotates the next value
            target = next(
                (i for i in range(index + 1, len(lines)) if not lines[i].lstrip().startswith("#")), -1
            )
        if target < 0 or target in seen:
            continue
        match = _PLACEHOLDER.match(lines[target])
        if match is None:
            continue
        seen.add(target)
        found.append(
            f"{path.name}:{target + 1}: {match.group(1)}: {match.group(2)} is init's placeholder "
            "(a `yours:` line left for you to fill in)"
        )
    return found
