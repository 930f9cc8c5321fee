"""Checks of the keys that describe a real engine's shape: a variant's own import package, the
build requirements a variant replaces, and where smoke legs get the wheel's runtime dependencies."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from tomlkit.exceptions import TOMLKitError

from release.config.checkbase import _IDENTIFIER, _PEP508_NAME
from release.config.checks import HTTP_URL, collector
from release.config.dataschema import dotted, printable, suggest
from release.config.sysdeps import problems as system_package_problems
from release.errors import Problem

Matrix = Any  # release.config.matrix imports this module


def shape_problems(m: Matrix, lines: Mapping[str, int], file: str) -> list[Problem]:
    problems: list[Problem] = []
    add = collector(problems, lines, file)

    for name, v in m.variants.items():
        key = dotted("variants", name)
        if v.import_name is not None and not _IDENTIFIER.match(v.import_name):
            add(f"{key}.import_name", f"{v.import_name!r} is not a Python identifier")
        for project, replacement in v.build_requires.items():
            where = dotted(f"{key}.build_requires", project)
            if not _PEP508_NAME.match(project):
                add(where, f"{project!r} is not a project name of [build-system].requires")
                continue
            if not replacement:
                continue
            try:
                Requirement(replacement)
            except InvalidRequirement as exc:
                add(where, f"{replacement!r} is not a requirement (PEP 508): {exc}")
    requirements = m.engine.smoke.requirements
    if requirements.index_url is not None and not HTTP_URL.match(requirements.index_url):
        add("engine.smoke.requirements.index_url", f"{requirements.index_url!r} is not an http(s) URL")
    links = requirements.find_links
    if links is not None and (not links.strip() or "\n" in links or PurePosixPath(links).is_absolute()):
        add(
            "engine.smoke.requirements.find_links",
            f"{links!r}: give a directory of wheels relative to the matrix file (e.g. wheels/)",
        )
    return problems


def build_requires_problems(
    m: Matrix, engine_dir: Path, lines: Mapping[str, int], file: str
) -> list[Problem]:
    """Each `build_requires` key names an entry of the engine's `[build-system].requires`;
    checked when a plan is made (where the engine is checked out), like `engine.source`."""
    wanted = [(n, p) for n, v in m.variants.items() for p in v.build_requires]
    if not wanted:
        return []
    try:
        data = tomlkit.parse((engine_dir / "pyproject.toml").read_text(encoding="utf-8")).unwrap()
    except (OSError, UnicodeDecodeError, TOMLKitError):
        data = {}
    system = data.get("build-system", {}) if isinstance(data, dict) else {}
    requires = system.get("requires", []) if isinstance(system, dict) else []
    names: list[str] = []
    for entry in requires if isinstance(requires, list) else []:
        try:
            names.append(canonicalize_name(Requirement(str(entry)).name))
        except InvalidRequirement:
            continue
    problems = []
    for variant, project in wanted:
        if canonicalize_name(project) in names:
            continue
        key = dotted(dotted(dotted("variants", variant), "build_requires"), project)
        held = ", ".join(names) or "nothing"
        message = (
            f"the engine's [build-system].requires has no {project!r}{suggest(project, names)} "
            f"(it has {held})"
        )
        line = lines.get(key) or lines.get(dotted(dotted("variants", variant), "build_requires"))
        problems.append(Problem(file, line, printable(key), printable(message)))
    return problems


def system_package_shape_problems(matrix: Matrix, lines: Mapping[str, int], display: str) -> list[Problem]:
    """Each declared system package is one the build can install (`release.config.sysdeps`)."""
    declared = [("engine.system_packages", matrix.engine.system_packages)] + [
        (f"variants.{n}.system_packages", v.system_packages) for n, v in matrix.variants.items()
    ]
    found: list[Problem] = []
    for key, packages in declared:
        for where, message in system_package_problems(key, packages):
            line = lines.get(where) or lines.get(where.rsplit("[", 1)[0]) or lines.get(key)
            found.append(Problem(display, line, printable(where), printable(message)))
    return found


def held_back_problems(matrix: Matrix, lines: Mapping[str, int], file: str) -> list[Problem]:
    """A hold names its reason on one line."""
    problems = []
    for name, variant in matrix.variants.items():
        if variant.held_back is None:
            continue
        key = f"variants.{name}.held_back"
        reason = variant.held_back.strip()
        if not reason or any(c in reason for c in "\r\n\0"):
            message = "give the reason on one line (the plan, release notes and GitHub Release show it)"
            problems.append(Problem(file, lines.get(key), key, message))
    return problems
