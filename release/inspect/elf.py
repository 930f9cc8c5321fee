"""ELF inspection for `release verify`: what one shared object or executable needs and carries.

Files are parsed from bytes already in memory (read straight from the wheel's zip). Only the
section headers, the dynamic section, the GNU version-needed section, `.text` (for a content
hash) and the device code sections a backend names are read: no symbol table is walked.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import re
import struct
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import IO, cast

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

ELF_MAGIC = b"\x7fELF"

# GPU architecture names as they appear inside code objects and fat binaries:
# AMD (gfx942, gfx90a), NVIDIA (sm_90, sm_90a), Moore Threads (mp_21).
_ARCH = re.compile(rb"(?<![A-Za-z0-9_])(gfx\d{3,4}[a-z]?|sm_\d{2,3}[a-z]?|mp_\d{2})(?![0-9])")
_IDENTITY = (".text", ".gnu.hash", ".hash")
_SHT_DYNAMIC = 6
_SHT_NOBITS = 8
_SHT_GNU_VERNEED = 0x6FFFFFFE
_SHT_NUMBERS = {"SHT_DYNAMIC": _SHT_DYNAMIC, "SHT_NOBITS": _SHT_NOBITS, "SHT_GNU_verneed": _SHT_GNU_VERNEED}
_VERSIONED = re.compile(r"^([A-Z][A-Z_]*?)_(\d+(?:\.\d+)*)$")


class ElfReadError(Exception):
    """A file starts like an ELF file but cannot be parsed."""


@dataclass(frozen=True)
class ElfInfo:
    """What the verifier needs to know about one ELF file of a wheel."""

    path: str
    size: int
    executable: bool
    needed: tuple[str, ...]
    soname: str | None
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    version_requirements: tuple[tuple[str, str], ...]
    """(library file, version name) pairs from `.gnu.version_r`, e.g. ('libc.so.6', 'GLIBC_2.34')."""
    debug_sections: tuple[str, ...]
    device_sections: tuple[str, ...]
    architectures: tuple[str, ...]
    code_sha256: str
    """sha256 of `.text` and the symbol hash table (`.gnu.hash`/`.hash`: a fingerprint of the exported
    names), or of the whole file when it has no code. Renaming a copy (file name, SONAME) keeps it."""

    def max_version(self, prefix: str) -> str | None:
        """The newest version with this prefix required (`GLIBC` -> '2.34'), or None."""
        return max_required(self.version_requirements, prefix)


def is_elf(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC


def parse_version(text: str) -> tuple[int, ...]:
    """'2.34' -> (2, 34); non-numeric parts end the version ('2.3.4a' -> (2, 3))."""
    parts: list[int] = []
    for piece in text.split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


def split_versioned(name: str) -> tuple[str, str] | None:
    """'GLIBCXX_3.4.29' -> ('GLIBCXX', '3.4.29'); 'GLIBC_PRIVATE' -> None."""
    match = _VERSIONED.match(name)
    if match is None:
        return None
    return match.group(1), match.group(2)


def max_required(requirements: Iterable[tuple[str, str]], prefix: str) -> str | None:
    best: str | None = None
    for _library, name in requirements:
        split = split_versioned(name)
        if split is None or split[0] != prefix:
            continue
        if best is None or parse_version(split[1]) > parse_version(best):
            best = split[1]
    return best


def find_architectures(data: bytes) -> tuple[str, ...]:
    """GPU architecture strings (gfx942, sm_90, mp_21) found in raw section bytes."""
    return tuple(sorted({m.group(1).decode("ascii") for m in _ARCH.finditer(data)}))


def inspect_elf(path: str, data: bytes | SparseImage, *, device_sections: Collection[str] = ()) -> ElfInfo:
    """Read one ELF file held in memory (whole, or the pieces of a `SparseImage`: a read outside
    them raises `MissingRange`); raise `ElfReadError` when it is malformed."""
    try:
        return _inspect(path, data, device_sections)
    except MissingRange:
        raise
    except (ELFError, ValueError, KeyError, IndexError, UnicodeDecodeError) as exc:
        msg = f"{path}: not a readable ELF file ({exc})"
        raise ElfReadError(msg) from None
    except Exception as exc:  # construct raises its own hierarchy on truncated files
        if type(exc).__module__.startswith("elftools"):
            msg = f"{path}: not a readable ELF file ({exc})"
            raise ElfReadError(msg) from None
        raise


def _whole_hash(data: bytes | SparseImage) -> str:
    if isinstance(data, SparseImage):
        data.seek(0)
        return hashlib.sha256(data.read()).hexdigest()
    return hashlib.sha256(data).hexdigest()


def _tag_string(tag: object, attribute: str) -> str:
    """The string value pyelftools attaches to a dynamic tag (`needed`, `soname`, `rpath`…)."""
    return str(getattr(tag, attribute, ""))


def _section_table(elf: ELFFile, stream: IO[bytes]) -> list[tuple[int, str, int, int]]:
    """(index, name, sh_type, sh_size) of every section, from one read of the section header
    table (pyelftools builds an object per header; only the few sections used are built here)."""
    count = elf.num_sections()
    shstrndx = elf["e_shstrndx"]
    entsize = elf["e_shentsize"]
    fmt = ("<" if elf.little_endian else ">") + ("IIQQQQIIQQ" if elf.elfclass == 64 else "IIIIIIIIII")
    if not count or not isinstance(shstrndx, int) or entsize != struct.calcsize(fmt):
        return [(i, s.name, _SHT_NUMBERS.get(s["sh_type"], -1), s["sh_size"])
                for i, s in enumerate(elf.iter_sections())]
    stream.seek(elf["e_shoff"])
    headers = list(struct.iter_unpack(fmt, stream.read(count * entsize)))
    names_header = headers[shstrndx]
    stream.seek(names_header[4])
    names = stream.read(names_header[5])
    table = []
    for index, header in enumerate(headers):
        start = header[0]
        end = names.find(b"\0", start)
        name = names[start : end if end >= 0 else len(names)].decode("utf-8", errors="replace")
        table.append((index, name, header[1], header[5]))
    return table


def _inspect(path: str, data: bytes | SparseImage, device_sections: Collection[str]) -> ElfInfo:
    stream = io.BytesIO(data) if isinstance(data, bytes) else cast("IO[bytes]", data)
    elf = ELFFile(stream)
    executable = elf.header["e_type"] == "ET_EXEC" or any(
        seg["p_type"] == "PT_INTERP" for seg in elf.iter_segments()
    )
    needed: list[str] = []
    soname: str | None = None
    rpath: list[str] = []
    runpath: list[str] = []
    requirements: list[tuple[str, str]] = []
    debug: list[str] = []
    device: list[str] = []
    architectures: set[str] = set()
    code = hashlib.sha256()
    has_code = False
    for index, name, sh_type, size in _section_table(elf, stream):
        if sh_type == _SHT_DYNAMIC:
            section = elf.get_section(index)
            if not isinstance(section, DynamicSection):
                continue
            for tag in section.iter_tags():
                kind = tag.entry.d_tag
                if kind == "DT_NEEDED":
                    needed.append(_tag_string(tag, "needed"))
                elif kind == "DT_SONAME":
                    soname = _tag_string(tag, "soname")
                elif kind == "DT_RPATH":
                    rpath.extend(p for p in _tag_string(tag, "rpath").split(":") if p)
                elif kind == "DT_RUNPATH":
                    runpath.extend(p for p in _tag_string(tag, "runpath").split(":") if p)
        elif sh_type == _SHT_GNU_VERNEED:
            section = elf.get_section(index)
            if not isinstance(section, GNUVerNeedSection):
                continue
            for verneed, auxiliaries in section.iter_versions():
                requirements.extend((str(verneed.name), str(aux.name)) for aux in auxiliaries)
        elif name.startswith((".debug_", ".zdebug_")):
            debug.append(name)
        elif name in device_sections and sh_type != _SHT_NOBITS and size > 0:
            device.append(name)
            architectures.update(find_architectures(elf.get_section(index).data()))
        elif name in _IDENTITY and sh_type != _SHT_NOBITS and size > 0:
            code.update(name.encode() + b"\0" + elf.get_section(index).data())
            has_code = has_code or name == ".text"
    return ElfInfo(
        path=path,
        size=len(data) if isinstance(data, bytes) else data.size,
        executable=executable,
        needed=tuple(needed),
        soname=soname,
        rpath=tuple(rpath),
        runpath=tuple(runpath),
        version_requirements=tuple(requirements),
        debug_sections=tuple(debug),
        device_sections=tuple(device),
        architectures=tuple(sorted(architectures)),
        code_sha256=code.hexdigest() if has_code else _whole_hash(data),
    )


# --- reading part of a large file ----------------------------------------------------------------

PF_X = 0x1
HEAD_BYTES = 1 << 20
TAIL_BYTES = 1 << 16


class MissingRange(Exception):
    """A read touched bytes of a `SparseImage` that were not kept."""


class SparseImage:
    """A read-only file made of the kept pieces of a larger one (for pyelftools): a large library
    streamed out of a zip keeps its headers, dynamic section, code and section table, not its data."""

    def __init__(self, size: int, pieces: Iterable[tuple[int, bytes]]) -> None:
        self.size = size
        self._starts: list[int] = []
        self._pieces: list[bytes] = []
        run_start, run = -1, bytearray()
        for offset, data in sorted(pieces, key=lambda p: p[0]):
            if run_start >= 0 and offset == run_start + len(run):
                run += data
                continue
            if run_start >= 0:
                self._starts.append(run_start)
                self._pieces.append(bytes(run))
            run_start, run = offset, bytearray(data)
        if run_start >= 0:
            self._starts.append(run_start)
            self._pieces.append(bytes(run))
        self._pos = 0

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self.size}[whence]
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, n: int = -1) -> bytes:
        start = self._pos
        end = self.size if n < 0 else min(self.size, start + n)
        if end <= start:
            return b""
        i = bisect.bisect_right(self._starts, start) - 1
        if i < 0 or end > self._starts[i] + len(self._pieces[i]):
            raise MissingRange(start, end)
        self._pos = end
        base = self._starts[i]
        return self._pieces[i][start - base : end - base]


def wanted_ranges(head: bytes, size: int) -> list[tuple[int, int]] | None:
    """From the first bytes of a 64-bit little-endian ELF file, the byte ranges `inspect_elf`
    normally reads: the first MiB, the dynamic and interpreter segments, executable segments and
    the section header table with what precedes it. None when the head does not tell."""
    if len(head) < 64 or head[4] != 2 or head[5] != 1:
        return None
    phoff, shoff = struct.unpack_from("<QQ", head, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
    if phentsize < 56 or phoff + phnum * phentsize > len(head):
        return None
    ranges = [(0, min(size, HEAD_BYTES))]
    for i in range(phnum):
        p_type, p_flags, p_offset = struct.unpack_from("<IIQ", head, phoff + i * phentsize)
        p_filesz = struct.unpack_from("<Q", head, phoff + i * phentsize + 32)[0]
        if p_type in (2, 3) or (p_type == 1 and p_flags & PF_X):  # PT_DYNAMIC, PT_INTERP, code
            ranges.append((p_offset, p_offset + p_filesz))
    if shoff:
        ranges.append((max(0, shoff - TAIL_BYTES), size))
    return ranges
