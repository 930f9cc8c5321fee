"""ELF inspection for `release verify`: what one shared object or executable needs and carries.

Files are parsed from bytes already in memory (read straight from the wheel's zip). Only the
section headers, the dynamic section, the GNU version-needed section, `.text` (for a content
hash) and the device code sections a backend names are read: no symbol table is walked.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

ELF_MAGIC = b"\x7fELF"

# GPU architecture names as they appear inside code objects and fat binaries:
# AMD (gfx942, gfx90a), NVIDIA (sm_90, sm_90a), Moore Threads (mp_21).
_ARCH = re.compile(rb"(?<![A-Za-z0-9_])(gfx\d{3,4}[a-z]?|sm_\d{2,3}[a-z]?|mp_\d{2})(?![0-9])")
_IDENTITY = (".text", ".gnu.hash", ".hash")
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


def inspect_elf(path: str, data: bytes, *, device_sections: Collection[str] = ()) -> ElfInfo:
    """Read one ELF file held in memory; raise `ElfReadError` when it is malformed."""
    try:
        return _inspect(path, data, device_sections)
    except (ELFError, ValueError, KeyError, IndexError, UnicodeDecodeError) as exc:
        msg = f"{path}: not a readable ELF file ({exc})"
        raise ElfReadError(msg) from None
    except Exception as exc:  # construct raises its own hierarchy on truncated files
        if type(exc).__module__.startswith("elftools"):
            msg = f"{path}: not a readable ELF file ({exc})"
            raise ElfReadError(msg) from None
        raise


def _tag_string(tag: object, attribute: str) -> str:
    """The string value pyelftools attaches to a dynamic tag (`needed`, `soname`, `rpath`…)."""
    return str(getattr(tag, attribute, ""))


def _inspect(path: str, data: bytes, device_sections: Collection[str]) -> ElfInfo:
    elf = ELFFile(io.BytesIO(data))
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
    for section in elf.iter_sections():
        name = section.name
        if isinstance(section, DynamicSection):
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
        elif isinstance(section, GNUVerNeedSection):
            for verneed, auxiliaries in section.iter_versions():
                requirements.extend((str(verneed.name), str(aux.name)) for aux in auxiliaries)
        elif name.startswith((".debug_", ".zdebug_")):
            debug.append(name)
        elif name in device_sections and section["sh_type"] != "SHT_NOBITS" and section["sh_size"] > 0:
            device.append(name)
            architectures.update(find_architectures(section.data()))
        elif name in _IDENTITY and section["sh_type"] != "SHT_NOBITS" and section["sh_size"] > 0:
            code.update(name.encode() + b"\0" + section.data())
            has_code = has_code or name == ".text"
    return ElfInfo(
        path=path,
        size=len(data),
        executable=executable,
        needed=tuple(needed),
        soname=soname,
        rpath=tuple(rpath),
        runpath=tuple(runpath),
        version_requirements=tuple(requirements),
        debug_sections=tuple(debug),
        device_sections=tuple(device),
        architectures=tuple(sorted(architectures)),
        code_sha256=code.hexdigest() if has_code else hashlib.sha256(data).hexdigest(),
    )


# --- platform tags and the manylinux policy ---------------------------------------------------

_MANYLINUX = re.compile(r"^(manylinux|musllinux)_(\d+)_(\d+)_(\w+)$")
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


@dataclass(frozen=True)
class PlatformTag:
    """One platform tag of a wheel: `manylinux_2_28_x86_64` -> manylinux, (2, 28), x86_64."""

    text: str
    family: str
    """manylinux, musllinux, linux, any, or other (macosx, win…)."""
    libc: tuple[int, int] | None
    arch: str

    @property
    def policy_name(self) -> str | None:
        if self.family != "manylinux" or self.libc is None:
            return None
        return f"manylinux_{self.libc[0]}_{self.libc[1]}"


def parse_platform_tag(tag: str) -> PlatformTag:
    match = _MANYLINUX.match(tag)
    if match:
        family, major, minor, arch = match.groups()
        return PlatformTag(tag, family, (int(major), int(minor)), arch)
    for legacy, libc in _LEGACY.items():
        if tag.startswith(legacy + "_"):
            return PlatformTag(tag, "manylinux", libc, tag[len(legacy) + 1 :])
    if tag.startswith("linux_"):
        return PlatformTag(tag, "linux", None, tag[len("linux_") :])
    if tag == "any":
        return PlatformTag(tag, "any", None, "")
    return PlatformTag(tag, "other", None, tag.rsplit("_", 1)[-1])


@dataclass(frozen=True)
class Policy:
    """One manylinux policy of auditwheel: the system libraries and symbol versions it allows."""

    name: str
    libc: tuple[int, int]
    libraries: frozenset[str]
    symbol_versions: dict[str, dict[str, tuple[int, ...]]]
    """arch -> version prefix (GLIBC, GLIBCXX, CXXABI, GCC…) -> newest version allowed."""

    def max_allowed(self, arch: str, prefix: str) -> tuple[int, ...] | None:
        return self.symbol_versions.get(arch, {}).get(prefix)


def policies_from_json(document: object) -> tuple[Policy, ...]:
    """Policies from the data of auditwheel's `manylinux-policy.json`, oldest first."""
    result: list[Policy] = []
    if not isinstance(document, list):
        return ()
    for entry in document:
        name = entry.get("name", "") if isinstance(entry, dict) else ""
        match = re.match(r"^manylinux_(\d+)_(\d+)$", name)
        if not match:
            continue
        versions: dict[str, dict[str, tuple[int, ...]]] = {}
        for arch, prefixes in (entry.get("symbol_versions") or {}).items():
            versions[arch] = {
                prefix: max((parse_version(v) for v in allowed), default=())
                for prefix, allowed in prefixes.items()
            }
        result.append(
            Policy(
                name=name,
                libc=(int(match.group(1)), int(match.group(2))),
                libraries=frozenset(entry.get("lib_whitelist") or ()),
                symbol_versions=versions,
            )
        )
    return tuple(sorted(result, key=lambda p: p.libc))


def policy_for(policies: Iterable[Policy], libc: tuple[int, int]) -> Policy | None:
    """The newest policy a glibc version satisfies (`manylinux_2_42` -> the newest one known)."""
    best: Policy | None = None
    for policy in policies:
        if policy.libc <= libc and (best is None or policy.libc > best.libc):
            best = policy
    return best
