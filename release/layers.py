"""The layer map of `release/`: which package may import which, and the README's architecture
table generated from it and from each package's docstring.

A package may import from its own layer and the layers below it, never from one above it, and
the packages' import graph has no cycle (`tests/unit/test_architecture.py` holds the code to
both, and fails on a package missing from the map). `release schema --write` rewrites the table.
"""

from __future__ import annotations

import ast
from pathlib import Path

from release.errors import ReleaseError

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("commands", ("__main__", "cli", "nox_sessions", "commands", "rehearse")),
    ("stages", ("build", "smoke", "hardware", "publish", "init")),
    ("inspection", ("inspect",)),
    ("variant wheels", ("variants",)),
    ("plan", ("plan",)),
    ("configuration", ("config",)),
    ("foundation", ("wheel", "errors", "table", "atomic", "interrupts", "environment", "layers")),
)
"""(layer, its packages and top-level modules), from the top (commands) to the bottom."""

PACKAGE = Path(__file__).resolve().parent
BEGIN = "<!-- architecture: generated from release/layers.py by `python -m release schema --write` -->"
END = "<!-- /architecture -->"


def layer_of(name: str) -> int:
    """The index in `LAYERS` of a package or top-level module (`"build"`); -1 for one not in it."""
    return next((index for index, (_, names) in enumerate(LAYERS) if name in names), -1)


def top_level_names(package: Path = PACKAGE) -> list[str]:
    """Every package (a directory with Python files) and top-level module under `release/`."""
    names = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    names |= {p.name for p in package.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    return sorted(names)


def summary(name: str, package: Path = PACKAGE) -> str:
    """The first paragraph of a package's (or top-level module's) docstring, on one line."""
    path = package / name / "__init__.py" if (package / name).is_dir() else package / f"{name}.py"
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(docstring.split("\n\n")[0].split()).replace("|", "\\|")


def architecture_table(package: Path = PACKAGE) -> str:
    """The Markdown table of every layer, its packages and what each holds, top layer first."""
    rows = ["| layer | package | what it holds |", "|---|---|---|"]
    for layer, names in LAYERS:
        for name in names:
            shown = f"`release/{name}/`" if (package / name).is_dir() else f"`release/{name}.py`"
            rows.append(f"| {layer} | {shown} | {summary(name, package)} |")
    return "\n".join(rows) + "\n"


def with_architecture(readme: str, package: Path = PACKAGE) -> str:
    """`readme` with the text between its architecture markers replaced by the generated table."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        msg = f"README.md lacks the architecture markers: put {BEGIN} and {END} around its table"
        raise ReleaseError(msg)
    return readme[: start + len(BEGIN)] + "\n" + architecture_table(package) + readme[end:]


def source_readme(package: Path = PACKAGE) -> Path | None:
    """The README.md of the checkout this toolkit runs from; None for an installed toolkit (which
    carries its data as `release/backends_data/`, see pyproject.toml, and no README)."""
    readme = package.parent / "README.md"
    return readme if readme.is_file() and not (package / "backends_data").is_dir() else None
