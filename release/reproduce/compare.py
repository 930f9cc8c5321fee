"""What differs between two builds of one wheel: the members, then, inside a shared library, the
ELF parts (header, program or section headers, named sections).

A difference in `.note.gnu.build-id` with equal code points at the build ID's inputs, one in
`.comment` at another compiler, one in `.rodata` or `.dynstr` at an embedded path or time stamp.
Both wheels are read through the bounded reader (`release.wheel.zip`, `release.wheel.inflate`):
a published wheel is untrusted input like any other.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from release.inspect.elf import ElfReadError, file_regions, is_elf
from release.wheel.inflate import Budget, budget_for, pieces
from release.wheel.zip import Archive, ZipEntry, ZipError, read_directory

MAX_ELF_COMPARED = 1 << 30
"""A library larger than this is compared by digest only (its sections are not read into memory)."""
MAX_NAMED = 5
"""How many differing members a comparison names; the rest are counted."""


@dataclass(frozen=True)
class MemberDifference:
    """One member that differs, and how."""

    member: str
    what: str
    sections: tuple[str, ...] = ()
    """The ELF parts that differ, in file order (a library's only)."""

    def __str__(self) -> str:
        return f"{self.member}: {self.what}"


class _Wheel:
    """One wheel open for reading: its entries by name, in archive order."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.archive = Archive(fd, os.fstat(fd).st_size)
        self.entries = read_directory(self.archive)
        self.by_name = {e.name: e for e in self.entries}
        self.budget = Budget(budget_for(self.archive.size))

    def chunks(self, entry: ZipEntry) -> Iterator[bytes]:
        return pieces(self.archive, entry, self.budget)

    def digest(self, entry: ZipEntry) -> str:
        sha = hashlib.sha256()
        for piece in self.chunks(entry):
            sha.update(piece)
        return sha.hexdigest()

    def data(self, entry: ZipEntry) -> bytes:
        return b"".join(self.chunks(entry))


def compare_wheels(published: Path, rebuilt: Path) -> list[MemberDifference]:
    """Every member that differs between the two wheels, in the published wheel's order (members
    only in the rebuilt one last); an empty list when only the archive itself differs (member
    order, the zip headers), which one entry then says. `ValueError` (a `ZipError`) when either
    cannot be read."""
    with published.open("rb") as a, rebuilt.open("rb") as b:
        left, right = _Wheel(published, a.fileno()), _Wheel(rebuilt, b.fileno())
        found = [d for e in left.entries if (d := _member(left, right, e)) is not None]
        found += [
            MemberDifference(e.name, "only in the rebuilt wheel")
            for e in right.entries
            if e.name not in left.by_name
        ]
        if not found and [e.name for e in left.entries] != [e.name for e in right.entries]:
            found.append(MemberDifference("(archive)", "the same members in another order"))
    return found


def _member(left: _Wheel, right: _Wheel, entry: ZipEntry) -> MemberDifference | None:
    other = right.by_name.get(entry.name)
    if other is None:
        return MemberDifference(entry.name, "only in the published wheel")
    if entry.is_dir or other.is_dir:
        return (
            None
            if entry.is_dir == other.is_dir
            else MemberDifference(entry.name, "a directory in one wheel only")
        )
    if entry.size != other.size or entry.crc != other.crc or left.digest(entry) != right.digest(other):
        return _content(left, right, entry, other)
    if entry.unix_mode != other.unix_mode:
        return MemberDifference(
            entry.name, f"mode {entry.unix_mode:o} published, {other.unix_mode:o} rebuilt"
        )
    if entry.dos_time != other.dos_time:
        return MemberDifference(
            entry.name, f"time stamp {_when(entry)} published, {_when(other)} rebuilt (SOURCE_DATE_EPOCH?)"
        )
    if entry.method != other.method:
        return MemberDifference(
            entry.name, f"compression method {entry.method} published, {other.method} rebuilt"
        )
    return None


def _when(entry: ZipEntry) -> str:
    year, month, day, hour, minute, second = entry.date_time
    return f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"


def _content(left: _Wheel, right: _Wheel, entry: ZipEntry, other: ZipEntry) -> MemberDifference:
    sizes = f"{entry.size} bytes published, {other.size} rebuilt"
    head = next(iter(left.chunks(entry)), b"")
    if not is_elf(head[:4]) or max(entry.size, other.size) > MAX_ELF_COMPARED:
        return MemberDifference(entry.name, f"content differs ({sizes})")
    a, b = left.data(entry), right.data(other)
    try:
        parts = differing_parts(a, b)
    except ElfReadError as exc:
        return MemberDifference(entry.name, f"content differs ({sizes}); {exc}")
    first = first_difference(a, b)
    where = region_at(a, first)
    what = f"ELF parts differ: {', '.join(parts) or 'none (only bytes between them)'}"
    return MemberDifference(
        entry.name, f"{what}; first differing byte 0x{first:x} ({where}); {sizes}", tuple(parts)
    )


def differing_parts(a: bytes, b: bytes) -> list[str]:
    """The names of the ELF parts whose bytes differ between two builds of one file, in the order of
    the first: a part that only one has, or that moved, counts as differing. `ElfReadError` when
    either is not a readable ELF file."""
    theirs = {name: (offset, size) for name, offset, size in file_regions(b)}
    found = []
    mine = file_regions(a)
    for name, offset, size in mine:
        other = theirs.get(name)
        if other is None or a[offset : offset + size] != b[other[0] : other[0] + other[1]]:
            found.append(name)
    found += [name for name in theirs if name not in {n for n, _o, _s in mine}]
    return found


def first_difference(a: bytes, b: bytes, block: int = 1 << 16) -> int:
    """The offset of the first byte that differs (the shorter's length when one is the other's start)."""
    for start in range(0, min(len(a), len(b)), block):
        x, y = a[start : start + block], b[start : start + block]
        if x != y:
            return start + next(i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q)
    return min(len(a), len(b))


def region_at(data: bytes, offset: int) -> str:
    """The ELF part of `data` that holds byte `offset` (the innermost: a section before the
    headers that span it), or where it falls between parts."""
    try:
        regions = file_regions(data)
    except ElfReadError:
        return "not a readable ELF file"
    holding = [name for name, start, size in regions if start <= offset < start + size]
    return holding[-1] if holding else "between sections (padding)"


def describe(differences: list[MemberDifference], published: Path, rebuilt: Path) -> str:
    """The report of one wheel that did not rebuild the same: its first `MAX_NAMED` differences."""
    lines = [f"  {d}" for d in differences[:MAX_NAMED]]
    if len(differences) > MAX_NAMED:
        lines.append(f"  ... and {len(differences) - MAX_NAMED} more member(s)")
    if not differences:
        lines.append("  every member is the same; only the archive's headers differ")
    return f"{published.name}: the rebuild {rebuilt} differs:\n" + "\n".join(lines)


__all__ = ["MAX_NAMED", "MemberDifference", "ZipError", "compare_wheels", "describe", "differing_parts"]
