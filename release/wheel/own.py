"""Reading a wheel the toolkit built itself (repair's RUNPATH clean-up and its
`Requires-External` lines): whole members, in archive order. Rewriting one goes through the one
wheel writer, `release.wheel.rewrite`.

Only for our own output. Wheels from elsewhere are read by `release.inspect.reader`, bounded.
Each is opened by the one reader's rule (`open_regular`): a FIFO or a device named like a wheel
is refused at once, never read.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

from release.wheel.archive import dist_info_member
from release.wheel.files import open_regular


def own_members(wheel: Path) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of every member of a wheel we built, in archive order, each read whole."""
    with open_regular(wheel) as fh, zipfile.ZipFile(fh) as archive:
        for info in archive.infolist():
            yield info.filename, archive.read(info)


def member_names(wheel: Path) -> list[str]:
    """The names of a wheel's members, directories included, in archive order."""
    with open_regular(wheel) as fh, zipfile.ZipFile(fh) as archive:
        return archive.namelist()


def read_dist_info(wheel: Path, leaf: str) -> tuple[str, str]:
    """(member name, UTF-8 text) of a `.dist-info/<leaf>` file of a wheel we built."""
    with open_regular(wheel) as fh, zipfile.ZipFile(fh) as archive:
        name = dist_info_member(archive.namelist(), leaf)
        return name, archive.read(name).decode("utf-8")
