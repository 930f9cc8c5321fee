"""How `release init` reads a project's build files: a regular file only, never blocking, at most a
size cap (a FIFO named `meson.build`, a link to `/dev/zero` or a 2 GiB `CMakeLists.txt` is passed
over, not read); a tree walked iteratively with bounds on depth and entries, never through a link;
and line numbers found once per text (a `LineIndex`), not by counting from the start per match.

`read_source` goes through `release.wheel.files.read_bounded` (open with O_NONBLOCK, fstat
S_ISREG, a cap): point it at the read boundary module when one exists.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from pathlib import Path

from release.wheel import files
from release.wheel.files import read_bounded

MAX_SOURCE_BYTES = 4 << 20
"""The largest build file init reads (Mooncake's biggest CMake file is 40 KB)."""
MAX_DEPTH = 64
"""Directories below the project root a walk enters."""
MAX_ENTRIES = 200_000
"""Directory entries a walk looks at, in all."""


def read_source(path: Path, limit: int = MAX_SOURCE_BYTES) -> str | None:
    """The text of a regular file of at most `limit` bytes (undecodable bytes replaced); None for
    anything else: missing, a FIFO, a device, a directory, a link loop, too large."""
    try:
        return read_bounded(path, limit).decode("utf-8", errors="replace")
    except OSError:
        return None


def walk(
    root: Path,
    *,
    wanted: Callable[[str], bool],
    enter: Callable[[str], bool],
    most: int,
    max_depth: int = MAX_DEPTH,
) -> list[Path]:
    """The files below `root` whose name is `wanted`, in sorted order per directory, entering only
    directories whose name `enter` accepts: `release.wheel.files.walk` (iterative, links never
    followed), stopped at `most` files, `max_depth` levels or `MAX_ENTRIES` entries seen."""
    found: list[Path] = []
    try:
        for path in files.walk(root, max_entries=MAX_ENTRIES, max_depth=max_depth + 1, enter=enter):
            if wanted(path.name) and not path.is_symlink() and path.is_file():
                found.append(path)
                if len(found) >= most:
                    break
    except files.TooManyEntries:
        pass  # the entries seen so far: a bound, not an error (init reports what it found)
    return found


class LineIndex:
    """Line numbers of offsets in one text, from the newline offsets found once."""

    def __init__(self, text: str) -> None:
        self._newlines: list[int] = []
        at = text.find("\n")
        while at != -1:
            self._newlines.append(at)
            at = text.find("\n", at + 1)

    def line(self, offset: int) -> int:
        """The 1-based line of `offset`."""
        return bisect.bisect_left(self._newlines, offset) + 1
