"""Reading and rewriting a wheel the toolkit built itself (repair's RUNPATH clean-up and its
`Requires-External` lines): whole members, entry order and timestamps kept, RECORD updated.

Only for our own output. Wheels from elsewhere are read by `release.inspect.reader`, bounded.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from release.wheel.archive import dist_info_member, is_dist_info


def own_members(wheel: Path) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of every member of a wheel we built, in archive order, each read whole."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            yield info.filename, archive.read(info)


def read_dist_info(wheel: Path, leaf: str) -> tuple[str, str]:
    """(member name, UTF-8 text) of a `.dist-info/<leaf>` file of a wheel we built."""
    with zipfile.ZipFile(wheel) as archive:
        name = dist_info_member(archive.namelist(), leaf)
        return name, archive.read(name).decode("utf-8")


def rewrite_members(wheel: Path, target: Path, changed: Mapping[str, bytes]) -> Path:
    """A copy of `wheel` at `target` with `changed` members replaced and RECORD updated; entry
    order and timestamps are kept, so a rebuild stays byte-identical."""
    with (
        zipfile.ZipFile(wheel) as archive,
        zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as out,
    ):
        for info in archive.infolist():
            data = changed.get(info.filename, archive.read(info))
            if is_dist_info(info.filename, "RECORD"):
                data = _rewrite_record(data, changed)
            out.writestr(info, data)
    return target


def _rewrite_record(record: bytes, changed: Mapping[str, bytes]) -> bytes:
    lines = []
    for line in record.decode("utf-8").splitlines():
        name = line.rsplit(",", 2)[0]
        if name in changed:
            digest = base64.urlsafe_b64encode(hashlib.sha256(changed[name]).digest()).rstrip(b"=").decode()
            lines.append(f"{name},sha256={digest},{len(changed[name])}")
        else:
            lines.append(line)
    return ("\n".join(lines) + "\n").encode("utf-8")
