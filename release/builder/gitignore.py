"""What a project's `.gitignore` files leave out, read without git (staging copies a project that
may not be a checkout, and the unit tier starts no process).

The patterns are git's (gitignore(5)), matched by `pathspec`'s `GitIgnoreSpec`, which follows git's
wildmatch (tested against `git check-ignore` in tests/integration/test_gitignore_git.py), on its
RE2 backend (`google-re2`): linear in the path whatever the pattern, where a backtracking regex
takes forever on `*a*a*a*a*a*a*a*a*a*a*a*a*b` and a long name. One `.gitignore` per directory,
applying below it; later rules win, deeper files after shallower ones. A reversed range reads
as git's wildmatch reads it (`[z-a]` matches `z` only), where pathspec would raise `re.error`.
Not read: `.git/info/exclude` and the user's global
excludes (this machine's, not the project's), nor files force-added to git below an ignored
pattern.

Each `.gitignore` is read as a regular file of at most `MAX_BYTES` (a FIFO, a device or a huge file
is passed over: it ignores nothing), through `release.wheel.files.read_bounded`.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from pathspec import GitIgnoreSpec

from release.wheel.files import read_bounded

MAX_RULES = 10_000
"""Rules read per `.gitignore` (a file is the project's own, but a huge one stays bounded)."""
MAX_BYTES = 1 << 20
BACKEND = "re2" if importlib.util.find_spec("re2") is not None else "simple"
"""pathspec's RE2 backend: linear-time matching. google-re2 has no wheel for CPython 3.15 yet
(pyproject.toml asks for it below 3.15 only): there, and only there, pathspec's backtracking
`simple` backend matches, and a pathological pattern can be slow (docs/local-builds.md)."""


CHUNK = 500
"""Patterns per compiled set (RE2 refuses one set of thousands: its memory budget)."""


@dataclass(frozen=True)
class Rules:
    """The patterns of one `.gitignore`, for paths below its directory, in compiled chunks."""

    base: str
    """The directory of the `.gitignore`, relative to the project root (posix, '' for the root)."""
    specs: tuple[GitIgnoreSpec, ...]
    count: int

    def __len__(self) -> int:
        return self.count

    def check(self, path: str) -> bool | None:
        """True (ignored) or False (re-included) by the last rule matching `path`; None if none."""
        verdict = None
        for spec in self.specs:
            result = spec.check_file(path)
            if result.include is not None:
                verdict = result.include
        return verdict


_CLASS = re.compile(r"\[(!?\]?[^\]]*)\]")
_RANGE = re.compile(r"(.)-(.)", re.DOTALL)


def _git_ranges(line: str) -> str:
    """A reversed range as git's wildmatch reads it: `[z-a]` matches its first character only."""

    def fix(match: re.Match[str]) -> str:
        body = _RANGE.sub(lambda r: r.group(0) if r.group(1) <= r.group(2) else r.group(1), match.group(1))
        return f"[{body}]"

    return _CLASS.sub(fix, line)


def _compile(lines: list[str]) -> GitIgnoreSpec | None:
    try:
        return GitIgnoreSpec.from_lines(lines, backend=BACKEND)
    except Exception:
        return None


def parse(text: str, base: str = "") -> Rules:
    """The rules of one `.gitignore` whose directory is `base` (relative to the project root);
    a pattern git never matches (`[z-a]`) is left out."""
    lines = [line for line in text.splitlines()[:MAX_RULES] if line.strip() and not line.startswith("#")]
    specs: list[GitIgnoreSpec] = []
    for start in range(0, len(lines), CHUNK):
        chunk = lines[start : start + CHUNK]
        spec = _compile(chunk)
        if spec is None:
            chunk = [_git_ranges(line) for line in chunk]
            chunk = [line for line in chunk if _compile([line]) is not None]
            spec = _compile(chunk) if chunk else None
        if spec is not None:
            specs.append(spec)
    return Rules(base, tuple(specs), len(lines))


def _read(path: Path) -> str:
    try:
        return read_bounded(path, MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


class GitIgnore:
    """The `.gitignore` files of a project tree, read as the walk reaches their directories."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._rules: dict[str, Rules] = {}

    def _of(self, base: str) -> Rules:
        if base not in self._rules:
            path = self.root / base / ".gitignore" if base else self.root / ".gitignore"
            self._rules[base] = parse(_read(path), base)
        return self._rules[base]

    def ignored(self, relative: str, *, is_dir: bool) -> bool:
        """Whether the path (posix, relative to the root) is ignored; its parents are not (a walk
        that skips ignored directories never asks about what is below them)."""
        parts = relative.split("/")
        bases = [""] + ["/".join(parts[:n]) for n in range(1, len(parts))]
        verdict = False
        for base in bases:
            below = relative[len(base) + 1 :] if base else relative
            result = self._of(base).check(below + "/" if is_dir else below)
            if result is not None:
                verdict = result
        return verdict
