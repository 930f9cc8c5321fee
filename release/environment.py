"""Where the toolkit runs, as the process environment says it: read here and nowhere else.

`CI` (set to `true` by GitHub Actions and most CI services) means nothing may be skipped: a missing
interpreter fails a nox session, a skipped test fails the suite. `GITHUB_ACTIONS=true` means the
release workflow's own runner, where `build --container` uses the release image by default. The
test suite's conftest asks the same functions, so the suite and the toolkit cannot disagree.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

CI_VARIABLE = "CI"
GITHUB_ACTIONS_VARIABLE = "GITHUB_ACTIONS"
_TRUE = frozenset({"true", "1", "yes"})


def _flag(name: str, env: Mapping[str, str] | None) -> bool:
    value = (os.environ if env is None else env).get(name, "")
    return value.strip().lower() in _TRUE


def in_ci(env: Mapping[str, str] | None = None) -> bool:
    """`CI=true` (or 1, yes): a CI service runs us, and nothing may be skipped."""
    return _flag(CI_VARIABLE, env)


def in_github_actions(env: Mapping[str, str] | None = None) -> bool:
    """`GITHUB_ACTIONS=true`: a GitHub Actions runner."""
    return _flag(GITHUB_ACTIONS_VARIABLE, env)
