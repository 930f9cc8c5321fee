"""The toolkit's dependencies at their lowest allowed versions: `auditwheel>=6.1.0` becomes
`auditwheel==6.1.0`, so a lower bound that lets a broken version in fails the rehearsal."""

from __future__ import annotations

from pathlib import Path

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version
from tomlkit.exceptions import TOMLKitError

from release.errors import UsageError


def lowest_pins(pyproject: Path) -> list[str]:
    """`name==X` for every `[project] dependencies` entry with a `>=X` (or `==X`, `~=X`) bound.

    A dependency without a lower bound is an error naming it: the lowest version it allows is
    whatever the index's oldest release is, which no one has tested."""
    try:
        data = tomlkit.parse(pyproject.read_text(encoding="utf-8")).unwrap()
    except (OSError, TOMLKitError) as exc:
        msg = f"{pyproject}: cannot read the toolkit's dependencies ({exc})"
        raise UsageError(msg) from None
    dependencies = data.get("project", {}).get("dependencies", [])
    pins = []
    for text in dependencies:
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            msg = f"{pyproject}: project.dependencies: {text!r} is not a requirement ({exc})"
            raise UsageError(msg) from None
        bounds = [s.version for s in requirement.specifier if s.operator in (">=", "==", "~=")]
        if not bounds:
            msg = (
                f"{pyproject}: project.dependencies: {text!r} has no lower bound; "
                f"write {requirement.name}>=X (the oldest version the toolkit works with)"
            )
            raise UsageError(msg)
        # The marker stays: pip decides it for the interpreter that installs (`; python_version < '3.11'`).
        marker = f"; {requirement.marker}" if requirement.marker is not None else ""
        pins.append(f"{requirement.name}=={max(bounds, key=Version)}{marker}")
    return pins
