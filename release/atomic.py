"""Outputs appear whole or not at all: every wheel, report and copy is written to a temporary
name in its destination directory (the same filesystem), flushed to disk, then renamed.

A full disk, a read-only directory or an interrupt leaves the final name untouched (or absent)
and no temporary file behind. Temporary names start with `.` and end in `.part`, so a glob for
`*.whl` or `*.json` never sees them, and a re-run after SIGKILL recognises and removes its own
(`remove_leftovers`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

_CHUNK = 1 << 20


SCRATCH_SUFFIX = ".part"


def is_scratch(path: Path) -> bool:
    """Whether `path` is named as our temporary files are (`.<name>.<random>.part`): what a run
    killed before its rename (SIGKILL, power loss) leaves, and a re-run removes."""
    return path.name.startswith(".") and path.name.endswith(SCRATCH_SUFFIX) and path.name.count(".") >= 3


def remove_leftovers(directory: Path) -> list[Path]:
    """Remove our own temporary files left in `directory` by a killed run (links are removed,
    never followed; directories are left alone); the paths removed."""
    removed = []
    for path in sorted(directory.iterdir()) if directory.is_dir() else []:
        if is_scratch(path) and (path.is_symlink() or not path.is_dir()):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


@contextlib.contextmanager
def writing(target: Path) -> Iterator[tuple[IO[bytes], Path]]:
    """An open temporary file beside `target` (and its path, to check it before it counts);
    renamed over `target` when the block ends cleanly, removed otherwise. A link at `target` is
    replaced, never followed."""
    with _scratch(target) as pair:
        yield pair


@contextlib.contextmanager
def _scratch(target: Path) -> Iterator[tuple[IO[bytes], Path]]:
    """An open temporary file beside `target`; renamed over it when the block ends cleanly,
    removed otherwise."""
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=SCRATCH_SUFFIX, dir=target.parent)
    scratch = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out, scratch
            out.flush()
            os.fsync(out.fileno())
        scratch.replace(target)
    except BaseException:
        scratch.unlink(missing_ok=True)
        raise
    _sync_directory(target.parent)


def _sync_directory(directory: Path) -> None:
    """Make the rename itself durable (best effort: some filesystems refuse a directory fsync)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes(target: Path, data: bytes) -> Path:
    """Write `data` to `target` atomically; a symlink at `target` is replaced, never followed."""
    with _scratch(target) as (out, _scratch_path):
        out.write(data)
    return target


def write_with(target: Path, write: Callable[[IO[bytes]], None]) -> Path:
    """Let `write` fill an open file that becomes `target` atomically when it returns."""
    with _scratch(target) as (out, _scratch_path):
        write(out)
    return target


def write_text(target: Path, text: str) -> Path:
    """`write_bytes` of UTF-8 text."""
    return write_bytes(target, text.encode("utf-8"))


def copy_file(source: Path, target: Path) -> Path:
    """Copy `source` to `target` atomically (contents only; the mode of `source` is kept)."""
    with source.open("rb") as src, _scratch(target) as (out, scratch):
        shutil.copyfileobj(src, out, _CHUNK)
        scratch.chmod(source.stat().st_mode & 0o777)
    return target


def move_file(source: Path, target: Path) -> Path:
    """Move `source` to `target` atomically, across filesystems too: a rename where both are on
    one filesystem, else a copy to a temporary name beside `target`, a rename, then `source` is
    removed."""
    try:
        same = source.stat().st_dev == target.parent.stat().st_dev
    except OSError:
        same = False
    if same:
        with source.open("rb") as fh:
            os.fsync(fh.fileno())
        source.replace(target)
        _sync_directory(target.parent)
        return target
    copy_file(source, target)
    source.unlink()
    return target
