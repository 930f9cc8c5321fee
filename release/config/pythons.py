"""The CPython interpreters the toolkit knows, read from `pythons.json` beside this module.

Each row is one interpreter: a version (`"3.14"`) or its free-threaded build (`"3.14t"`), with a
status: `supported` (a matrix may build and smoke-test for it), `newer` (an abi3 wheel is also tried
in it, where this machine has it) or `prerelease` (known, not built). Adding a Python is one line of
that file (`"3.16": "supported"`, `"3.16t": "supported"`); every list, check, tag, path and message
reads it from here, through the one frozen `Python` record each row becomes.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path

from release.config.dataschema import DocumentReader, compose
from release.errors import MatrixError, Problem
from release.wheel.cpython import STABLE_ABI_FROM, Python, Status, parse_key, parse_tag, sort_key

__all__ = ["STABLE_ABI_FROM", "Python", "Status", "parse_key", "parse_tag", "sort_key"]

PYTHONS_FILE = Path(__file__).with_name("pythons.json")


def python(key: str) -> Python:
    """The record of `key` (`3.14t`): its row in pythons.json, or, for a version the table does not
    list, a record whose status is `prerelease`; `ValueError` for text that names no CPython."""
    found = known().get(key)
    if found is not None:
        return found
    parsed = parse_key(key)
    if parsed is None:
        msg = f"{key!r} is not a CPython version like '3.14' or '3.14t'"
        raise ValueError(msg)
    return Python(parsed.minor, parsed.free_threaded, "prerelease")


def known() -> Mapping[str, Python]:
    """Every row of `PYTHONS_FILE` as a record, oldest first; `MatrixError` (file:line) for a
    malformed file."""
    return _read(PYTHONS_FILE)


def known_pythons() -> Mapping[str, Status]:
    """Version key -> status, oldest first."""
    return {k: p.status for k, p in known().items()}


@functools.cache
def _read(path: Path) -> Mapping[str, Python]:
    reader = DocumentReader(str(path))
    table = reader.read(compose(path.read_text(encoding="utf-8"), str(path)), Mapping[str, Status], "")
    problems = list(reader.problems)
    records: dict[str, Python] = {}
    if not problems:
        for key, status in table.items():
            parsed = parse_key(key)
            if parsed is None:
                message = "expected a CPython version like '3.13' or '3.13t' (free-threaded)"
                problems.append(Problem(str(path), reader.lines.get(key), key, message))
            else:
                records[key] = Python(parsed.minor, parsed.free_threaded, status)
        if not problems and list(records) != sorted(records, key=sort_key):
            problems.append(Problem(str(path), 1, "", "list the versions oldest first (3.14 before 3.14t)"))
    if problems:
        raise MatrixError(problems)
    return records


def newest(keys: Iterable[str]) -> str:
    """The newest of `keys`, a GIL build before a free-threaded one (what one job's Python is)."""
    return max(keys, key=lambda k: (not python(k).free_threaded, python(k).version_tuple))


def supported_pythons() -> tuple[str, ...]:
    """The CPython keys a matrix may build for, oldest first."""
    return tuple(k for k, p in known().items() if p.status == "supported")


def newer_pythons() -> tuple[str, ...]:
    """CPythons beyond the supported ones that abi3 wheels are also tried in, where present."""
    return tuple(k for k, p in known().items() if p.status == "newer")


def supported_range() -> str:
    """'3.10-3.15 and 3.14t-3.15t': the supported versions, for messages."""
    supported = [known()[k] for k in supported_pythons()]

    def span(keys: list[str]) -> str:
        return f"{keys[0]}-{keys[-1]}" if len(keys) > 1 else keys[0]

    gil = [p.key for p in supported if not p.free_threaded]
    threaded = [p.key for p in supported if p.free_threaded]
    return " and ".join(span(keys) for keys in (gil, threaded) if keys)
