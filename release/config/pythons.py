"""The CPython versions the toolkit knows, read from `pythons.json` beside this module.

Each version is `supported` (a matrix may build and smoke-test for it) or `newer` (an abi3 wheel
is also tried in it, where this machine has it). Adding a Python is one line of that file: a new
`"3.14": "supported"` (or `newer` turned `supported`); every list, check and message reads it
from here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from release.config.dataschema import DocumentReader, compose
from release.errors import MatrixError, Problem

PYTHONS_FILE = Path(__file__).with_name("pythons.json")

Status = Literal["supported", "newer"]
_VERSION = re.compile(r"(?a)^3\.(\d+)$")


def _key(version: str) -> int:
    match = _VERSION.match(version)
    return int(match.group(1)) if match else -1


def known_pythons() -> Mapping[str, Status]:
    """Version -> status, oldest first, from `PYTHONS_FILE`; `MatrixError` (file:line) for a
    malformed file."""
    return _read(PYTHONS_FILE)


@functools.cache
def _read(path: Path) -> Mapping[str, Status]:
    reader = DocumentReader(str(path))
    table = reader.read(compose(path.read_text(encoding="utf-8"), str(path)), Mapping[str, Status], "")
    problems = list(reader.problems)
    if not problems:
        versions = list(table)
        for version in versions:
            if not _VERSION.match(version):
                message = "expected a CPython version like '3.13'"
                problems.append(Problem(str(path), reader.lines.get(version), version, message))
        if not problems and versions != sorted(versions, key=_key):
            problems.append(Problem(str(path), 1, "", "list the versions oldest first"))
    if problems:
        raise MatrixError(problems)
    return dict(table)


def supported_pythons() -> tuple[str, ...]:
    """The CPython versions a matrix may build for, oldest first."""
    return tuple(v for v, status in known_pythons().items() if status == "supported")


def newer_pythons() -> tuple[str, ...]:
    """CPythons beyond the supported ones that abi3 wheels are also tried in, where present."""
    return tuple(v for v, status in known_pythons().items() if status == "newer")


def supported_range() -> str:
    """'3.10-3.13': the supported versions, for messages."""
    supported = supported_pythons()
    return f"{supported[0]}-{supported[-1]}" if len(supported) > 1 else supported[0]
