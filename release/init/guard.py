"""The variant guard `release init` writes into the project's import package.

Every variant wheel of a project ships the same import package, so a second variant installed
beside the first overwrites its files. The `variant-conflict` rule of `release verify` fails a
wheel whose `<import>/__init__.py` does not check the installed distributions with
`importlib.metadata`; init writes that check, between two marker lines, at the top of
`__init__.py` (after the docstring and `from __future__` imports). Run again, it replaces the block,
so the list of variants follows the matrix.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from pathlib import Path

BEGIN = "# --- variant guard, written by `release init`: keep it before other imports ---"
END = "# --- end of the variant guard ---"


def guard_code(import_name: str, distributions: Sequence[str]) -> str:
    """The guard block for an import package shipped by these distributions."""
    family = "[" + ", ".join(json.dumps(d) for d in distributions) + "]"
    return f'''{BEGIN}
def _refuse_a_second_variant() -> None:
    """Each of {", ".join(distributions)} ships `{import_name}`: two installed at once overwrite each
    other's files, so refuse to load rather than run a mix of both."""
    import importlib.metadata

    installed = []
    for name in {family}:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        installed.append(name)
    if len(installed) > 1:
        msg = (
            f"{import_name}: {{', '.join(installed)}} are installed together and share this import "
            f"package; keep one of them: pip uninstall {{' '.join(installed[1:])}}"
        )
        raise ImportError(msg)


_refuse_a_second_variant()
del _refuse_a_second_variant
{END}
'''


def has_guard_block(source: str) -> bool:
    return BEGIN in source and END in source


def mentions_metadata(source: str) -> bool:
    """Whether the module already looks at installed distributions (a guard of the project's own)."""
    return bool(_METADATA.search(source))


_METADATA = re.compile(r"importlib[._]metadata|from\s+importlib\s+import\s+(?:\([^)]*)?\bmetadata\b")
"""`importlib.metadata`, `importlib_metadata`, or `from importlib import metadata` (the
reference engine's spelling)."""


def insertion_line(source: str) -> int:
    """0-based line index after a leading comment block (a licence header), the module docstring
    and `from __future__` imports."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return 0
    lines = source.splitlines()
    line = 0
    while line < len(lines) and lines[line].startswith("#"):
        line += 1
    for index, node in enumerate(tree.body):
        docstring = index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if not (docstring or future):
            break
        line = node.end_lineno or node.lineno
    return line


def with_guard(source: str, block: str) -> str:
    """`source` with the guard block in place: replaced where init wrote one, inserted otherwise."""
    if has_guard_block(source):
        before, rest = source.split(BEGIN, 1)
        _old, after = rest.split(END, 1)
        return before + block.rstrip("\n") + after
    lines = source.splitlines(keepends=True)
    at = insertion_line(source)
    head = "".join(lines[:at])
    if head and not head.endswith("\n"):
        head += "\n"
    tail = "".join(lines[at:])
    gap_before = "\n" if head.strip() else ""
    gap_after = "\n\n" if tail.strip() else ""
    return head + gap_before + block + gap_after + tail.lstrip("\n")


def write_guard(init_file: Path, import_name: str, distributions: Sequence[str]) -> str:
    """Write or refresh the guard in `init_file`; returns what was done, for init's summary."""
    source = init_file.read_text(encoding="utf-8") if init_file.is_file() else ""
    if not has_guard_block(source) and mentions_metadata(source):
        return f"{init_file}: kept (it already checks the installed distributions)"
    updated = with_guard(source, guard_code(import_name, distributions))
    if updated == source:
        return f"{init_file}: variant guard up to date"
    action = "refreshed" if has_guard_block(source) else "added"
    init_file.write_text(updated, encoding="utf-8")
    return f"{init_file}: variant guard {action} (variants must not be installed together)"
