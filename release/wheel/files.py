"""File digests and the one way a wheel is opened: only a regular file, never blocking.

A FIFO named like a wheel blocks `open()` forever; a link to `/dev/zero` reads without end.
`open_regular` opens without blocking (`O_NONBLOCK`, no controlling terminal) and checks what it
opened with `fstat`: anything but a regular file is refused at once (`NotRegularFile`, an
OSError) before a byte is read or the path reaches another tool. Every stage that reads a wheel
(hashing, metadata, the checks before twine) goes through it, as verify does.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

_CHUNK = 1 << 20
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotRegularFile(OSError):
    """The path is not a regular file (a FIFO, a device, a directory): refused before reading."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(errno.EINVAL, f"{kind}, not a regular file", str(path))
        self.kind = kind


def kind_of(mode: int) -> str | None:
    """None for a regular file, else what it is ("a FIFO", "a character device", ...)."""
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


@contextlib.contextmanager
def open_regular(path: Path) -> Iterator[io.FileIO]:
    """`path` opened for reading if, and only if, it is a regular file (links followed, then the
    opened file checked); `NotRegularFile` otherwise, at once, without blocking."""
    fd = os.open(path, _FLAGS)
    kind = kind_of(os.fstat(fd).st_mode)
    if kind is not None:
        os.close(fd)
        raise NotRegularFile(path, kind)
    try:
        os.set_blocking(fd, True)
        fh = io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh


def require_regular(path: Path) -> None:
    """Raise `NotRegularFile` (an OSError) unless `path` is a regular file, without blocking."""
    with open_regular(path):
        pass


def file_sha256(path: Path) -> str:
    """sha256 of a whole regular file, read in 1 MiB pieces (a large wheel is never held or
    mapped whole). Raises OSError (`NotRegularFile` for a FIFO or a device)."""
    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    with open_regular(path) as fh:
        while count := fh.readinto(view):
            digest.update(view[:count])
    return digest.hexdigest()


def not_regular(path: Path) -> str | None:
    """Why `path` is not read as a wheel ("a FIFO", "a character device", a dangling link), or
    None for a regular file: checked without blocking."""
    try:
        require_regular(path)
    except NotRegularFile as exc:
        return exc.kind
    except OSError as exc:
        return f"cannot be opened ({exc.strerror or exc})"
    return None


# ---------------------------------------------------------------------------------------------
# The one reader of files the toolkit reads by name (a manifest, image facts, a verify report,
# pyproject.toml, CMake files, an __init__.py): a regular file only, a size limit per kind, a
# nesting limit for JSON, and every failure one line (`reason`).

MAX_DEPTH = 64
"""JSON arrays and objects nested deeper than this are refused before they are parsed."""
_JSON_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


class TooLargeFile(OSError):
    """The file is larger than what is read of its kind: refused before it is held."""

    def __init__(self, path: Path, limit: int) -> None:
        super().__init__(errno.EFBIG, f"larger than {limit:,} bytes", str(path))


def reason(exc: BaseException) -> str:
    """One line saying why a file could not be read: its kind, a link loop, the OS's words."""
    if isinstance(exc, NotRegularFile):
        return exc.strerror or exc.kind
    if isinstance(exc, OSError):
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop"
        return exc.strerror or type(exc).__name__
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
    return " ".join(str(exc).split())[:160] or type(exc).__name__


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes. OSError otherwise, at once:
    `NotRegularFile` (a FIFO, a device, a directory), `TooLargeFile`, ELOOP for a link loop."""
    with open_regular(path) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise TooLargeFile(path, limit)
    return data


def read_text(path: Path, limit: int) -> str:
    """`read_bounded` decoded as UTF-8; `UnicodeDecodeError` for other bytes (`reason` says where)."""
    return read_bounded(path, limit).decode("utf-8")


def json_depth(data: bytes) -> int:
    """How deeply the arrays and objects of JSON text nest (strings skipped), in linear time."""
    depth = deepest = 0
    for token in _JSON_TOKENS.finditer(data):
        char = token.group()[:1]
        if char in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif char in (b"]", b"}"):
            depth -= 1
    return deepest


def load_json(data: bytes, max_depth: int = MAX_DEPTH) -> object:
    """JSON text parsed, or `ValueError` with one line: not UTF-8, nested too deeply, not JSON."""
    if json_depth(data) > max_depth:
        msg = f"JSON nested deeper than {max_depth} levels"
        raise ValueError(msg)
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(reason(exc)) from None
    except json.JSONDecodeError as exc:
        msg = f"not JSON ({exc.msg} at line {exc.lineno})"
        raise ValueError(msg) from None
    except (ValueError, RecursionError) as exc:
        msg = f"not JSON ({reason(exc)})"
        raise ValueError(msg) from None


def read_json(path: Path, limit: int, max_depth: int = MAX_DEPTH) -> object:
    """`load_json` of `read_bounded`: OSError for the file, ValueError for its text (one line each)."""
    return load_json(read_bounded(path, limit), max_depth)


# ---------------------------------------------------------------------------------------------
# The one walk of a directory tree the toolkit did not make (a wheelhouse, a user's project).

MAX_WALK_ENTRIES = 200_000
"""Entries a walk looks at before it stops with `TooManyEntries`."""
MAX_WALK_DEPTH = 64
"""Directory levels a walk descends below its root; deeper ones are not entered."""


class TooManyEntries(OSError):
    """A directory tree with more entries than a walk looks at: refused, not read without end."""

    def __init__(self, path: Path, limit: int) -> None:
        super().__init__(errno.EFBIG, f"more than {limit:,} entries below it", str(path))


def walk(
    root: Path,
    *,
    max_entries: int = MAX_WALK_ENTRIES,
    max_depth: int = MAX_WALK_DEPTH,
    enter: Callable[[str], bool] | None = None,
) -> Iterator[Path]:
    """Every path below `root` (not `root` itself), in sorted order per directory, iteratively: a
    link is yielded, never followed (so a walk cannot leave the tree or loop), directories deeper
    than `max_depth` or whose name `enter` refuses are yielded but not entered, unreadable
    directories are skipped, and more than `max_entries` entries raise `TooManyEntries` (an OSError)."""
    seen = 0
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        directory, depth = stack.pop()
        try:
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError:
            continue
        below: list[tuple[Path, int]] = []
        for entry in entries:
            seen += 1
            if seen > max_entries:
                raise TooManyEntries(root, max_entries)
            path = Path(entry.path)
            yield path
            try:
                is_directory = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_directory and depth + 1 < max_depth and (enter is None or enter(entry.name)):
                below.append((path, depth + 1))
        stack.extend(reversed(below))


def walk_files(
    root: Path,
    suffix: str = "",
    *,
    links: bool = False,
    max_entries: int = MAX_WALK_ENTRIES,
    max_depth: int = MAX_WALK_DEPTH,
) -> list[Path]:
    """The files below `root` whose names end with `suffix`, sorted (`walk`): regular files, and
    with `links` links to files too (a link to a directory is never entered)."""
    found = []
    for path in walk(root, max_entries=max_entries, max_depth=max_depth):
        if path.name.endswith(suffix) and (links or not path.is_symlink()) and path.is_file():
            found.append(path)
    return sorted(found)
