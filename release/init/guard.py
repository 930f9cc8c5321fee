"""The variant guard `release init` writes into the project's import package.

Every variant wheel of a project ships the same import package, so a second variant installed
beside the first overwrites its files. The `variant-conflict` rule of `release verify` fails a
wheel whose `<import>/__init__.py` does not check the installed distributions with
`importlib.metadata`; init writes that check, between two marker lines, at the top of
`__init__.py` (after the docstring and `from __future__` imports). Run again, it replaces the block,
so the list of variants follows the matrix.

Where a variant's backend has driver libraries (CUDA's libcuda.so.1, which an engine calling the
driver API NEEDs), the block also checks, before the extension loads, that the installed wheel's
`Requires-External` driver libraries resolve, and otherwise says in one sentence that the GPU
driver is missing (not a toolkit), and how to get it.

Where a variant's backend names runtime places (`runtime_places` in its data), the block also
looks for the installed wheel's `Requires-External` runtime sonames there, in order (a copy already
loaded first, then the loader's path, TheRock's `rocm_sdk`, `/opt/rocm/core-*/lib`...), loads the
first it finds, and otherwise names every place looked in one sentence (`runtime_places.py`).
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from release.atomic import write_text
from release.errors import UsageError
from release.init.runtime_places import find_runtime
from release.wheel.files import read_text, reason

BEGIN = "# --- variant guard, written by `release init`: keep it before other imports ---"
END = "# --- end of the variant guard ---"


Runtimes = Mapping[str, tuple[str, str, Sequence[Mapping[str, str]]]]
"""Per runtime soname: (the releases that provide it, what to install, the places to look)."""


def guard_code(
    import_name: str,
    distributions: Sequence[str],
    drivers: Mapping[str, tuple[str, str]] | None = None,
    runtimes: Runtimes | None = None,
) -> str:
    """The guard block for an import package shipped by these distributions. `drivers`: the GPU
    driver's sonames the variants' backends know, each with (what provides it, what to do);
    `runtimes`: their runtime sonames, with where to look (`Runtimes`)."""
    family = "[" + ", ".join(json.dumps(d) for d in distributions) + "]"
    driver_check = _driver_check(import_name, family, drivers) if drivers else ""
    driver_check += _runtime_check(import_name, family, runtimes) if runtimes else ""
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
{driver_check}{END}
'''


def _driver_check(import_name: str, family: str, drivers: Mapping[str, tuple[str, str]]) -> str:
    entries = []
    for soname, (provider, hint) in sorted(drivers.items()):
        text = "\n".join(f"            {json.dumps(piece)}" for piece in _pieces(hint))
        head = f"        {json.dumps(soname)}: (\n            {json.dumps(provider)},"
        entries.append(f"{head}\n{text},\n        ),")
    table = "{\n" + "\n".join(entries) + "\n    }"
    return f'''

def _require_the_gpu_driver() -> None:
    """The GPU driver's libraries the installed wheel binds (its `Requires-External`) resolve:
    without them the extension cannot load, and the driver, not a toolkit, is what is missing."""
    import ctypes
    import importlib.metadata

    drivers = {table}
    for name in {family}:
        try:
            needs = importlib.metadata.distribution(name).metadata.get_all("Requires-External") or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for soname in (entry.split(";")[0].strip() for entry in needs):
            if soname not in drivers:
                continue
            try:
                ctypes.CDLL(soname)
            except OSError:
                provider, hint = drivers[soname]
                msg = (
                    f"{import_name}: {{name}} needs {{soname}} ({{provider}}), and no copy of it is "
                    "where the dynamic loader looks: the GPU driver is missing here, not a toolkit. "
                    f"To use {{name}}, {{hint}}."
                )
                raise ImportError(msg) from None


_require_the_gpu_driver()
del _require_the_gpu_driver
'''


def _runtime_check(import_name: str, family: str, runtimes: Runtimes) -> str:
    entries = []
    for soname, (provider, hint, places) in sorted(runtimes.items()):
        text = "\n".join(f"            {json.dumps(piece)}" for piece in _pieces(hint))
        where = ", ".join(json.dumps(dict(p), sort_keys=True) for p in places)
        head = f"        {json.dumps(soname)}: (\n            {json.dumps(provider)},"
        entries.append(f"{head}\n{text},\n            [{where}],\n        ),")
    table = "{\n" + "\n".join(entries) + "\n    }"
    finder = inspect.getsource(find_runtime)
    return f'''

{finder}

def _require_the_gpu_runtime() -> None:
    """The GPU runtime the installed wheel binds (its `Requires-External`) is found where its
    backend's releases put it and loaded once (a copy already in the process is that copy)."""
    import importlib.metadata

    runtimes = {table}
    for name in {family}:
        try:
            needs = importlib.metadata.distribution(name).metadata.get_all("Requires-External") or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for soname in (entry.split(";")[0].strip() for entry in needs):
            if soname not in runtimes:
                continue
            provider, hint, places = runtimes[soname]
            found, looked = find_runtime(soname, places)
            if found is None:
                msg = (
                    f"{import_name}: {{name}} needs {{soname}} ({{provider}}), and no copy of it was found "
                    f"(looked: {{'; '.join(looked)}}). To use {{name}}, {{hint}}."
                )
                raise ImportError(msg)


_require_the_gpu_runtime()
del _require_the_gpu_runtime, find_runtime
'''


def _pieces(text: str, width: int = 72) -> list[str]:
    """`text` in pieces of about `width` characters, split after spaces (adjacent string literals)."""
    pieces: list[str] = []
    current = ""
    for word in text.split(" "):
        if current and len(current) + len(word) > width:
            pieces.append(current)
            current = ""
        current += word + " "
    pieces.append(current[:-1])
    return pieces


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
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # not Python, NUL bytes, too deep
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


MAX_SOURCE_BYTES = 4 << 20
"""The largest `__init__.py` init reads to put the guard in."""


def planned_guard(
    init_file: Path,
    import_name: str,
    distributions: Sequence[str],
    drivers: Mapping[str, tuple[str, str]] | None = None,
    runtimes: Runtimes | None = None,
) -> tuple[str | None, str]:
    """(the new text of `init_file`, or None when it stays as it is; what is done, for init's
    summary), decided before anything is written. `UsageError` in one line for a file that is not
    a regular UTF-8 file of at most `MAX_SOURCE_BYTES`."""
    try:
        source = read_text(init_file, MAX_SOURCE_BYTES) if os.path.lexists(init_file) else ""
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"{init_file}: cannot put the variant guard in it ({reason(exc)}); nothing was written"
        raise UsageError(msg) from None
    if not has_guard_block(source) and mentions_metadata(source):
        return None, f"{init_file}: kept (it already checks the installed distributions)"
    updated = with_guard(source, guard_code(import_name, distributions, drivers, runtimes))
    if updated == source:
        return None, f"{init_file}: variant guard up to date"
    action = "refreshed" if has_guard_block(source) else "added"
    return updated, f"{init_file}: variant guard {action} (variants must not be installed together)"


def write_guard(
    init_file: Path,
    import_name: str,
    distributions: Sequence[str],
    drivers: Mapping[str, tuple[str, str]] | None = None,
    runtimes: Runtimes | None = None,
    *,
    root: Path | None = None,
) -> str:
    """Write or refresh the guard in `init_file` (never through a link out of `root`, by default
    the package's directory); returns what was done, for init's summary."""
    updated, said = planned_guard(init_file, import_name, distributions, drivers, runtimes)
    if updated is not None:
        write_text(init_file, updated, root=root or init_file.parent)
    return said
