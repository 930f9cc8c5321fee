"""Staging: a per-variant copy of the engine project that carries the variant's name and metadata.

The source tree is never modified. The staged `pyproject.toml` is rewritten with tomlkit, so its
structure and comments survive; only `[project]` keys change. The mislabelled-wheel guard checks
every built wheel's own METADATA against the variant before it can leave the build.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from tomlkit.items import Array, Table

from release.builder.gitignore import GitIgnore
from release.config.dataschema import suggest
from release.config.matrix import Metadata
from release.errors import BuildError
from release.plan.resolve import ResolvedVariant
from release.table import printable
from release.wheel.archive import WheelReadError, read_metadata
from release.wheel.names import InvalidWheelName, parse_wheel_name

# Never copied into a staged tree: the project's own build output and caches at its top level
# (a `build/` or `dist/` deeper down may be source), and Python caches anywhere.
IGNORED_AT_TOP = frozenset({".git", "build", "_skbuild", "dist", "wheelhouse", ".nox", ".venv"})
IGNORED_ANYWHERE = ("__pycache__", "*.egg-info")


BUILD_INPUTS = ("subprojects",)
"""Directories a meson build reads (its wraps and pre-placed subprojects): kept even where the
project's `.gitignore` ignores them (wraps download there, so projects often ignore it)."""
MAX_SIZED = 20_000
"""Entries of a left-out directory whose sizes the summary adds up (a bigger one says `>`)."""


@dataclass
class LeftOut:
    """What the project's `.gitignore` files made staging leave out: one line for the build log."""

    paths: list[tuple[str, int, bool]] = field(default_factory=list)
    """(relative path, bytes, whether the size is a lower bound)."""

    def summary(self) -> str | None:
        if not self.paths:
            return None
        biggest = sorted(self.paths, key=lambda p: -p[1])[:3]
        shown = ", ".join(f"{p} ({'>' if more else ''}{_size(n)})" for p, n, more in biggest)
        return (
            f"staging left out {len(self.paths)} path(s) the project's .gitignore ignores, biggest: "
            f"{shown}; engine.stage_include copies a path anyway"
        )


def _size(count: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000  # type: ignore[assignment]
    return f"{count} B"


def _bytes(path: Path) -> tuple[int, bool]:
    """The bytes below `path` (not following links), counting at most `MAX_SIZED` entries."""
    total, seen, stack = 0, 0, [path]
    try:
        if not path.is_dir() or path.is_symlink():
            return path.lstat().st_size, False
    except OSError:
        return 0, False
    while stack:
        try:
            with os.scandir(stack.pop()) as listing:
                for entry in listing:
                    seen += 1
                    if seen > MAX_SIZED:
                        return total, True
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    else:
                        total += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return total, False


def _kept(relative: str, keep: tuple[str, ...]) -> bool:
    """Whether a path is, holds or lies below one that staging keeps whatever `.gitignore` says."""
    return any(relative == k or relative.startswith(k + "/") or k.startswith(relative + "/") for k in keep)


def _ignore(
    source: Path,
    never: tuple[Path, ...] = (),
    keep: tuple[str, ...] = (),
    left_out: LeftOut | None = None,
) -> Callable[[str, list[str]], set[str]]:
    """What staging leaves out: build output at the top, caches anywhere, what the project's
    `.gitignore` files ignore (but not the build's inputs `keep` names, relative posix paths),
    and the directories in `never` (a requirement source beside the matrix: gigabytes of wheels
    that no build needs). What `.gitignore` left out is added to `left_out`."""
    anywhere = shutil.ignore_patterns(*IGNORED_ANYWHERE)
    gitignore = GitIgnore(source)
    resolved = {p.resolve() for p in never}

    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = set(anywhere(directory, names))
        here = Path(directory)
        if here == source:
            skipped |= IGNORED_AT_TOP.intersection(names)
        relative = here.relative_to(source).as_posix()
        for name in names:
            path = here / name
            if name == ".gitignore" or name in skipped:
                continue
            is_dir = path.is_dir() and not path.is_symlink()
            below = name if relative == "." else f"{relative}/{name}"
            if is_dir and path.resolve() in resolved:
                skipped.add(name)
            elif not _kept(below, keep) and gitignore.ignored(below, is_dir=is_dir):
                skipped.add(name)
                if left_out is not None:
                    size, more = _bytes(path)
                    left_out.paths.append((below + ("/" if is_dir else ""), size, more))
        return skipped

    return ignore


def kept_inputs(source: Path, include: tuple[str, ...]) -> tuple[str, ...]:
    """The paths staging copies whatever `.gitignore` says: the matrix's `engine.stage_include`,
    and a meson project's `subprojects/`."""
    found = [p.strip("/") for p in include]
    if (source / "meson.build").is_file():
        found += [d for d in BUILD_INPUTS if (source / d).is_dir()]
    return tuple(dict.fromkeys(p for p in found if p))


def replace_build_requires(
    doc: tomlkit.TOMLDocument, replacements: Mapping[str, str], key: str = "build_requires"
) -> None:
    """Replace entries of `[build-system].requires` by project name ('' drops one), in place;
    a name the list does not hold is an error naming what it holds."""
    if not replacements:
        return
    system = doc.get("build-system")
    requires = system.get("requires") if isinstance(system, Table) else None
    if not isinstance(requires, Array):
        msg = f"{key}: the engine's pyproject.toml has no [build-system].requires list to replace"
        raise BuildError(msg)
    names = [_requirement_name(str(r)) for r in requires]
    for project in replacements:
        if canonicalize_name(project) not in names:
            held = ", ".join(n for n in names if n) or "nothing"
            hint = suggest(project, names)
            msg = f"{key}.{project}: [build-system].requires has no {project!r}{hint} (it has {held})"
            raise BuildError(msg)
    wanted: dict[str, str] = {canonicalize_name(k): v for k, v in replacements.items()}
    kept = [wanted[n] if n in wanted else str(r) for n, r in zip(names, requires, strict=True)]
    system["requires"] = [r for r in kept if r]  # type: ignore[index]


def _requirement_name(text: str) -> str:
    try:
        return canonicalize_name(Requirement(text).name)
    except InvalidRequirement:
        return ""


def rewrite_pyproject(
    text: str,
    *,
    name: str,
    version: str,
    metadata: Metadata,
    build_requires: Mapping[str, str] | None = None,
    key: str = "build_requires",
) -> str:
    """Return `text` with `[project]` naming this variant and the variant's replacements in
    `[build-system].requires`; everything else is kept as it was."""
    doc = tomlkit.parse(text)
    replace_build_requires(doc, build_requires or {}, key)
    project = doc.get("project")
    if not isinstance(project, Table):
        msg = "pyproject.toml has no [project] table (PEP 621): the toolkit needs one to name variants"
        raise BuildError(msg)
    project["name"] = name
    project["version"] = version
    dynamic = project.get("dynamic")
    if dynamic is not None:
        kept = [d for d in dynamic if d not in ("name", "version")]
        if kept:
            project["dynamic"] = kept
        else:
            del project["dynamic"]
    if metadata.description:
        project["description"] = metadata.description
    if metadata.keywords:
        project["keywords"] = list(metadata.keywords)
    if metadata.classifiers:
        project["classifiers"] = list(metadata.classifiers)
    return tomlkit.dumps(doc)


def stage_project(variant: ResolvedVariant, version: str, dest: Path) -> Path:
    """Copy the engine project to `dest` and rewrite its `pyproject.toml` for the variant."""
    source = variant.engine_dir
    pyproject = source / "pyproject.toml"
    if not pyproject.is_file():
        msg = f"{pyproject} not found: engine.source in the matrix must be a PEP 517 project"
        raise BuildError(msg)
    if dest.exists():
        shutil.rmtree(dest)
    links = variant.smoke_requirements.find_links
    left_out = LeftOut()
    keep = kept_inputs(source, variant.stage_include)
    shutil.copytree(
        source, dest, ignore=_ignore(source, (links,) if links else (), keep, left_out), symlinks=True
    )
    summary = left_out.summary()
    if summary is not None:
        print(printable(f"[{variant.name}] {summary}"), flush=True)
    staged = dest / "pyproject.toml"
    text = rewrite_pyproject(
        pyproject.read_text(encoding="utf-8"),
        name=variant.distribution,
        version=version,
        metadata=variant.metadata,
        build_requires=variant.build_requires,
        key=f"variants.{variant.name}.build_requires",
    )
    staged.write_text(text, encoding="utf-8")
    return dest


def require_test_source(variant: ResolvedVariant, staged: Path) -> None:
    """A container build's import test installs the wheel's requirements from the smoke source
    only (`cibw.test_environment`): where the engine's pyproject.toml declares dependencies the
    matrix neither skips nor gives a source for, stop now in one line rather than in uv's
    offline error after the compile."""
    source = variant.smoke_requirements
    if source.index_url or source.find_links is not None:
        return
    try:
        project = tomlkit.parse(staged.joinpath("pyproject.toml").read_text(encoding="utf-8")).get("project")
    except (OSError, ValueError):
        return
    declared = project.get("dependencies") if isinstance(project, Table) else None
    skipped = {canonicalize_name(n) for n in source.skip}
    needs = [str(d) for d in declared or () if _requirement_name(str(d)) not in skipped]
    if needs:
        msg = (
            f"{variant.name}: the engine requires {', '.join(needs)} (pyproject.toml dependencies) and "
            "the import test asks no index unless the matrix names one: declare "
            "engine.smoke.requirements.index_url or .find_links, or leave them out with .skip"
        )
        raise BuildError(msg)


def check_wheel_identity(wheel: Path, *, distribution: str, version: str) -> None:
    """The mislabelled-wheel guard: file name and METADATA must both name the variant."""
    try:
        name = parse_wheel_name(wheel)
        headers = read_metadata(wheel)
    except (InvalidWheelName, WheelReadError) as exc:
        msg = f"{wheel.name}: {exc}"
        raise BuildError(msg) from None
    problems = []
    expected = canonicalize_name(distribution)
    for where, actual in (("file name", name.distribution), ("METADATA Name", headers.get("Name", ""))):
        if canonicalize_name(str(actual)) != expected:
            problems.append(f"{where} says {actual!r}, the variant is {distribution!r}")
    for where, actual_version in (
        ("file name", name.version),
        ("METADATA Version", headers.get("Version", "")),
    ):
        try:
            same = Version(str(actual_version)) == Version(version)
        except InvalidVersion:
            same = False
        if not same:
            problems.append(f"{where} says version {actual_version}, expected {version}")
    if problems:
        wheel.unlink(missing_ok=True)
        msg = f"mislabelled wheel {wheel.name} removed: " + "; ".join(problems)
        raise BuildError(msg)
