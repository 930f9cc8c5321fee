"""A command is thin: it parses arguments, calls a stage and renders what it returns. So a module
of `release/commands/` declares no class (models, clients and errors live in the stage that owns
them) and no function over 40 lines but its argument declaration (`add_arguments`)."""

from __future__ import annotations

import ast
from pathlib import Path

COMMANDS = Path(__file__).resolve().parents[2] / "release" / "commands"
MAX_LINES = 40

PENDING: set[str] = set()
"""What is still to move out of `release/commands/` into the stages (none, when done)."""


def too_big(path: Path) -> dict[str, str]:
    """Each class, and each function over `MAX_LINES` lines but `add_arguments`, of one module:
    {`module: name`: what is wrong}."""
    found = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef):
            found[f"{path.name}: class {node.name}"] = "a class"
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name != "add_arguments":
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_LINES:
                found[f"{path.name}: {node.name}"] = f"{lines} lines"
    return found


def test_commands_are_thin() -> None:
    found = {key: what for path in sorted(COMMANDS.glob("*.py")) for key, what in too_big(path).items()}
    assert {k: w for k, w in found.items() if k not in PENDING} == {}, "move it into the stage that owns it"
    assert sorted(PENDING - set(found)) == [], "done: take it off PENDING"


def test_a_fat_command_is_caught(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    module = tmp_path / "fat.py"
    module.write_text(
        f"class Client:\n    pass\n\n\ndef run():\n{body}\n\n\ndef add_arguments(parser):\n{body}\n",
        encoding="utf-8",
    )
    assert too_big(module) == {"fat.py: class Client": "a class", "fat.py: run": f"{MAX_LINES + 1} lines"}
