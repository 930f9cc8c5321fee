"""Soname globs: whether two `fnmatch` patterns match a common name, and one such name.

The engine's own libraries (`engine.own_libraries`) must never be matched by a runtime exclude;
comparing the patterns as strings misses `*.so*` against `libfoo*` (both match `libfoo.so`).
"""

from __future__ import annotations

import fnmatch
import functools
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from release.config.backends import Backend

_STAR = "*"


def _glob_tokens(pattern: str) -> tuple[str, ...]:
    """`*`, `?`, a whole `[...]` class, or one literal character each, as `fnmatch` reads them."""
    tokens: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "[":
            j = i
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j < n:
                tokens.append(pattern[i - 1 : j + 1])
                i = j + 1
                continue
            tokens.append("[")  # an unclosed bracket is a literal '['
        elif c == "*":
            if not tokens or tokens[-1] != _STAR:
                tokens.append(_STAR)
        elif c == "?":
            tokens.append("?")
        else:
            tokens.append(c)
    return tuple(tokens)


def _candidates(*tokens: str) -> list[str]:
    """Characters among which a common match of one-character tokens is found if one exists.

    A token matches a union of character ranges bounded by the characters it names, so any
    non-empty intersection holds a bound, the character after one, NUL or an unnamed letter.
    """
    named = {ch for token in tokens for ch in token}
    found = {"\0", "x"} | named | {chr(ord(ch) + 1) for ch in named if ord(ch) < 0x10FFFF}
    return sorted(found)


@functools.lru_cache(maxsize=4096)
def _common_char(a: str, b: str) -> str | None:
    """A character both one-character tokens match, or None."""
    if len(a) == 1 and a != "?":
        return a if fnmatch.fnmatchcase(a, b) else None
    if len(b) == 1 and b != "?":
        return b if fnmatch.fnmatchcase(b, a) else None
    both = (ch for ch in _candidates(a, b) if fnmatch.fnmatchcase(ch, a) and fnmatch.fnmatchcase(ch, b))
    return next(both, None)


@functools.lru_cache(maxsize=4096)
def common_match(a: str, b: str) -> str | None:
    """A name that both globs match, or None when there is none.

    A search over pairs of positions in the two patterns (each at most `MAX_GLOB` long): a
    character is matched by one token of each, or by a `*` of one and a token of the other.
    """
    ta, tb = _glob_tokens(a), _glob_tokens(b)
    start = (0, 0)
    came: dict[tuple[int, int], tuple[tuple[int, int], str]] = {start: (start, "")}
    queue = deque([start])
    while queue:
        i, j = queue.popleft()
        if i == len(ta) and j == len(tb):
            name: list[str] = []
            at = (i, j)
            while at != start:
                at, emitted = came[at]
                name.append(emitted)
            return "".join(reversed(name))
        x = ta[i] if i < len(ta) else None
        y = tb[j] if j < len(tb) else None
        steps: list[tuple[tuple[int, int], str | None]] = []
        if x == _STAR:
            steps.append(((i + 1, j), ""))
            if y is not None and y != _STAR:
                steps.append(((i, j + 1), _common_char(y, "?")))
        if y == _STAR:
            steps.append(((i, j + 1), ""))
            if x is not None and x != _STAR:
                steps.append(((i + 1, j), _common_char(x, "?")))
        if x is not None and y is not None and _STAR not in (x, y):
            steps.append(((i + 1, j + 1), _common_char(x, y)))
        for state, ch in steps:
            if ch is not None and state not in came:
                came[state] = ((i, j), ch)
                queue.append(state)
    return None


def runtime_globs(backend: Backend, excludes: Iterable[str] = ()) -> tuple[str, ...]:
    """Every library of a backend's GPU runtime: its `runtime_libraries`, its default excludes and
    a variant's own runtime `excludes` (decided here, for the plan, verify and init alike)."""
    return tuple(dict.fromkeys((*backend.runtime_libraries, *backend.exclude, *excludes)))


def known_runtime_globs(backends: Iterable[Backend]) -> tuple[str, ...]:
    """The runtime libraries of every backend: what a wheel that is no variant's is judged against."""
    return tuple(dict.fromkeys(g for backend in backends for g in runtime_globs(backend)))
