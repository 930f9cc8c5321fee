"""The one grammar of names and numbers that reach identifiers, file names, artifact names,
command lines and environment variables: ASCII only (`re.ASCII`, so the long s U+017F, the
Kelvin sign U+212A or the dotless i U+0131 never pass for `s`, `k` or `i` under IGNORECASE),
whole-string matches (`fullmatch` or `\\Z`, never `$`, which also matches before a final
newline), and numbers of ASCII digits with bounds (`int()` takes Arabic-Indic digits and 5000
digits as numbers; `str.isdigit` takes a superscript two)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?", re.ASCII)
"""An image or hardware key: it names jobs, artifacts and containers."""
NAME_RULE = "(lowercase ASCII letters, digits and '-', at most 64, not starting or ending with '-')"
VARIANT_NAME = re.compile(r"[a-z][a-z0-9]{0,63}", re.ASCII)
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
PEP508_NAME = re.compile(r"[A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9]", re.ASCII | re.IGNORECASE)
PYTHON_VERSION = re.compile(r"3\.[0-9]{1,3}", re.ASCII)
_DIGITS = re.compile(r"[0-9]+", re.ASCII)


def ascii_int(text: str, *, low: int = 0, high: int, digits: int = 20) -> int | None:
    """`text` as a whole number when it is ASCII digits only (at most `digits` of them) between
    `low` and `high` inclusive, else None."""
    if len(text) > digits or not _DIGITS.fullmatch(text):
        return None
    value = int(text)
    return value if low <= value <= high else None


_DECIMAL = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,6})?", re.ASCII)
MAX_SECONDS = 7 * 24 * 3600
"""The longest wait or deadline a flag may give: a week (`nan` and `inf` never wait forever)."""


def seconds(text: str) -> float:
    """A command-line number of seconds (argparse `type`): ASCII digits with at most one point,
    finite, from 0 to `MAX_SECONDS`; `argparse.ArgumentTypeError` (one usage line) otherwise."""
    if not _DECIMAL.fullmatch(text) or float(text) > MAX_SECONDS:
        msg = f"{text!r}: expected seconds, a plain decimal number from 0 to {MAX_SECONDS} (not nan or inf)"
        raise argparse.ArgumentTypeError(msg)
    return float(text)


def whole(low: int, high: int) -> Callable[[str], int]:
    """An argparse `type` for a whole number from `low` to `high` in ASCII digits."""

    def parse(text: str) -> int:
        value = ascii_int(text, low=low, high=high)
        if value is None:
            msg = f"{text!r}: expected a whole number from {low} to {high} (ASCII digits)"
            raise argparse.ArgumentTypeError(msg)
        return value

    parse.__name__ = "whole number"
    return parse
