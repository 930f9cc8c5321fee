"""Reading one wheel for verify, bounded by construction.

The zip's structure is checked before anything is inflated (`release.wheel.zip`), the members'
declared sizes must fit the budget of a wheel that size, and then every member is streamed once,
in worker threads, through `release.wheel.inflate`: its sha256 for RECORD, and an ELF file through
`release.inspect.elfstream` (kept whole when it is at most 8 MiB; else the few ranges its first
bytes name, the CRC-32 of each 64 KiB block and the GPU code containers in its loaded segments).
Nothing is extracted and no member is held whole unless it is small. A table that lies outside the
kept ranges is read again, from the inflation checkpoint before it."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import os
import queue
import re
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from release.atomic import writing
from release.errors import UsageError, VerifyError
from release.inspect import wheelfile
from release.inspect.contents import Member, WheelContents
from release.inspect.devicecode import NO_ARCHITECTURES
from release.inspect.elf import HEAD_KEEP, ElfInfo, ElfReadError
from release.inspect.elfstream import ElfStream, describe_stream, elf_stream
from release.inspect.symboltables import SymbolCopy
from release.wheel.archive import (
    MAX_TEXT_MEMBER,
    WheelReadError,
    dist_info_leaf,
    dist_info_member,
    install_path,
    is_dist_info,
    parse_metadata,
    record_digest,
)
from release.wheel.files import open_regular
from release.wheel.inflate import Budget, Checkpoints, budget_for, pieces, read_member
from release.wheel.names import InvalidWheelName, parse_wheel_name, split_tag, split_variant_label
from release.wheel.zip import Archive, ZipEntry, ZipError, read_directory

TEXT_LEAVES = ("METADATA", "WHEEL", "RECORD")
MAX_SMALL_READ = 1 << 20
"""What `WheelContents.read` returns at most (it reads `__init__.py` for the variant guard)."""
MAX_HELD = 32 << 20
"""Bytes of small members held whole in all (see `_held`)."""
_LARGE = 1 << 20
"""Members at least this large are read in worker threads; smaller ones in the calling thread."""
_AHEAD = 128 << 20
"""Members at least this large are inflated by a thread of their own, ahead of their reading."""


def parse_name(wheel: Path) -> tuple[str, str, tuple[str, ...]]:
    """(distribution, version, tags) from the wheel's file name; `UsageError` if it is none."""
    try:
        name = parse_wheel_name(split_variant_label(wheel)[0])  # a variant wheel: its fields, less the label
    except InvalidWheelName as exc:
        msg = f"{wheel}: not a wheel file name ({exc})"
        raise UsageError(msg) from None
    return str(name.distribution), name.version, name.tags


@dataclass(frozen=True)
class _Read:
    """What one member's stream gave."""

    digest: str
    elf: ElfInfo | None
    data: bytes | None
    """The member's bytes, for a member held whole (see `_held`)."""
    symbols: SymbolCopy | None = None
    """A shared object's headers and symbol tables, in a wheel whose tags ask for an audit of its
    symbols (abi3): `WheelContents.symbol_copy` writes its copy from them."""


def _ahead(source: Iterator[bytes], depth: int = 2) -> Iterator[bytes]:
    """The pieces of `source`, inflated by a thread of their own up to `depth` pieces ahead: the
    inflater releases the GIL, so a large member's hashing and scanning overlap its inflation."""
    pipe: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for piece in source:
                while not stop.is_set():
                    with contextlib.suppress(queue.Full):
                        pipe.put(piece, timeout=0.1)
                        break
                if stop.is_set():
                    return
            pipe.put(None)
        except BaseException as exc:
            pipe.put(exc)

    producer = threading.Thread(target=produce, name="inflate-ahead", daemon=True)
    producer.start()
    try:
        while (item := pipe.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        with contextlib.suppress(queue.Empty):
            while True:
                pipe.get_nowait()
        producer.join()


def _read_member(
    archive: Archive,
    entry: ZipEntry,
    budget: Budget,
    device_sections: Sequence[str],
    names: re.Pattern[bytes],
    *,
    hold: bool,
    symbols: bool = False,
) -> _Read:
    if entry.size < 64:  # too small to be an ELF file: one read
        data = read_member(archive, entry, budget, most=64)
        return _Read(record_digest(hashlib.sha256(data).digest()), None, data if hold else None)
    digest = hashlib.sha256()
    elf: ElfStream | None = None
    first: list[tuple[int, bytes]] | None = []  # pieces until the first 64 bytes tell if it is ELF
    held = bytearray()
    offset = 0
    checkpoints = Checkpoints()
    stream = pieces(archive, entry, budget, checkpoints=checkpoints if entry.size > HEAD_KEEP else None)
    for piece in _ahead(stream) if entry.size >= _AHEAD else stream:
        digest.update(piece)
        if hold:
            held += piece
        if elf is not None:
            elf.feed(offset, piece)
        elif first is not None:
            first.append((offset, piece))
            if offset + len(piece) >= 64:
                elf = elf_stream(entry, first, checkpoints, names)
                first = None
        offset += len(piece)
    whole = digest.digest()
    info = None
    if elf is not None:
        info = describe_stream(
            archive,
            entry,
            budget,
            elf,
            whole=whole,
            device_sections=device_sections,
            names=names,
            symbols=symbols,
        )
    return _Read(
        record_digest(whole), info, bytes(held) if hold else None, elf.symbols if elf is not None else None
    )


def _workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def _read_all(
    archive: Archive,
    files: Sequence[ZipEntry],
    budget: Budget,
    device_sections: Sequence[str],
    names: re.Pattern[bytes],
    *,
    symbols: bool = False,
) -> dict[ZipEntry, _Read]:
    """Every member streamed once: the large ones a few at a time in worker threads, largest
    first, while this thread reads the small ones."""
    # Imported here: concurrent.futures pulls in logging, a cost every `verify` start would pay.
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    def read(entry: ZipEntry) -> _Read:
        return _read_member(
            archive, entry, budget, device_sections, names, hold=entry.name in held, symbols=symbols
        )

    held = _held(files)

    large = iter(sorted((e for e in files if e.size >= _LARGE), key=lambda e: -e.size))
    results: dict[ZipEntry, _Read] = {}
    with ThreadPoolExecutor(max_workers=_workers()) as pool:
        pending = deque((e, pool.submit(read, e)) for e in itertools.islice(large, 2 * _workers()))
        try:
            for entry in files:
                if entry.size < _LARGE:
                    results[entry] = read(entry)
            while pending:
                entry, future = pending.popleft()
                results[entry] = future.result()
                following = next(large, None)
                if following is not None:
                    pending.append((following, pool.submit(read, following)))
        finally:
            for _, future in pending:
                future.cancel()
    return results


def _held(files: Sequence[ZipEntry]) -> set[str]:
    """The members held whole as they pass, so that no rule reads one again: the dist-info's files
    (METADATA, WHEEL, RECORD, SBOMs, variant.json) and every `__init__.py` (the variant guard), each
    at most `MAX_SMALL_READ` bytes, `MAX_HELD` bytes in all (smallest first; beyond it, `read`
    reads a member again)."""
    wanted = [
        e
        for e in files
        if e.size <= MAX_SMALL_READ and (is_dist_info(e.name) or e.name.endswith("__init__.py"))
    ]
    held: set[str] = {e.name for e in files if dist_info_leaf(e.name) in TEXT_LEAVES}
    total = 0
    for entry in sorted(wanted, key=lambda e: e.size):
        total += entry.size
        if total > MAX_HELD:
            break
        held.add(entry.name)
    return held


def _budget(files: Sequence[ZipEntry], size: int) -> Budget:
    """The inflation budget of a wheel of `size` bytes, which its members' declared sizes must fit."""
    budget = Budget(budget_for(size))
    declared = sum(e.size for e in files)
    if declared > budget.limit:
        msg = f"its members declare {declared} bytes unpacked, more than the {budget.limit} allowed "
        msg += f"for a wheel of {size} bytes"
        raise ZipError(msg)
    for entry in files:
        if dist_info_leaf(entry.name) in TEXT_LEAVES and entry.size > MAX_TEXT_MEMBER:
            msg = f"{entry.name}: {entry.size} bytes, more than a metadata file may hold"
            raise ZipError(msg)
    return budget


def read_wheel(
    path: Path, device_sections: Sequence[str], architectures: re.Pattern[bytes] = NO_ARCHITECTURES
) -> WheelContents:
    """The wheel's members (with their sha256), METADATA fields, dist-info texts and ELF files;
    `VerifyError` naming the member when the wheel cannot be read safely."""
    wheelfile.keep_freed_memory()
    distribution, version, tags = parse_name(path)
    try:
        with open_regular(path) as fh:
            identity = wheelfile.identity(fh.fileno())
            before = wheelfile.fd_sha256(fh.fileno())
            archive = Archive(fh.fileno(), identity[2])
            entries = read_directory(archive)
            files = [e for e in entries if not e.is_dir]
            results = _read_all(
                archive,
                files,
                _budget(files, archive.size),
                device_sections,
                architectures,
                # the stable-abi rule audits them
                symbols=any(split_tag(tag)[1] in ("abi3", "abi3t") for tag in tags),
            )
            unchanged = wheelfile.identity(fh.fileno()) == identity
            after = before if unchanged and wheelfile.settled(identity) else wheelfile.fd_sha256(fh.fileno())
            if not unchanged or after != before:
                msg = (
                    f"{path.name}: the wheel changed while it was verified (sha256 {before} before, "
                    f"{after} after); nothing is reported on it"
                )
                raise VerifyError(msg)
    except OSError as exc:
        msg = f"{path.name}: cannot read the wheel ({exc.strerror})"
        raise VerifyError(msg) from None
    except (ZipError, ElfReadError) as exc:
        msg = f"{path.name}: {exc}"
        raise VerifyError(msg) from None
    contents = _contents(path, archive.size, (distribution, version, tags), entries, results)
    return dataclasses.replace(contents, sha256=before)


def _contents(
    path: Path,
    size: int,
    name: tuple[str, str, tuple[str, ...]],
    entries: Sequence[ZipEntry],
    results: dict[ZipEntry, _Read],
) -> WheelContents:
    files = [e for e in entries if not e.is_dir]
    members = [
        Member(e.name, install_path(e.name), e.size, e.unix_mode & 0o7777, results[e].digest, e.is_symlink)
        for e in files
    ]
    held = {e.name: d for e in files if (d := results[e].data) is not None}
    texts = {n: held[n].decode("utf-8", errors="replace") for n in held if dist_info_leaf(n) in TEXT_LEAVES}
    metadata: dict[str, str] = {}
    with contextlib.suppress(WheelReadError):
        headers = parse_metadata(texts[dist_info_member(texts, "METADATA")])
        metadata = {k: str(headers[k]) for k in ("Name", "Version") if headers[k] is not None}
    by_name = {e.name: e for e in files}

    def read(member: str) -> bytes:
        if member in held and len(held[member]) <= MAX_SMALL_READ:
            return held[member]  # held as it passed: not read again
        try:
            with open_regular(path) as fh:
                again = Archive(fh.fileno(), os.fstat(fh.fileno()).st_size)
                return read_member(again, by_name[member], Budget(MAX_SMALL_READ), most=MAX_SMALL_READ)
        except (OSError, ZipError) as exc:
            msg = f"{path.name}: {member}: cannot read it again ({exc})"
            raise VerifyError(msg) from None

    exported = Budget(budget_for(size))  # every export of this wheel together

    symbols = {e.name: s for e in files if (s := results[e].symbols) is not None}

    def symbol_copy(member: str, target: Path) -> bool:
        copy = symbols.get(member)
        if copy is not None and not copy.python:
            return False
        if copy is not None and not copy.doubt:  # its headers and symbol tables at their offsets
            try:
                with writing(target) as (out, _scratch):
                    out.truncate(by_name[member].size)
                    for offset, data in copy.pieces:
                        out.seek(offset)
                        out.write(data)
            except OSError as exc:
                msg = f"{path.name}: {member}: cannot write its copy ({exc.strerror})"
                raise VerifyError(msg) from None
            return True
        try:
            with open_regular(path) as fh, writing(target) as (out, _scratch):
                again = Archive(fh.fileno(), os.fstat(fh.fileno()).st_size)
                for piece in pieces(again, by_name[member], exported):
                    out.write(piece)
        except (OSError, ZipError) as exc:
            msg = f"{path.name}: {member}: cannot read it again ({exc})"
            raise VerifyError(msg) from None
        return True

    distribution, version, tags = name
    return WheelContents(
        path=path,
        distribution=distribution,
        version=version,
        tags=tags,
        members=members,
        elf_files=[info for e in files if (info := results[e].elf) is not None],
        read=read,
        metadata=metadata,
        texts=texts,
        directories=tuple(e.name for e in entries if e.is_dir),
        size=size,
        symbol_copy=symbol_copy,
        symbol_doubts={name: copy.doubt for name, copy in symbols.items() if copy.doubt},
    )
