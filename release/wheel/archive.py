"""Reading the small text members of a wheel: METADATA and RECORD, located one way."""

from __future__ import annotations

import email.parser
import zipfile
from email.message import Message
from pathlib import Path

MAX_TEXT_MEMBER = 16 << 20
"""METADATA and RECORD larger than this are refused (no real wheel comes close)."""


class WheelReadError(ValueError):
    """The wheel's archive or its metadata cannot be read."""


def dist_info_member(names: list[str], leaf: str) -> str:
    """The one top-level `*.dist-info/<leaf>` member, else `WheelReadError`."""
    found = [n for n in names if n.count("/") == 1 and n.endswith(f".dist-info/{leaf}")]
    if len(found) != 1:
        msg = f"expected one .dist-info/{leaf}, found {len(found)}"
        raise WheelReadError(msg)
    return found[0]


def read_text_member(zf: zipfile.ZipFile, name: str) -> str:
    info = zf.getinfo(name)
    if info.file_size > MAX_TEXT_MEMBER:
        msg = f"{name}: {info.file_size} bytes, more than a metadata file may hold"
        raise WheelReadError(msg)
    with zf.open(info) as stream:
        data = stream.read(MAX_TEXT_MEMBER + 1)
    if len(data) > MAX_TEXT_MEMBER:
        msg = f"{name}: larger than its declared size"
        raise WheelReadError(msg)
    return data.decode("utf-8", errors="replace")


def parse_metadata(text: str) -> Message:
    """Core metadata headers (RFC 822 style), as the stdlib parses them."""
    return email.parser.HeaderParser().parsestr(text, headersonly=True)


def read_metadata(wheel: Path) -> Message:
    """The wheel's `*.dist-info/METADATA` headers; `WheelReadError` when it cannot be read."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            return parse_metadata(read_text_member(zf, dist_info_member(zf.namelist(), "METADATA")))
    except (OSError, zipfile.BadZipFile, KeyError, EOFError) as exc:
        msg = f"cannot read the wheel ({exc})"
        raise WheelReadError(msg) from None


def requires_dist(metadata: Message) -> list[str]:
    """Unconditional `Requires-Dist` entries (those without an `extra ==` marker)."""
    return [r for r in metadata.get_all("Requires-Dist") or [] if "extra ==" not in r]


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


def in_dist_info(member: str) -> bool:
    """Whether a member is one of the wheel's `*.dist-info/` files."""
    return ".dist-info/" in member
