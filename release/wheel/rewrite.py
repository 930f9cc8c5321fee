"""Write a copy of a wheel with members renamed, replaced or added, and a RECORD made anew.

The one wheel writer. Members are read through the bounded reader (`release.wheel.zip`,
`release.wheel.inflate`) and streamed into the copy, keeping each member's unix mode; RECORD is
rebuilt from the bytes actually written, so it lists every member with its sha256 and size
(RECORD signatures are dropped: they signed the old RECORD). The copy is written under a
temporary name and renamed (`release.atomic`).
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from release.atomic import write_with
from release.wheel.archive import MAX_TEXT_MEMBER, SIGNATURES, WheelReadError, dist_info_leaf, record_digest
from release.wheel.inflate import Budget, budget_for, pieces, read_member
from release.wheel.zip import Archive, ZipEntry, read_directory

_DATE = (2020, 1, 1, 0, 0, 0)
"""Members added here get a fixed time stamp, so the same inputs give the same bytes."""


def _record_line(path: str, digest: bytes | None, size: int | None) -> str:
    hashed = f"sha256={record_digest(digest)}" if digest is not None else ""
    quoted = f'"{path}"' if "," in path or '"' in path else path
    return f"{quoted},{hashed},{size if size is not None else ''}\n"


def _info(name: str, entry: ZipEntry | None) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    mode = entry.unix_mode if entry is not None and entry.unix_mode else 0o100644
    info.external_attr = (mode & 0xFFFF) << 16
    info.create_system = 3
    return info


def rewrite_wheel(
    source: Path,
    target: Path,
    *,
    rename: Callable[[str], str],
    edit: Mapping[str, Callable[[bytes], bytes]] | None = None,
    add: Mapping[str, bytes] | None = None,
) -> Path:
    """Copy `source` to `target`: every member under `rename(name)`; a member whose new name is
    in `edit` is read whole (a small text member) and written as `edit[name](its bytes)`; `add`
    (new names, replacing members of the same name) are written before RECORD; RECORD is rebuilt.
    Raises `WheelReadError` when `source` cannot be read, an edited member is missing or a name
    would appear twice."""
    edits = dict(edit or {})
    add = dict(add or {})
    try:
        with source.open("rb") as fh:
            archive = Archive(fh.fileno(), os.fstat(fh.fileno()).st_size)
            entries = read_directory(archive)
            budget = Budget(budget_for(archive.size))
            write_with(
                target, lambda out: _copy(archive, entries, budget, out, rename=rename, edits=edits, add=add)
            )
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
    add: dict[str, bytes],
) -> None:
    record_name: str | None = None
    lines: list[str] = []
    written: set[str] = set()
    with zipfile.ZipFile(out_file, "w", compression=zipfile.ZIP_DEFLATED) as out:

        def put(name: str, entry: ZipEntry | None, data: bytes | None) -> None:
            if name in written:
                msg = f"{name}: would be written twice"
                raise WheelReadError(msg)
            written.add(name)
            digest = hashlib.sha256()
            size = 0
            with out.open(_info(name, entry), "w", force_zip64=True) as member:
                chunks = [data] if data is not None else pieces(archive, entry, budget) if entry else []
                for chunk in chunks:
                    member.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
            lines.append(_record_line(name, digest.digest(), size))

        for entry in entries:
            if entry.is_dir:
                continue
            name = rename(entry.name)
            leaf = dist_info_leaf(name)
            if leaf == "RECORD":
                record_name = name
                continue
            if leaf in SIGNATURES or name in add:
                continue
            change = edits.pop(name, None)
            data = change(read_member(archive, entry, budget, most=MAX_TEXT_MEMBER)) if change else None
            put(name, entry, data)
        if record_name is None:
            msg = "no RECORD in the wheel"
            raise WheelReadError(msg)
        for name, data in add.items():
            put(name, None, data)
        if edits:
            msg = f"no member {sorted(edits)[0]} to edit"
            raise WheelReadError(msg)
        lines.append(_record_line(record_name, None, None))
        out.writestr(_info(record_name, None), "".join(lines).encode("utf-8"))
