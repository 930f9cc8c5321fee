"""Where a smoke leg gets the wheel's runtime dependencies (`Requires-Dist`, e.g. numpy).

The wheel itself always comes from its file. What it requires comes from the source the matrix
declares (`engine.smoke.requirements`): a package index, or a local directory of wheels; with
neither, pip asks no index, and a wheel that requires anything fails its install step with one
line naming the requirements and the keys to set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from release import settings
from release.plan.resolve import RequirementSource

DECLARE = "engine.smoke.requirements.index_url or .find_links"


def network_env(source: RequirementSource, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The CA bundle and proxy settings (`settings.NETWORK_VARIABLES`) a leg passes on where its
    requirements come from an index; the legs' environment is otherwise clean, pip's global
    configuration ignored."""
    if not source.index_url:
        return {}
    found = {k: settings.raw(k, environ) for k in settings.NETWORK_VARIABLES}
    return {k: v for k, v in found.items() if v}


def install_argv(
    pip: Sequence[str], wheel: Path, requires: list[str], source: RequirementSource
) -> list[str]:
    """pip's command line that installs `wheel` and its requirements from `source` only; `pip` is
    how pip runs (`python -m pip`, or an interpreter's pip with `--python` naming the venv's)."""
    argv = [*pip, "install"]
    argv += ["--index-url", source.index_url] if source.index_url else ["--no-index"]
    links = []
    if requires:
        links.append(wheel.parent.resolve())  # a sibling distribution of the same release
        if source.find_links is not None:
            links.append(source.find_links)
    for directory in dict.fromkeys(links):
        argv += ["--find-links", str(directory)]
    argv.append(str(wheel.resolve()))
    return argv


def left_out(requires: Sequence[str], source: RequirementSource) -> tuple[list[str], list[str]]:
    """The wheel's requirements split into (those installed, those `skip` leaves out), by name."""
    skipped = {str(canonicalize_name(name)) for name in source.skip}
    kept: list[str] = []
    dropped: list[str] = []
    for text in requires:
        try:
            name = str(canonicalize_name(Requirement(text).name))
        except InvalidRequirement:
            name = ""
        (dropped if name in skipped else kept).append(text)
    return kept, dropped


def install_argvs(
    pip: Sequence[str], wheel: Path, requires: list[str], source: RequirementSource
) -> list[list[str]]:
    """The pip command lines that install `wheel` and its requirements but the skipped ones: one
    command (`install_argv`) when nothing is skipped, else the kept requirements from `source`
    first, then the wheel alone (`--no-deps`, no index)."""
    kept, dropped = left_out(requires, source)
    if not dropped:
        return [install_argv(pip, wheel, requires, source)]
    argvs = []
    if kept:
        first = install_argv(pip, wheel, kept, source)
        argvs.append([*first[:-1], *kept])
    argvs.append([*pip, "install", "--no-deps", "--no-index", str(wheel.resolve())])
    return argvs


def missing_source_line(requires: list[str], source: RequirementSource) -> str:
    """Why a failed install could not have its requirements, in one line ('' when a source was
    declared: pip's own output then says what went wrong)."""
    if not requires:
        return ""
    if source.find_links is not None and not source.find_links.is_dir():
        return f"engine.smoke.requirements.find_links: {source.find_links} is not a directory"
    if source.index_url or source.find_links is not None:
        return ""
    needs = ", ".join(requires)
    return f"the wheel requires {needs} (Requires-Dist) and the matrix names no source: declare {DECLARE}"


def mounts(source: RequirementSource) -> tuple[Path, ...]:
    """Directories a container or namespace leg must see for the requirements."""
    return (source.find_links,) if source.find_links is not None and source.find_links.is_dir() else ()
