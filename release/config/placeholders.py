"""The `yours:` lines `release init` leaves in a matrix for the maintainer, and which are still
unfilled: `release plan` warns on each, so a matrix does not pass with them forgotten.

A marker is a comment saying `yours:` (`# yours: serving images ...`, `description: null  #
yours: a one-line summary`). It annotates its own line when it follows a value, else the next line
that is not a comment; that line is unfilled while its value is still init's placeholder (`{}`,
`[]`, `null`, `""`), or while its own comment still says `yours: placeholder` (a value init
made up, such as a CMake switch it could not find). A marker above a mapping the maintainer
filled, or an optional example left commented out, says nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

from release.wheel.files import read_bounded

MAX_LINES = 20_000
MAX_BYTES = 4 << 20
_RENAME = "yours: placeholder"
"""A value init made up (a CMake switch it could not find): flagged until the comment goes."""
_PLACEHOLDER = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*:\s*(\{\}|\[\]|null|~|\"\"|'')\s*(?:#.*)?$")


def unfilled(path: Path) -> list[str]:
    """`matrix.yaml:33: engine.smoke.commands is still empty (a yours: line init left for you)`,
    one per unfilled placeholder, in file order."""
    try:
        lines = read_bounded(path, MAX_BYTES).decode("utf-8", errors="replace").splitlines()[:MAX_LINES]
    except OSError:
        return []
    found: list[str] = []
    seen: set[int] = set()
    # the next line that is not a comment, for every line: one pass from the end (a run of 20,000
    # comment lines is read once, not once per comment)
    following = [-1] * (len(lines) + 1)
    for index in range(len(lines) - 1, -1, -1):
        below = index + 1
        following[index] = (
            below if below < len(lines) and not lines[below].lstrip().startswith("#") else following[below]
        )
    for index, line in enumerate(lines):
        _, hash_sign, comment = line.partition("#")
        if not hash_sign or "yours:" not in comment:
            continue
        target = index
        if line.lstrip().startswith("#"):  # a comment line: it annotates the next value
            target = following[index]
        if target < 0 or target in seen:
            continue
        if target == index and _RENAME in comment:
            seen.add(target)
            key = line.split(":", 1)[0].strip()
            found.append(
                f"{path.name}:{target + 1}: {key}: init's placeholder, to replace with yours "
                "(a `yours:` line left for you to fill in)"
            )
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
