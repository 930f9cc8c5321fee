"""What a project's `.gitignore` files leave out, read without git (staging copies a project that
may not be a checkout, and the unit tier starts no process).

The common part of gitignore(5): one `.gitignore` per directory, applying below it; blank lines and
`#` comments; `!` re-includes; a trailing `/` matches directories only; a pattern with a `/`
elsewhere is anchored at its file's directory, one without matches a name at any depth; `*`, `?`,
`[...]` and `**`. Later rules win, deeper files after shallower ones. Not read: `.git/info/exclude`
and the user's global excludes (this machine's, not the project's), nor files force-added to git
below an ignored pattern.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MAX_RULES = 10_000
"""Rules read per `.gitignore` (a file is the project's own, but a huge one stays bounded)."""


@dataclass(frozen=True)
class Rule:
    base: str
    """The directory of the `.gitignore`, relative to the project root (posix, '' for the root)."""
    pattern: re.Pattern[str]
    negated: bool
    directories_only: bool


def _translate(glob: str) -> str:
    """A gitignore glob (no leading or trailing `/`) as a regular expression over a relative path."""
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("/**", i) and i + 3 == len(glob):
            out.append("/.*")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        elif glob[i] == "[" and (end := glob.find("]", i + 2)) != -1:
            body = glob[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
            i = end + 1
        elif glob[i] == "\\" and i + 1 < len(glob):
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)


def parse(text: str, base: str = "") -> list[Rule]:
    """The rules of one `.gitignore` whose directory is `base` (relative to the project root)."""
    rules: list[Rule] = []
    for raw in text.splitlines()[:MAX_RULES]:
        line = raw.rstrip()
        if line.endswith("\\"):  # an escaped trailing space
            line += " "
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        line = line[1:] if negated else line.removeprefix("\\")
        directories_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        regex = _translate(line) if anchored else "(?:.*/)?" + _translate(line)
        rules.append(Rule(base, re.compile(regex + r"\Z", re.DOTALL), negated, directories_only))
    return rules


class GitIgnore:
    """The `.gitignore` files of a project tree, read as the walk reaches their directories."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._rules: dict[str, list[Rule]] = {}

    def _of(self, base: str) -> list[Rule]:
        if base not in self._rules:
            path = self.root / base / ".gitignore" if base else self.root / ".gitignore"
            try:
                text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
            except OSError:
                text = ""
            self._rules[base] = parse(text, base)
        return self._rules[base]

    def ignored(self, relative: str, *, is_dir: bool) -> bool:
        """Whether the path (posix, relative to the root) is ignored; its parents are not (a walk
        that skips ignored directories never asks about what is below them)."""
        parts = relative.split("/")
        bases = [""] + ["/".join(parts[:n]) for n in range(1, len(parts))]
        verdict = False
        for base in bases:
            below = relative[len(base) + 1 :] if base else relative
            for rule in self._of(base):
                if rule.directories_only and not is_dir:
                    continue
                if rule.pattern.match(below):
                    verdict = not rule.negated
        return verdict
