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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

from release.errors import ReleaseError

_CHUNK = 1 << 20


class OutsideProject(ReleaseError):
    """A file the toolkit writes in a project would land outside it, through a link."""


def inside(root: Path, target: Path) -> Path:
    """`target`'s directory, links resolved, when it lies inside `root` (links resolved too);
    `OutsideProject` otherwise, before anything is made or written. A link at `target` itself is
    replaced by the writers below, never followed."""
    base = root.resolve()
    try:
        directory = target.parent.resolve()
    except (OSError, RuntimeError):  # a link loop (RuntimeError before Python 3.13)
        directory = Path("/a link loop")
    if not directory.is_relative_to(base):
        msg = (
            f"{target}: refusing to write through a link: its directory is {directory}, outside "
            f"the project {base} (remove the link, or point it inside the project)"
        )
        raise OutsideProject(msg)
    return directory


def within(root: Path, path: Path) -> Path:
    """`path` when it lies under `root` and no part of it below `root` is a link (links are never
    followed out of the project, nor into another part of it); `OutsideProject` otherwise, before
    anything is made, written or removed. Parts that do not exist yet are fine."""
    base, full = Path(os.path.normpath(root.absolute())), Path(os.path.normpath(path.absolute()))
    if not full.is_relative_to(base):
        msg = f"{path}: refusing to write or remove outside the project {base}"
        raise OutsideProject(msg)
    current = base
    for part in full.relative_to(base).parts:
        current = current / part
        if current.is_symlink():
            msg = (
                f"{current}: refusing to write or remove through a link (to {current.readlink()}): "
                "the toolkit makes this directory itself; remove the link"
            )
            raise OutsideProject(msg)
    return path


def make_directory(path: Path, *, root: Path) -> Path:
    """`path` made (with its parents) under `root`, through no link (`within`)."""
    within(root, path).mkdir(parents=True, exist_ok=True)
    return within(root, path)


def remove_tree(path: Path, *, root: Path) -> None:
    """Remove a directory the toolkit made under `root`, following no link: a link on the way
    refuses (`within`), links inside the tree are removed, never followed (`shutil.rmtree`)."""
    within(root, path)
    shutil.rmtree(path, ignore_errors=True)


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


def write_bytes(target: Path, data: bytes, *, root: Path | None = None) -> Path:
    """Write `data` to `target` atomically; a symlink at `target` is replaced, never followed.
    With `root` (the project), its directory is made where missing and must lie inside `root`
    (`inside`): no link in the path leads the write out of the project."""
    if root is not None:
        inside(root, target).mkdir(parents=True, exist_ok=True)
    with _scratch(target) as (out, scratch):
        out.write(data)
        if root is not None:  # a project's file keeps its mode, or gets the umask's (not 0600)
            scratch.chmod(_project_mode(target))
    return target


def write_project_files(files: Sequence[tuple[Path, str, Path]]) -> None:
    """Write each (path, UTF-8 text, project root) atomically, after every place was checked
    (`inside`): one link out of a project refuses them all before the first is written."""
    for path, _text, root in files:
        inside(root, path)
    for path, text, root in files:
        write_text(path, text, root=root)


def _project_mode(target: Path) -> int:
    try:
        if not target.is_symlink():
            return target.stat().st_mode & 0o7777
    except OSError:
        pass
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_with(target: Path, write: Callable[[IO[bytes]], None]) -> Path:
    """Let `write` fill an open file that becomes `target` atomically when it returns."""
    with _scratch(target) as (out, _scratch_path):
        write(out)
    return target


def write_text(target: Path, text: str, *, root: Path | None = None) -> Path:
    """`write_bytes` of UTF-8 text."""
    return write_bytes(target, text.encode("utf-8"), root=root)


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
