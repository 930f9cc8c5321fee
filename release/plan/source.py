"""The engine source a plan builds from: `engine.source` holds a project, and `build_requires`
names only what its pyproject.toml requires. `release plan` and `release build` both check it
first (here, so that neither command imports the other)."""

from __future__ import annotations

from release.config.checks import engine_source
from release.config.dataschema import printable
from release.config.matrix import LoadedMatrix
from release.config.shapes import build_requires_problems
from release.errors import MatrixError


def check_engine_source(loaded: LoadedMatrix) -> None:
    """The located error for an `engine.source` that holds no project, or `build_requires` naming
    what its pyproject.toml does not require (exit 3)."""
    name = printable(str(loaded.path.name))
    problems = engine_source(loaded.matrix, loaded.root, loaded.lines, name)
    if not problems:
        problems = build_requires_problems(loaded.matrix, loaded.engine_dir, loaded.lines, name)
    if problems:
        raise MatrixError(problems)
