"""What verify read from one wheel: its name's fields, its members and its ELF files.

The reader fills these; the rules read them. Unit tests build them directly (no zip, no ELF).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from release.inspect.elf import ElfInfo


@dataclass(frozen=True)
class Member:
    """One file of the wheel."""

    name: str
    install_path: str
    """Where the file lands relative to site-packages; `<scripts>/x` for `*.data/scripts/x`."""
    size: int
    mode: int


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
    """A member's bytes (bounded: for small text members such as `__init__.py`)."""
    metadata: Mapping[str, str] = field(default_factory=dict)
    """`Name` and `Version` of `*.dist-info/METADATA` (empty when it cannot be read)."""
