"""The toolkit's own requirements, read from the one place they are written: its pyproject.toml
(in a source tree) or its installed metadata (which pip wrote from that file).

Scripts that install a tool the toolkit also depends on (make-image.sh puts auditwheel into a
build image) take the requirement from here, so the bound cannot differ between the two.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from tomlkit.exceptions import TOMLKitError

from release import DISTRIBUTION
from release.errors import ToolchainError


def _pyproject() -> Path | None:
    candidate = Path(__file__).resolve().parents[2] / "pyproject.toml"
    return candidate if candidate.is_file() else None


def declared_requirements() -> list[str]:
    """The toolkit's runtime requirements, as written (markers kept)."""
    path = _pyproject()
    if path is not None:
        try:
            project = tomlkit.parse(path.read_text(encoding="utf-8")).unwrap().get("project", {})
        except (OSError, TOMLKitError) as exc:
            msg = f"cannot read the toolkit's requirements from {path}: {exc}"
            raise ToolchainError(msg) from None
        if project.get("name") == DISTRIBUTION:
            return [str(r) for r in project.get("dependencies", [])]
    try:
        return list(importlib.metadata.requires(DISTRIBUTION) or [])
    except importlib.metadata.PackageNotFoundError:
        msg = f"neither a {DISTRIBUTION} source tree nor an installed {DISTRIBUTION}: no requirements to read"
        raise ToolchainError(msg) from None


def requirement(name: str) -> str:
    """The toolkit's requirement on `name` (e.g. `auditwheel>=6.4.0`) without markers, for pip."""
    for text in declared_requirements():
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.name.lower() == name.lower() and "extra" not in str(req.marker or ""):
            return f"{req.name}{req.specifier}"
    msg = f"the toolkit does not depend on {name}"
    raise ToolchainError(msg)
