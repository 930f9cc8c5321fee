"""`release verify`: inspect every ELF file of a wheel and apply the verification rules.

Works on any wheel. With a matrix the wheel is mapped to its variant (by distribution name, or
`--variant`) and every rule applies; without one, the rules that need the matrix say
`not-applicable`. ELF files are read from the zip into memory and never extracted.
The rules themselves live in `release.inspect.rules`; this module reads the wheel, builds their context,
and reports.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import itertools
import json
import mmap
import os
import struct
import tempfile
import zipfile
import zlib
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from release.config.resources import toolkit_backends
from release.errors import ToolchainError, UsageError, VerifyError
from release.inspect.elf import (
    ElfInfo,
    ElfReadError,
    MissingRange,
    Policy,
    SparseImage,
    inspect_elf,
    is_elf,
    policies_from_json,
    wanted_ranges,
)
from release.inspect.rules import (
    RULES,
    Member,
    RuleContext,
    RuleResult,
    WheelContents,
    matches,
)
from release.wheel.files import file_sha256
from release.wheel.names import InvalidWheelName, parse_wheel_name, report_path

if TYPE_CHECKING:
    from concurrent.futures import Future

    from release.plan.resolve import ResolvedVariant

SCHEMA_VERSION = 1
SCHEMA_FILE = Path(__file__).with_name("verify.schema.json")

_LABEL = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "not-applicable": "n/a"}
_NOT_ELF = (".py", ".pyi", ".pyc", ".txt", ".json", ".h", ".hpp", ".md", ".typed", ".toml", ".cmake")
_READ_AHEAD = 3
_STREAM_ABOVE = 8 << 20  # deflated ELF members larger than this are streamed, not held whole
_STREAM_INPUT = 64 << 10
_STREAM_OUTPUT = 1 << 20


@dataclass(frozen=True)
class VerifyReport:
    """Everything `release verify` found in one wheel."""

    wheel: Path
    size: int
    unpacked_size: int
    distribution: str
    version: str
    tags: tuple[str, ...]
    platform_tags: tuple[str, ...]
    variant: str | None
    matrix: str | None
    release_mode: bool
    runtime_bound: tuple[str, ...]
    elf_files: tuple[ElfInfo, ...]
    rules: tuple[RuleResult, ...]

    @functools.cached_property
    def sha256(self) -> str:
        """sha256 of the wheel file, computed when first asked (the JSON report and publish need
        it; the readable report does not)."""
        return _hash_file(self.wheel)

    @property
    def ok(self) -> bool:
        """No rule failed (warnings allowed)."""
        return not any(r.status == "fail" for r in self.rules)

    @property
    def releasable(self) -> bool:
        """No rule failed or warned: the wheel passes `--release` as well."""
        return not any(r.status in ("fail", "warn") for r in self.rules)

    def rule(self, rule_id: str) -> RuleResult:
        return next(r for r in self.rules if r.id == rule_id)

    def to_json(self) -> dict[str, object]:
        return {
            "schema_version": SCHEMA_VERSION,
            "wheel": self.wheel.name,
            "sha256": self.sha256,
            "size": self.size,
            "unpacked_size": self.unpacked_size,
            "matrix": self.matrix,
            "variant": self.variant,
            "distribution": self.distribution,
            "version": self.version,
            "tags": list(self.tags),
            "platform_tags": list(self.platform_tags),
            "release_mode": self.release_mode,
            "ok": self.ok,
            "releasable": self.releasable,
            "runtime_bound": list(self.runtime_bound),
            "elf_files": [_elf_json(e) for e in self.elf_files],
            "rules": [r.to_json() for r in self.rules],
        }


def _elf_json(info: ElfInfo) -> dict[str, object]:
    return {
        "path": info.path,
        "size": info.size,
        "executable": info.executable,
        "needed": list(info.needed),
        "soname": info.soname,
        "rpath": list(info.rpath),
        "runpath": list(info.runpath),
        "max_glibc": info.max_version("GLIBC"),
        "max_glibcxx": info.max_version("GLIBCXX"),
        "max_cxxabi": info.max_version("CXXABI"),
        "debug_sections": list(info.debug_sections),
        "device_code_sections": list(info.device_sections),
        "architectures": list(info.architectures),
    }


def write_report(report: VerifyReport, path: Path | None = None) -> Path:
    """Write the JSON report (default: beside the wheel) and return its path.

    The report is written to a new file in the same directory and renamed over the target, so a
    symlink at the target is replaced, never followed: nothing outside the report path is written.
    """
    target = path if path is not None else report_path(report.wheel)
    text = json.dumps(report.to_json(), indent=2) + "\n"
    fd, scratch = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        Path(scratch).replace(target)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise
    return target


# --- reading a wheel ---------------------------------------------------------------------------


def install_path(member: str) -> str:
    """`pkg-1.0.data/platlib/x/y.so` -> `x/y.so`; `pkg-1.0.data/scripts/tool` -> `<scripts>/tool`."""
    first, _, rest = member.partition("/")
    if first.endswith(".data") and rest:
        scheme, _, inner = rest.partition("/")
        if scheme in ("purelib", "platlib"):
            return inner
        return f"<{scheme}>/{inner}"
    return member


def metadata_fields(text: str, names: Sequence[str]) -> dict[str, str]:
    """The first value of each named header of a core metadata file (headers end at a blank line)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and key in names and key not in found:
            found[key] = value.strip()
    return found


def _parse_name(wheel: Path) -> tuple[str, str, tuple[str, ...]]:
    try:
        name = parse_wheel_name(wheel)
    except InvalidWheelName as exc:
        msg = f"{wheel}: not a wheel file name ({exc})"
        raise UsageError(msg) from None
    return str(name.distribution), name.version, name.tags


def _hash_file(path: Path) -> str:
    """sha256 of the whole wheel, through a memory map (no copy)."""
    try:
        return file_sha256(path)
    except OSError as exc:
        msg = f"{path}: cannot read the wheel to hash it ({exc.strerror})"
        raise VerifyError(msg) from None


# --- the manylinux policy and backend knowledge --------------------------------------------------


@functools.cache
def manylinux_policies() -> tuple[Policy, ...]:
    """auditwheel's manylinux policies, read from its package data (never hard-coded here)."""
    spec = importlib.util.find_spec("auditwheel")
    if spec is None or spec.origin is None:
        msg = "auditwheel is not installed: its manylinux policy is needed (pip install auditwheel)"
        raise ToolchainError(msg)
    policy_file = Path(spec.origin).parent / "policy" / "manylinux-policy.json"
    try:
        return policies_from_json(json.loads(policy_file.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        msg = f"cannot read auditwheel's manylinux policy {policy_file}: {exc}"
        raise ToolchainError(msg) from None


@dataclass(frozen=True)
class _RuntimeKnowledge:
    runtime_libraries: tuple[str, ...]
    device_code_sections: tuple[str, ...]


@functools.cache
def _known_backends() -> tuple[_RuntimeKnowledge, ...]:
    """Runtime globs and device sections from the toolkit's own backend data, used when there is
    no matrix (read as plain JSON: the matrix loader validates these files)."""
    directory = toolkit_backends()
    known = []
    for file in sorted((f for f in directory.iterdir() if f.name.endswith(".json")), key=lambda f: f.name):
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        known.append(
            _RuntimeKnowledge(
                tuple(data.get("runtime_libraries") or ()), tuple(data.get("device_code_sections") or ())
            )
        )
    return tuple(known)


# --- verifying one wheel -----------------------------------------------------------------------


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
    return info.file_size >= 64 and not name.endswith(_NOT_ELF) and ".dist-info/" not in name


def _read_wheel(path: Path, device_sections: Sequence[str]) -> WheelContents:
    distribution, version, tags = _parse_name(path)
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
        metadata: dict[str, str] = {}
        for info in infos:
            if info.filename.endswith(".dist-info/METADATA") and info.filename.count("/") == 1:
                raw = _member_bytes(view, path, info, elf_only=False) or b""
                metadata = metadata_fields(raw.decode("utf-8", errors="replace"), ("Name", "Version"))
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


def verify_wheel(
    wheel: Path,
    *,
    variant: ResolvedVariant | None = None,
    matrix: str | None = None,
    release: bool = False,
    expected_version: str | None = None,
    toolkit_override: str | None = None,
) -> VerifyReport:
    """Inspect one wheel and apply every rule against the resolved `variant` it is one of.

    Rules that need a variant say `not-applicable` without one (no matrix, or a wheel that is none
    of the matrix's distributions); `release` turns the floor warning into a failure;
    `expected_version` (a release tag like v1.2.0 or a version) is checked by wheel-name."""
    wheel = Path(wheel)
    if not wheel.is_file():
        msg = f"{wheel}: no such wheel file"
        raise UsageError(msg)
    _parse_name(wheel)
    if variant is not None:
        globs = variant.excludes
        sections: tuple[str, ...] = variant.device_code_sections
        matrix = matrix or str(variant.matrix_root)
    else:
        known = _known_backends()
        globs = tuple(dict.fromkeys(g for b in known for g in b.runtime_libraries))
        sections = tuple(dict.fromkeys(s for b in known for s in b.device_code_sections))
    try:
        contents = _read_wheel(wheel, sections)
        ctx = RuleContext(
            wheel=contents,
            matrix=matrix,
            variant=variant,
            runtime_globs=globs,
            release=release,
            expected_version=expected_version,
            policies=manylinux_policies(),
            toolkit_override=toolkit_override,
        )
        results = tuple(rule(ctx) for rule in RULES)
    except (zipfile.BadZipFile, OSError) as exc:
        msg = f"{wheel.name}: cannot read the wheel ({exc})"
        raise VerifyError(msg) from None
    runtime_bound = sorted({n for e in contents.elf_files for n in e.needed if matches(n, globs)})
    return VerifyReport(
        wheel=wheel,
        size=wheel.stat().st_size,
        unpacked_size=sum(m.size for m in contents.members),
        distribution=contents.distribution,
        version=contents.version,
        tags=contents.tags,
        platform_tags=tuple(sorted({t.split("-")[-1] for t in contents.tags})),
        variant=variant.name if variant is not None else None,
        matrix=matrix,
        release_mode=release,
        runtime_bound=tuple(runtime_bound),
        elf_files=tuple(contents.elf_files),
        rules=results,
    )
