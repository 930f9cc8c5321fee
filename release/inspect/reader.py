"""Reading one wheel for verify: its members, its METADATA and every ELF file, from the mapped zip.

ELF files are read into memory and never extracted; a large deflated library is streamed, keeping
only the pieces the ELF inspection reads.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import struct
import zipfile
import zlib
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from release.errors import UsageError, VerifyError
from release.inspect.contents import Member, WheelContents
from release.inspect.elf import (
    ElfInfo,
    ElfReadError,
    MissingRange,
    SparseImage,
    inspect_elf,
    is_elf,
    wanted_ranges,
)
from release.wheel.archive import (
    WheelReadError,
    dist_info_member,
    in_dist_info,
    install_path,
    parse_metadata,
)
from release.wheel.names import InvalidWheelName, parse_wheel_name

if TYPE_CHECKING:
    from concurrent.futures import Future

_NOT_ELF = (".py", ".pyi", ".pyc", ".txt", ".json", ".h", ".hpp", ".md", ".typed", ".toml", ".cmake")
_READ_AHEAD = 3
_STREAM_ABOVE = 8 << 20  # deflated ELF members larger than this are streamed, not held whole
_STREAM_INPUT = 64 << 10
_STREAM_OUTPUT = 1 << 20


def parse_name(wheel: Path) -> tuple[str, str, tuple[str, ...]]:
    """(distribution, version, tags) from the wheel's file name; `UsageError` if it is none."""
    try:
        name = parse_wheel_name(wheel)
    except InvalidWheelName as exc:
        msg = f"{wheel}: not a wheel file name ({exc})"
        raise UsageError(msg) from None
    return str(name.distribution), name.version, name.tags


def _member_bytes(view: memoryview, path: Path, info: zipfile.ZipInfo, *, elf_only: bool) -> bytes | None:
    """A member's content, inflated in one call from the mapped wheel (zlib releases the GIL, so
    worker threads overlap). With `elf_only`, None for a member that is not an ELF file."""
    start = _data_start(view, info)
    if info.compress_type == zipfile.ZIP_STORED:
        if elf_only and not is_elf(bytes(view[start : start + 4])):
            return None
        data = bytes(view[start : start + info.file_size])
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        if elf_only:
            probe = zlib.decompressobj(-15)
            if not is_elf(probe.decompress(view[start : start + min(info.compress_size, 4096)], 4)):
                return None
        data = zlib.decompress(view[start : start + info.compress_size], -15, max(info.file_size, 1))
    else:
        with zipfile.ZipFile(path) as zf:
            data = zf.read(info)
        if elf_only and not is_elf(data):
            return None
    if len(data) != info.file_size:
        msg = f"{info.filename}: {len(data)} bytes read, {info.file_size} expected"
        raise zipfile.BadZipFile(msg)
    return data


def _data_start(view: memoryview, info: zipfile.ZipInfo) -> int:
    header = bytes(view[info.header_offset : info.header_offset + 30])
    if len(header) != 30 or header[:4] != b"PK\x03\x04":
        msg = f"{info.filename}: bad local file header"
        raise zipfile.BadZipFile(msg)
    if info.flag_bits & 0x1:
        msg = f"{info.filename}: encrypted members are not supported"
        raise zipfile.BadZipFile(msg)
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    start: int = info.header_offset + 30 + name_len + extra_len
    return start


def _member_image(view: memoryview, path: Path, info: zipfile.ZipInfo) -> bytes | SparseImage | None:
    """An ELF member for inspection, or None if it is not one. A large deflated member is streamed
    through zlib keeping only the pieces `wanted_ranges` names (headers, dynamic section, code,
    section table): its bulk data is never held in memory."""
    if info.compress_type != zipfile.ZIP_DEFLATED or info.file_size < _STREAM_ABOVE:
        return _member_bytes(view, path, info, elf_only=True)
    start = _data_start(view, info)
    end = start + info.compress_size
    inflater = zlib.decompressobj(-15)
    pieces: list[tuple[int, bytes]] = []
    ranges: list[tuple[int, int]] | None = None
    offset = 0
    for step in range(start, end, _STREAM_INPUT):
        pending: bytes | memoryview = view[step : min(end, step + _STREAM_INPUT)]
        while pending:
            out = inflater.decompress(pending, _STREAM_OUTPUT)
            pending = inflater.unconsumed_tail
            if not out:
                continue
            if ranges is None:
                if not is_elf(out):
                    return None
                ranges = wanted_ranges(out, info.file_size)
                if ranges is None:
                    return _member_bytes(view, path, info, elf_only=True)
            stop = offset + len(out)
            if any(lo < stop and offset < hi for lo, hi in ranges):
                pieces.append((offset, out))
            offset = stop
    if offset != info.file_size:
        msg = f"{info.filename}: {offset} bytes inflated, {info.file_size} expected"
        raise zipfile.BadZipFile(msg)
    return SparseImage(info.file_size, pieces)


def _may_be_elf(info: zipfile.ZipInfo) -> bool:
    name = info.filename
    return info.file_size >= 64 and not name.endswith(_NOT_ELF) and not in_dist_info(name)


def _metadata(view: memoryview, path: Path, infos: Sequence[zipfile.ZipInfo]) -> dict[str, str]:
    """`Name` and `Version` of the wheel's METADATA; empty when there is not exactly one."""
    by_name = {i.filename: i for i in infos}
    try:
        member = dist_info_member(list(by_name), "METADATA")
    except WheelReadError:
        return {}
    raw = _member_bytes(view, path, by_name[member], elf_only=False) or b""
    headers = parse_metadata(raw.decode("utf-8", errors="replace"))
    return {k: str(headers[k]) for k in ("Name", "Version") if headers[k] is not None}


def read_wheel(path: Path, device_sections: Sequence[str]) -> WheelContents:
    """The wheel's members, METADATA fields and ELF files; `VerifyError` when it cannot be read."""
    distribution, version, tags = parse_name(path)
    with zipfile.ZipFile(path) as zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
    members = [
        Member(i.filename, install_path(i.filename), i.file_size, (i.external_attr >> 16) & 0o7777)
        for i in infos
    ]
    with path.open("rb") as fh:
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if path.stat().st_size else None
    view = memoryview(mapped) if mapped is not None else memoryview(b"")
    try:
        metadata = _metadata(view, path, infos)
        elf_files = _read_elf_files(view, path, infos, device_sections)
    except (zipfile.BadZipFile, zlib.error) as exc:
        msg = f"{path.name}: cannot read the wheel ({exc})"
        raise VerifyError(msg) from None
    finally:
        view.release()
        if mapped is not None:
            with contextlib.suppress(BufferError):
                mapped.close()
    by_name = {i.filename: i for i in infos}

    def read(member: str) -> bytes:
        with zipfile.ZipFile(path) as zf:
            return zf.read(by_name[member])

    return WheelContents(path, distribution, version, tags, members, elf_files, read, metadata)


def _read_elf_files(
    view: memoryview, path: Path, infos: Sequence[zipfile.ZipInfo], device_sections: Sequence[str]
) -> list[ElfInfo]:
    elf_files: list[ElfInfo] = []
    candidates = iter([i for i in infos if _may_be_elf(i)])
    # Inflate the next members in worker threads while this one is parsed; a small window
    # bounds the memory held for a large wheel.
    # Imported here: concurrent.futures pulls in logging, a cost every `verify` start would pay.
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    with ThreadPoolExecutor(max_workers=2) as pool:

        def submit(info: zipfile.ZipInfo) -> tuple[zipfile.ZipInfo, Future[bytes | SparseImage | None]]:
            return info, pool.submit(_member_image, view, path, info)

        pending = deque(submit(info) for info in itertools.islice(candidates, _READ_AHEAD))
        while pending:
            info, future = pending.popleft()
            following = next(candidates, None)
            if following is not None:
                pending.append(submit(following))
            data = future.result()
            if data is None:
                continue
            try:
                try:
                    elf = inspect_elf(info.filename, data, device_sections=device_sections)
                except MissingRange:
                    whole = _member_bytes(view, path, info, elf_only=False) or b""
                    elf = inspect_elf(info.filename, whole, device_sections=device_sections)
            except ElfReadError as exc:
                msg = f"{path.name}: {exc}"
                raise VerifyError(msg) from None
            elf_files.append(elf)
            del data
    return elf_files
