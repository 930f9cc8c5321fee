"""Write a copy of a wheel with members renamed, edited, replaced or added, and a RECORD made anew.

The one wheel writer: variant wheels (new names, an edited METADATA, an added `variant.json`) and
repair (ELF members with a new RUNPATH, `Requires-External` in METADATA) both write through it.
Members are read through the bounded reader (`release.wheel.zip`, `release.wheel.inflate`) and
streamed into the copy in archive order, each keeping its time stamp, unix mode and compression
(stored or deflated), so the same source gives the same bytes; directory entries are kept. RECORD
is rebuilt from the bytes actually written, so it lists every file with its sha256 and size
(PEP 376/427; RECORD signatures are dropped: they signed the old RECORD), and is written last.
The copy is written under a temporary name and renamed (`release.atomic`); `target` may be
`source` itself.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO

from release.atomic import write_with
from release.wheel.archive import MAX_TEXT_MEMBER, SIGNATURES, WheelReadError, dist_info_leaf, record_digest
from release.wheel.inflate import Budget, budget_for, pieces, read_member
from release.wheel.zip import STORED, Archive, ZipEntry, read_directory

_DATE = (2020, 1, 1, 0, 0, 0)
"""Members added here get a fixed time stamp, so the same inputs give the same bytes."""


def _record_line(path: str, digest: bytes | None, size: int | None) -> str:
    hashed = f"sha256={record_digest(digest)}" if digest is not None else ""
    quoted = f'"{path}"' if "," in path or '"' in path else path
    return f"{quoted},{hashed},{size if size is not None else ''}\n"


def _info(name: str, entry: ZipEntry | None) -> zipfile.ZipInfo:
    """The new member's header: the source entry's time, mode and compression, or a new file's."""
    info = zipfile.ZipInfo(name, date_time=entry.date_time if entry is not None else _DATE)
    stored = entry is not None and (entry.method == STORED or entry.is_dir)
    info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    mode = entry.unix_mode if entry is not None and entry.unix_mode else 0o100644
    info.external_attr = (mode & 0xFFFF) << 16 | (0x10 if entry is not None and entry.is_dir else 0)
    info.create_system = 3
    return info


def rewrite_wheel(
    source: Path,
    target: Path,
    *,
    rename: Callable[[str], str] | None = None,
    edit: Mapping[str, Callable[[bytes], bytes]] | None = None,
    replace: Mapping[str, bytes] | None = None,
    add: Mapping[str, bytes] | None = None,
) -> Path:
    """Copy `source` to `target`: every member under `rename(name)` (its own name by default);
    a member whose new name is in `edit` is read whole (a small text member) and written as
    `edit[name](its bytes)`; one in `replace` is written as `replace[name]` in its place (any
    size); `add` (new names, replacing members of the same name) are written before RECORD;
    RECORD is rebuilt. Raises `WheelReadError` when `source` cannot be read, an edited or
    replaced member is missing or a name would appear twice."""
    edits, replaced, added = dict(edit or {}), dict(replace or {}), dict(add or {})
    try:
        with source.open("rb") as fh:
            archive = Archive(fh.fileno(), os.fstat(fh.fileno()).st_size)
            entries = read_directory(archive)
            budget = Budget(budget_for(archive.size))

            def write(out: IO[bytes]) -> None:
                _copy(
                    archive, entries, budget, out,
                    rename=rename or str, edits=edits, replaced=replaced, add=added,
                )  # fmt: skip

            write_with(target, write)
        target.chmod(0o644)  # a file to publish: readable by the index that serves it
    except (OSError, ValueError) as exc:  # ZipError and WheelReadError are ValueErrors
        msg = f"{source.name}: cannot rewrite the wheel ({exc})"
        raise WheelReadError(msg) from None
    return target


def _copy(
    archive: Archive,
    entries: list[ZipEntry],
    budget: Budget,
    out_file: IO[bytes],
    *,
    rename: Callable[[str], str],
    edits: dict[str, Callable[[bytes], bytes]],
    replaced: dict[str, bytes],
    add: dict[str, bytes],
) -> None:
    record: tuple[str, ZipEntry] | None = None
    lines: list[str] = []
    written: set[str] = set()
    with zipfile.ZipFile(out_file, "w", compression=zipfile.ZIP_DEFLATED) as out:

        def put(name: str, entry: ZipEntry | None, chunks: Iterable[bytes]) -> None:
            if name in written:
                msg = f"{name}: would be written twice"
                raise WheelReadError(msg)
            written.add(name)
            digest = hashlib.sha256()
            size = 0
            with out.open(_info(name, entry), "w", force_zip64=True) as member:
                for chunk in chunks:
                    member.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
            lines.append(_record_line(name, digest.digest(), size))

        for entry in entries:
            name = rename(entry.name)
            if entry.is_dir:
                if name not in written:
                    written.add(name)
                    out.writestr(_info(name, entry), b"")
                continue
            leaf = dist_info_leaf(name)
            if leaf == "RECORD":
                record = name, entry
                continue
            if leaf in SIGNATURES or name in add:
                continue
            change = edits.pop(name, None)
            data = replaced.pop(name, None)
            if change is not None:
                data = change(read_member(archive, entry, budget, most=MAX_TEXT_MEMBER))
            put(name, entry, [data] if data is not None else pieces(archive, entry, budget))
        if record is None:
            msg = "no RECORD in the wheel"
            raise WheelReadError(msg)
        for name, data in add.items():
            put(name, None, [data])
        missing = sorted([*edits, *replaced])
        if missing:
            msg = f"no member {missing[0]} to {'edit' if missing[0] in edits else 'replace'}"
            raise WheelReadError(msg)
        lines.append(_record_line(record[0], None, None))
        out.writestr(_info(*record), "".join(lines).encode("utf-8"))
