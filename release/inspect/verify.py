"""`release verify`: read a wheel, apply every registered rule, and write the report.

Works on any wheel. With a matrix the wheel is mapped to its variant (by distribution name, or
`--variant`) and every rule applies; without one, or for a wheel that is none of the matrix's
distributions, the rules that need a variant say `not-applicable`.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from release.config.resources import toolkit_backends
from release.errors import ToolchainError, UsageError, VerifyError
from release.inspect.policy import Policy, policies_from_json
from release.inspect.reader import parse_name, read_wheel
from release.inspect.report import VerifyReport
from release.inspect.rules import RULES
from release.inspect.rules.registry import RuleContext, matches
from release.wheel.names import report_path

if TYPE_CHECKING:
    from release.plan.resolve import ResolvedVariant


@functools.cache
def manylinux_policies() -> tuple[Policy, ...]:
    """auditwheel's manylinux policies, read from its package data (never hard-coded here)."""
    spec = importlib.util.find_spec("auditwheel")
    if spec is None or spec.origin is None:
        msg = "auditwheel is not installed: its manylinux policy is needed (pip install auditwheel)"
        raise ToolchainError(msg)
    policy_file = Path(spec.origin).parent / "policy" / "manylinux-policy.json"
    try:
        return policies_from_json(json.loads(policy_file.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        msg = f"cannot read auditwheel's manylinux policy {policy_file}: {exc}"
        raise ToolchainError(msg) from None


@dataclass(frozen=True)
class _RuntimeKnowledge:
    runtime_libraries: tuple[str, ...]
    device_code_sections: tuple[str, ...]


@functools.cache
def _known_backends() -> tuple[_RuntimeKnowledge, ...]:
    """Runtime globs and device sections from the toolkit's own backend data, used when there is
    no variant (read as plain JSON: the matrix loader validates these files)."""
    directory = toolkit_backends()
    known = []
    for file in sorted((f for f in directory.iterdir() if f.name.endswith(".json")), key=lambda f: f.name):
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        known.append(
            _RuntimeKnowledge(
                tuple(data.get("runtime_libraries") or ()), tuple(data.get("device_code_sections") or ())
            )
        )
    return tuple(known)


def verify_wheel(
    wheel: Path,
    *,
    variant: ResolvedVariant | None = None,
    matrix: str | None = None,
    release: bool = False,
    expected_version: str | None = None,
) -> VerifyReport:
    """Inspect one wheel and apply every rule against the resolved `variant` it is one of.

    Rules that need a variant say `not-applicable` without one (no matrix, or a wheel that is none
    of the matrix's distributions); `release` turns the floor warning into a failure;
    `expected_version` (a release tag like v1.2.0 or a version) is checked by wheel-name."""
    wheel = Path(wheel)
    if not wheel.is_file():
        msg = f"{wheel}: no such wheel file"
        raise UsageError(msg)
    parse_name(wheel)
    if variant is not None:
        globs = variant.excludes
        sections: tuple[str, ...] = variant.device_code_sections
        matrix = matrix or str(variant.matrix_root)
    else:
        known = _known_backends()
        globs = tuple(dict.fromkeys(g for b in known for g in b.runtime_libraries))
        sections = tuple(dict.fromkeys(s for b in known for s in b.device_code_sections))
    try:
        contents = read_wheel(wheel, sections)
        ctx = RuleContext(
            wheel=contents,
            matrix=matrix,
            variant=variant,
            runtime_globs=globs,
            release=release,
            expected_version=expected_version,
            policies=manylinux_policies(),
        )
        results = tuple(r.apply(ctx) for r in RULES)
    except (zipfile.BadZipFile, OSError) as exc:
        msg = f"{wheel.name}: cannot read the wheel ({exc})"
        raise VerifyError(msg) from None
    runtime_bound = sorted({n for e in contents.elf_files for n in e.needed if matches(n, globs)})
    return VerifyReport(
        wheel=wheel,
        size=wheel.stat().st_size,
        unpacked_size=sum(m.size for m in contents.members),
        distribution=contents.distribution,
        version=contents.version,
        tags=contents.tags,
        platform_tags=tuple(sorted({t.split("-")[-1] for t in contents.tags})),
        variant=variant.name if variant is not None else None,
        matrix=matrix,
        release_mode=release,
        runtime_bound=tuple(runtime_bound),
        elf_files=tuple(contents.elf_files),
        rules=results,
    )


def write_report(report: VerifyReport, path: Path | None = None) -> Path:
    """Write the JSON report (default: beside the wheel) and return its path.

    The report is written to a new file in the same directory and renamed over the target, so a
    symlink at the target is replaced, never followed: nothing outside the report path is written.
    """
    target = path if path is not None else report_path(report.wheel)
    text = json.dumps(report.to_json(), indent=2) + "\n"
    fd, scratch = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        Path(scratch).replace(target)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise
    return target
