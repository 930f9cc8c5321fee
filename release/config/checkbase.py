"""What the matrix checks share: the collector of located problems, the check context, and the
patterns names are held to (release.config.checks runs the checks; variantchecks holds a variant's)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

from release.config import names
from release.config.backends import Backend
from release.config.dataschema import dotted, printable
from release.errors import Problem

# The model's types (release.config.matrix imports the checks, so they are not imported here).
Matrix = Any
Variant = Any

_IDENTIFIER_RULE = "(letters, digits and _, not starting with a digit)"

MAX_GLOB = 255
"""The longest soname glob: a file name is at most 255 bytes."""

_PEP508_NAME = re.compile(rf"(?:{names.PEP508_NAME.pattern})\Z", re.IGNORECASE | re.ASCII)
# Names that reach a shell-like parser (cibuildwheel's bashlex `environment`, shlex-split
# config-settings, `-DNAME=VALUE`, a workflow's word splitting) are held to these; values are
# quoted where they are rendered.
# (`.match` with `\Z`, never `$`, which also matches before a final newline; ASCII only.)
_IDENTIFIER = re.compile(rf"{names.IDENTIFIER.pattern}\Z", re.ASCII)
_VARIANT_NAME = re.compile(r"[a-z][a-z0-9]*\Z", re.ASCII)
_NAME = re.compile(rf"{names.NAME.pattern}\Z", re.ASCII)
_SETTING_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z", re.ASCII)
_SCRIPT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*\Z", re.ASCII)
_TOOLKIT = re.compile(r"[0-9]+(\.[0-9A-Za-z]+)*\Z", re.ASCII)
_GCC = re.compile(r"([1-9][0-9]?|suite)\Z", re.ASCII)
_LINE_BREAK = re.compile(r"[\n\r\x00\x0b\x0c\x85\u2028\u2029]")
HTTP_URL = re.compile(r"https?://[^\s\x00-\x1f\x7f]+\Z")


def collector(problems: list[Problem], lines: Mapping[str, int], file: str) -> Callable[[str, str], None]:
    """`add(dotted key, message)`: a problem at the key's line, else its nearest parent's."""

    def add(key: str, message: str) -> None:
        line = lines.get(key)
        parent = key
        while line is None and "." in parent:
            parent = parent.rsplit(".", 1)[0]
            line = lines.get(parent)
        problems.append(Problem(file, line, printable(key), printable(message)))

    return add


@dataclasses.dataclass(frozen=True)
class Context:
    """What every named check reads: the matrix, the backends, and `add` for a located problem;
    `owners` and `bound` carry what one variant's checks leave for the next variant's."""

    m: Matrix
    backends: Mapping[str, Backend]
    add: Callable[[str, str], None]
    owners: dict[str, str] = dataclasses.field(default_factory=dict)
    bound: dict[tuple[object, ...], str] = dataclasses.field(default_factory=dict)

    def names(self, key: str, mapping: Mapping[str, str], pattern: re.Pattern[str], what: str) -> None:
        for name in mapping:
            if not pattern.match(name):
                self.add(dotted(key, name), f"{name!r} is not {what}")


MatrixCheck = Callable[[Context], None]
VariantCheck = Callable[[Context, str, str, Variant], None]
"""(context, variant name, its dotted key `variants.NAME`, the variant)."""
