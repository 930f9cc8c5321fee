"""Steps this machine cannot run and GitHub's runners can: today, the free-threaded Pythons.

No free-threaded CPython comes to a machine without a network beyond Debian's archive (Debian ships
none; uv and pyenv download from github.com and python.org), while manylinux images carry
/opt/python/cp314-cp314t and cp315-cp315t. A free-threaded step whose interpreter is not found here is
GitHub-only: `release plan` and `release build` say so in one line, and the rehearsal shows its jobs
as GitHub-only, never as passed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

from release.config.pythons import python, sort_key


class _Step(Protocol):
    @property
    def identifier(self) -> str: ...

    @property
    def python(self) -> str: ...


S = TypeVar("S", bound=_Step)


def split_github_only(
    steps: Iterable[S], found: Callable[[str], bool]
) -> tuple[tuple[S, ...], tuple[S, ...]]:
    """(the steps this machine runs, the free-threaded ones it cannot: `found(key)` is False)."""
    here: list[S] = []
    github: list[S] = []
    for step in steps:
        (github if python(step.python).free_threaded and not found(step.python) else here).append(step)
    return tuple(here), tuple(github)


def github_only_line(steps: Iterable[_Step], what: str = "build steps") -> str | None:
    """One line naming the GitHub-only steps, or None when there are none."""
    chosen = list(steps)
    if not chosen:
        return None
    pythons = sorted({s.python for s in chosen}, key=sort_key)
    first = chosen[0].identifier
    more = f" and {len(chosen) - 1} more" if len(chosen) > 1 else ""
    return (
        f"GitHub-only: {len(chosen)} {what} of Python {', '.join(pythons)} ({first}{more}): no free-threaded "
        "CPython on this machine; the release workflow builds and smokes them in manylinux, nothing here "
        "counts them as passed"
    )
