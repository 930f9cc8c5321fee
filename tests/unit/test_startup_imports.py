"""The CLI starts fast (issue 60): `release --help` and `release verify --help` import only what the
parser needs. Read from the sources (a unit test starts no process): the modules `release.cli` and
`release.commands.verify` import at their top level, and theirs, transitively, leave out the
matrix, the rules, the plan and the heavy dependencies; what a command runs it imports in `run`."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

HEAVY = ("yaml", "jsonschema", "packaging", "tomlkit", "pathspec", "auditwheel", "cibuildwheel")
"""Third-party modules a parser does not need (each takes milliseconds to import)."""
HEAVY_OURS = ("release.config.matrix", "release.config.backends", "release.inspect", "release.plan")


def _top_level_imports(path: Path, package: str) -> set[str]:
    """Modules imported at `path`'s top level, outside `if TYPE_CHECKING:` (function bodies are
    imported when called, not at start-up)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            relative = "." * node.level + (node.module or "")
            base = importlib.util.resolve_name(relative, package) if node.level else node.module
            if base is None:
                continue
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names if _is_module(f"{base}.{alias.name}")}
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _closure(start: str) -> set[str]:
    """Every module `start` imports at start-up, transitively through the toolkit's own; the
    parents of each (`release.a.b` runs `release/a/__init__.py`) included."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            module = ".".join(parts[:i])
            if module in seen:
                continue
            seen.add(module)
            spec = importlib.util.find_spec(module) if module.startswith("release") else None
            if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
                continue
            package = module if spec.origin.endswith("__init__.py") else module.rpartition(".")[0]
            todo += sorted(_top_level_imports(Path(spec.origin), package))
    return seen


@pytest.mark.parametrize("module", ["release.cli", "release.__main__", "release.commands.verify"])
def test_the_parser_and_verifys_arguments_import_nothing_heavy(module: str) -> None:
    imported = _closure(module)
    heavy = sorted(m for m in imported if m.split(".")[0] in HEAVY or m.startswith(HEAVY_OURS))
    assert heavy == [], f"{module} imports at start-up: {heavy} (import them in the function that uses them)"


def test_the_closure_sees_what_a_module_imports() -> None:
    """The walk itself: release.commands.build imports the plan at its top level (a command's module
    may; the parser imports only the chosen one)."""
    assert any(m.startswith("release.plan") for m in _closure("release.commands.build"))
