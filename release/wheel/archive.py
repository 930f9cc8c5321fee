"""A wheel's own files: METADATA, WHEEL and RECORD, located one way and parsed one way, and where
each member installs. Members are read through `release.wheel.zip` and `release.wheel.inflate`,
so a hostile archive ends in `WheelReadError`, never in an unbounded read."""

from __future__ import annotations

import base64
import csv
import email.parser
import os
from collections.abc import Iterable
from email.message import Message
from pathlib import Path
from typing import NamedTuple

from release.wheel.files import open_regular
from release.wheel.inflate import Budget, budget_for, read_member
from release.wheel.zip import Archive, read_directory

MAX_TEXT_MEMBER = 16 << 20
"""METADATA, WHEEL and RECORD larger than this are refused (no real wheel comes close)."""
SIGNATURES = ("RECORD.jws", "RECORD.p7s")
"""dist-info files RECORD does not list (they sign it)."""


class WheelReadError(ValueError):
    """The wheel's archive or its metadata cannot be read."""


def is_dist_info(name: str, leaf: str | None = None) -> bool:
    """Whether a member is in the wheel's top-level `*.dist-info/` (and is `leaf` there)."""
    top, sep, rest = name.partition("/")
    if not sep or not top.endswith(".dist-info"):
        return False
    return leaf is None or rest == leaf


def dist_info_member(names: Iterable[str], leaf: str) -> str:
    """The one top-level `*.dist-info/<leaf>` member, else `WheelReadError`."""
    found = [n for n in names if is_dist_info(n, leaf)]
    if len(found) != 1:
        msg = f"expected one .dist-info/{leaf}, found {len(found)}"
        raise WheelReadError(msg)
    return found[0]


def dist_info_dirs(names: Iterable[str]) -> list[str]:
    """The top-level `*.dist-info` directories members live in, sorted."""
    tops = {n.split("/", 1)[0] for n in names if "/" in n}
    return sorted(t for t in tops if t.endswith(".dist-info"))


def dist_info_leaf(member: str) -> str | None:
    """'METADATA' for `x-1.0.dist-info/METADATA` (a file directly in a top-level dist-info), else None."""
    top, _, leaf = member.partition("/")
    return leaf if top.endswith(".dist-info") and leaf and "/" not in leaf else None


def install_path(member: str) -> str:
    """Where a member lands, relative to site-packages: `pkg-1.0.data/platlib/x/y.so` -> `x/y.so`;
    `pkg-1.0.data/scripts/tool` -> `<scripts>/tool`."""
    first, _, rest = member.partition("/")
    if first.endswith(".data") and rest:
        scheme, _, inner = rest.partition("/")
        if scheme in ("purelib", "platlib"):
            return inner
        return f"<{scheme}>/{inner}"
    return member


def parse_metadata(text: str) -> Message:
    """Core metadata headers (RFC 822 style), as the stdlib parses them; WHEEL has the same form."""
    return email.parser.HeaderParser().parsestr(text, headersonly=True)


def read_metadata(wheel: Path) -> Message:
    """The wheel's `*.dist-info/METADATA` headers; `WheelReadError` when it cannot be read."""
    try:
        with open_regular(wheel) as fh:
            archive = Archive(fh.fileno(), os.fstat(fh.fileno()).st_size)
            entries = {e.name: e for e in read_directory(archive)}
            entry = entries[dist_info_member(entries, "METADATA")]
            data = read_member(archive, entry, Budget(budget_for(archive.size)), most=MAX_TEXT_MEMBER)
    except (OSError, ValueError) as exc:  # ZipError and WheelReadError are ValueErrors
        msg = f"cannot read the wheel ({exc})"
        raise WheelReadError(msg) from None
    return parse_metadata(data.decode("utf-8", errors="replace"))


def requires_dist(metadata: Message) -> list[str]:
    """Unconditional `Requires-Dist` entries (those without an `extra ==` marker)."""
    return [r for r in metadata.get_all("Requires-Dist") or [] if "extra ==" not in r]


def record_digest(digest: bytes) -> str:
    """RECORD's form of a digest: urlsafe base64 without padding."""
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class RecordEntry(NamedTuple):
    """One line of RECORD: a path, its `algorithm=digest` (or none) and its size (or none)."""

    path: str
    algorithm: str | None
    digest: str | None
    size: int | None
    line: int


def parse_record(text: str) -> list[RecordEntry]:
    """RECORD's lines (a CSV file: path, hash, size); `WheelReadError` naming a malformed line."""
    entries: list[RecordEntry] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line:
            continue
        if '"' in line:  # a quoted path (with a comma or a quote in it): the csv module reads it
            try:
                row = next(csv.reader([line]), [])
            except csv.Error as exc:
                msg = f"RECORD line {number} is not CSV ({exc})"
                raise WheelReadError(msg) from None
        else:
            row = line.split(",")
        if len(row) != 3:
            msg = f"RECORD line {number}: {len(row)} fields, not 3 (path, hash, size)"
            raise WheelReadError(msg)
        path, hashed, size = row
        algorithm, _, digest = hashed.partition("=")
        if size and not size.isdigit():
            msg = f"RECORD line {number}: size {size[:20]!r} is not a number"
            raise WheelReadError(msg)
        number_of_bytes = int(size) if size else None
        entries.append(RecordEntry(path, algorithm or None, digest or None, number_of_bytes, number))
    return entries
