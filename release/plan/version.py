"""The release version: from a git tag, the CI environment, or the matrix.

A tag publishes when it matches `publish.tag_pattern` (fnmatch) and what follows the pattern's
literal prefix is a PEP 440 version (`v0.3.13`, `v0.3.13.post1`, `v1.0.0rc1`). The version is
normalized (`v1.0.0-RC1` -> `1.0.0rc1`) so that file names, metadata and the index agree.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from packaging.version import Version

from release import settings
from release.errors import UsageError

if TYPE_CHECKING:  # `verify` imports tag_version: no matrix module at its start-up (issue 60)
    from release.config.matrix import LoadedMatrix, Matrix

_WILDCARDS = "*?["
MAX_TAG = 128
"""The longest tag taken as a release tag: a tag is a name, not a payload."""
MAX_DIGITS = 18
"""The most digits of one version component (PEP 440 sets no bound; int() refuses over 4,300)."""
_NUMBER = re.compile(r"[0-9]+")


def _literal_prefix(pattern: str) -> str:
    cut = min((i for i, ch in enumerate(pattern) if ch in _WILDCARDS), default=len(pattern))
    return pattern[:cut]


def version_from_tag(tag: str, pattern: str) -> str:
    """The normalized version a tag stands for; `UsageError` naming tag and pattern otherwise."""
    name = tag.removeprefix("refs/tags/")
    if len(name) > MAX_TAG or not name.isprintable():
        shown = repr(name[:40]) + ("…" if len(name) > 40 else "")
        msg = (
            f"tag {shown} ({len(name):,} characters) is not a release tag: at most {MAX_TAG} printable "
            "characters (examples: v0.3.13, v1.0.0rc1)"
        )
        raise UsageError(msg)
    if not fnmatch.fnmatchcase(name, pattern):
        msg = f"tag {name!r} does not match publish.tag_pattern {pattern!r}: it does not publish"
        raise UsageError(msg)
    rest = name[len(_literal_prefix(pattern)) :]
    if any(len(n) > MAX_DIGITS for n in _NUMBER.findall(rest)):
        msg = (
            f"tag {name!r}: a version component of more than {MAX_DIGITS} digits is not a release "
            "version (examples: v0.3.13, v1.0.0rc1)"
        )
        raise UsageError(msg)
    try:
        version = Version(rest)
    except ValueError:  # InvalidVersion, and any other refusal of the parser
        msg = (
            f"tag {name!r} (publish.tag_pattern {pattern!r}) does not carry a PEP 440 version: "
            f"{rest!r} is not one (examples: v0.3.13, v0.3.13.post1, v1.0.0rc1)"
        )
        raise UsageError(msg) from None
    if version.local is not None:
        msg = f"tag {name!r}: local versions ({version}) cannot be uploaded to an index"
        raise UsageError(msg)
    return str(version)


def tag_version(expected: str, pattern: str) -> str:
    """The version an expected tag or version names: `v1.2.0`, `refs/tags/v1.2.0` (the tag
    pattern's literal prefix dropped) or a plain `1.2.0`. Not validated: the caller compares."""
    name = expected.removeprefix("refs/tags/")
    prefix = _literal_prefix(pattern)
    if prefix and name.startswith(prefix):
        return name[len(prefix) :]
    return name.removeprefix("v")


def is_prerelease(version: str) -> bool:
    """Alpha, beta, release candidate or development release (a post-release is not one)."""
    return Version(version).is_prerelease


def route(matrix: Matrix | LoadedMatrix, version: str) -> str | None:
    """The upload URL for this version, or None when the matrix says to skip pre-releases."""
    from release.config.matrix import LoadedMatrix  # noqa: PLC0415 (start-up time)

    m = matrix.matrix if isinstance(matrix, LoadedMatrix) else matrix
    publish = m.publish
    if not is_prerelease(version) or publish.prerelease == "publish":
        return publish.repository
    if publish.prerelease == "skip":
        return None
    if not publish.prerelease_repository:
        msg = (
            f"{version} is a pre-release and publish.prerelease is separate-index: "
            "set publish.prerelease_repository"
        )
        raise UsageError(msg)
    return publish.prerelease_repository


def tag_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """The pushed tag in GitHub Actions (`GITHUB_REF_TYPE=tag`, `GITHUB_REF_NAME`), else None."""
    name = settings.raw("GITHUB_REF_NAME", env)
    return name if settings.raw("GITHUB_REF_TYPE", env) == "tag" and name else None


def build_version(loaded: LoadedMatrix, tag: str | None, env: Mapping[str, str] | None = None) -> str:
    """The version every wheel is built with: the tag's, the CI tag's, or `engine.version`."""
    pattern = loaded.matrix.publish.tag_pattern
    if tag:
        return version_from_tag(tag, pattern)
    ci_tag = tag_from_env(env)
    if ci_tag is not None:
        return version_from_tag(ci_tag, pattern)
    return str(Version(loaded.matrix.engine.version))
