"""What verify read from one wheel: its name's fields, its members and its ELF files.

The reader fills these; the rules read them. Unit tests build them directly (no zip, no ELF).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from release.errors import VerifyError
from release.inspect.elf import ElfInfo
from release.wheel.archive import dist_info_leaf


class Member(NamedTuple):
    """One file of the wheel (directory entries are not members; a tuple: there may be 100,000)."""

    name: str
    install_path: str
    """Where the file lands relative to site-packages; `<scripts>/x` for `*.data/scripts/x`."""
    size: int
    mode: int
    """Unix permission bits from the zip (0 when it was not written on unix)."""
    digest: str = ""
    """sha256 of the content in RECORD's form (urlsafe base64, no padding)."""
    symlink: bool = False
    """The zip marks it a symbolic link (the content is the link's target)."""


def _not_from_a_file(member: str, target: Path) -> bool:
    del target
    msg = f"{member}: these contents were not read from a wheel file"
    raise VerifyError(msg)


@dataclass
class WheelContents:
    """One wheel as the rules see it."""

    path: Path
    distribution: str
    version: str
    tags: tuple[str, ...]
    members: list[Member]
    elf_files: list[ElfInfo]
    read: Callable[[str], bytes]
    """A small member's bytes (bounded: for text members such as `__init__.py`)."""
    metadata: Mapping[str, str] = field(default_factory=dict)
    """`Name` and `Version` of `*.dist-info/METADATA` (empty when it cannot be read)."""
    texts: Mapping[str, str] = field(default_factory=dict)
    """The top-level `*.dist-info/` METADATA, WHEEL and RECORD, by member name."""
    directories: tuple[str, ...] = ()
    """Directory entries of the zip (`name/`)."""
    size: int = 0
    """Bytes of the wheel file."""
    sha256: str = ""
    """sha256 of exactly the bytes that were inspected (hashed from the same open file before and
    after the reading, which must agree)."""
    symbol_copy: Callable[[str, Path], bool] = field(default=_not_from_a_file)
    """Writes a new file that reads as the member does to a tool of its symbols (abi3audit): for a
    shared object of an abi3 wheel, its headers and symbol tables as verify's pass kept them, at
    their offsets in a sparse file of its size (`release.inspect.symboltables`); any other member's
    bytes streamed again, within the wheel's inflation budget. False, and nothing written, when the
    member's symbol tables name nothing of Python's C API (no `Py` in their strings)."""

    symbol_doubts: Mapping[str, str] = field(default_factory=dict)
    """Shared objects whose section headers' `.dynsym` is not the table `DT_SYMTAB`/`DT_STRTAB`
    name, and why: `symbol_copy` copies them whole, and stable-abi warns."""

    def dist_info_text(self, leaf: str) -> tuple[str, str] | None:
        """(member name, text) of the one top-level dist-info file `leaf` (METADATA, WHEEL,
        RECORD), or None where there is none or more than one."""
        found = [(n, t) for n, t in self.texts.items() if dist_info_leaf(n) == leaf]
        return found[0] if len(found) == 1 else None
