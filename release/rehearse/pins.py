"""The toolkit's dependencies at their lowest allowed versions: `auditwheel>=6.1.0` becomes
`auditwheel==6.1.0`, so a lower bound that lets a broken version in fails the rehearsal.

The dependencies come from the checkout's `pyproject.toml` (the toolkit's own repository) or from
the toolkit wheel's METADATA (an adopter's `pip install "$TOOLKIT"`, or `release rehearse --toolkit`)."""

from __future__ import annotations

from pathlib import Path

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version
from tomlkit.exceptions import TOMLKitError

from release.errors import UsageError
from release.wheel.archive import WheelReadError, read_metadata


def lowest_pins(pyproject: Path) -> list[str]:
    """`name==X` for every `[project] dependencies` entry of `pyproject` (see `pins_of`)."""
    try:
        data = tomlkit.parse(pyproject.read_text(encoding="utf-8")).unwrap()
    except (OSError, TOMLKitError) as exc:
        msg = f"{pyproject}: cannot read the toolkit's dependencies ({exc})"
        raise UsageError(msg) from None
    return pins_of(data.get("project", {}).get("dependencies", []), f"{pyproject}: project.dependencies")


def wheel_lowest_pins(wheel: Path) -> list[str]:
    """`name==X` for every `Requires-Dist` of the wheel's METADATA outside an extra (see `pins_of`)."""
    try:
        metadata = read_metadata(wheel)
    except WheelReadError as exc:
        msg = f"{wheel}: cannot read the toolkit's dependencies from its METADATA ({exc})"
        raise UsageError(msg) from None
    requirements = metadata.get_all("Requires-Dist") or []
    core = [r for r in requirements if "extra" not in str(_parse(r, wheel.name).marker or "")]
    return pins_of(core, f"{wheel.name}: Requires-Dist")


def _parse(text: str, where: str) -> Requirement:
    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        msg = f"{where}: {text!r} is not a requirement ({exc})"
        raise UsageError(msg) from None


def pins_of(requirements: list[str], where: str) -> list[str]:
    """`name==X` for every requirement with a `>=X` (or `==X`, `~=X`) bound.

    A dependency without a lower bound is an error naming it: the lowest version it allows is
    whatever the index's oldest release is, which no one has tested."""
    pins = []
    for text in requirements:
        requirement = _parse(text, where)
        bounds = [s.version for s in requirement.specifier if s.operator in (">=", "==", "~=")]
        if not bounds:
            msg = (
                f"{where}: {text!r} has no lower bound; "
                f"write {requirement.name}>=X (the oldest version the toolkit works with)"
            )
            raise UsageError(msg)
        # The marker stays: pip decides it for the interpreter that installs (`; python_version < '3.11'`).
        marker = f"; {requirement.marker}" if requirement.marker is not None else ""
        pins.append(f"{requirement.name}=={max(bounds, key=Version)}{marker}")
    return pins
