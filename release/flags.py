"""The flags several commands share, declared once: `--variant`, `--python`, `--wheelhouse` and
`--matrix`. A command says what its flag means to it (the help) and which of the three shapes it
takes: one value, one required value, or many (`many=True`: repeatable, a list). The spelling, the
type and how each shape is declared live here, so two commands cannot spell one flag two ways."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

DEFAULT_MATRIX = "matrix.yaml"


def _flag(parser: Any, name: str, help: str, *, many: bool, required: bool, **kwargs: Any) -> argparse.Action:
    if many:
        kwargs["action"] = "append"
    if required:
        kwargs["required"] = True
    return parser.add_argument(name, help=help, **kwargs)  # type: ignore[no-any-return]


def variant(
    parser: Any, help: str, *, many: bool = False, required: bool = False, **kwargs: Any
) -> argparse.Action:
    """`--variant NAME`: a variant of the matrix."""
    return _flag(parser, "--variant", help, many=many, required=required, **kwargs)


def python(
    parser: Any, help: str, *, many: bool = False, required: bool = False, **kwargs: Any
) -> argparse.Action:
    """`--python`: a matrix Python (X.Y), or for `hardware` the interpreter to install for."""
    return _flag(parser, "--python", help, many=many, required=required, **kwargs)


def wheelhouse(parser: Any, help: str, **kwargs: Any) -> argparse.Action:
    """`--wheelhouse DIR`: the root of the per-variant wheels (a path)."""
    return _flag(parser, "--wheelhouse", help, many=False, required=False, type=Path, **kwargs)


def matrix(parser: Any, *, after_command: bool = False) -> argparse.Action:
    """`--matrix FILE`: before the command (with its default), or accepted after it too
    (`release plan --matrix other.yaml`), where it leaves the first one's value alone."""
    if after_command:
        return _flag(parser, "--matrix", f"the matrix file (default: {DEFAULT_MATRIX})", many=False,
                     required=False, default=argparse.SUPPRESS)  # fmt: skip
    return _flag(parser, "--matrix", "the matrix file (default: %(default)s)", many=False, required=False,
                 default=DEFAULT_MATRIX)  # fmt: skip
