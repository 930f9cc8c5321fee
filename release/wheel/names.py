"""Names of wheels and platforms, parsed in one place: the wheel file name, platform tags (the
matrix floor and a wheel's tags alike) and the verify report beside a wheel."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.tags import cpython_tags
from packaging.utils import InvalidWheelFilename, NormalizedName, canonicalize_name, parse_wheel_filename

from release.wheel.cpython import Python, parse_key, parse_tag, tag_number

REPORT_SUFFIX = ".verify.json"


def _record(key: str) -> Python:
    parsed = parse_key(key)
    if parsed is None:
        msg = f"{key!r} is not a CPython version like '3.14' or '3.14t'"
        raise ValueError(msg)
    return parsed


def python_tag(version: str) -> str:
    """'3.12' -> 'cp312', '3.14t' -> 'cp314t': the tag that names a Python's steps and cibuildwheel's
    identifiers (the record's; a free-threaded wheel's file name says `cp314-cp314t`)."""
    return _record(version).identifier_tag


def tag_python(tag: str) -> tuple[int, int] | None:
    """'cp312' -> (3, 12) ('cp314t' too: (3, 14)); None for a tag that is not one CPython version
    (`py3`, `pp310`, `abi3`, digits that are not ASCII)."""
    parsed = parse_tag(tag)
    return parsed.version_tuple if parsed is not None else None


def _threaded_abi(abi: str) -> bool:
    parsed = parse_tag(abi)
    return abi == "abi3t" or (parsed is not None and parsed.free_threaded)


def split_tag(tag: str) -> tuple[str, str, str]:
    """'cp312-cp312-manylinux_2_28_x86_64' -> (interpreter, abi, platform); tags are split here only."""
    interpreter, _, rest = tag.partition("-")
    abi, _, platform = rest.partition("-")
    return interpreter, abi, platform


def interpreters_of(tags: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({split_tag(t)[0] for t in tags}))


def platforms_of(tags: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({split_tag(t)[2] for t in tags}))


def platform_field(name: str | Path) -> str:
    """The platform field of a wheel file name as written (`manylinux_2_27_x86_64.manylinux_2_28_x86_64`
    for a wheel auditwheel tagged for two policies)."""
    filename = name.name if isinstance(name, Path) else name
    return filename.removesuffix(".whl").rsplit("-", 1)[-1]


def manylinux_interpreter(version: str) -> str:
    """Where a manylinux image (and the local images made like one) keeps CPython `version`."""
    return _record(version).manylinux_interpreter()


_MANYLINUX = re.compile(r"(manylinux|musllinux)_([0-9]{1,4})_([0-9]{1,4})_([A-Za-z0-9_]+)", re.ASCII)
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
FLOOR = re.compile(r"(manylinux|musllinux)_([0-9]{1,4})_([0-9]{1,4})_(x86_64|aarch64)\Z", re.ASCII)
"""What the matrix accepts as `platform.floor`."""


class InvalidWheelName(ValueError):
    """A file name that is not a wheel's (PEP 427)."""


@dataclass(frozen=True)
class WheelName:
    """The fields of a wheel file name: `engine-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl`."""

    filename: str
    distribution: NormalizedName
    version: str
    tags: tuple[str, ...]
    """Every `interpreter-abi-platform` triple, sorted."""

    @property
    def interpreters(self) -> tuple[str, ...]:
        return interpreters_of(self.tags)

    @property
    def abis(self) -> tuple[str, ...]:
        return tuple(sorted({split_tag(t)[1] for t in self.tags}))

    @property
    def platforms(self) -> tuple[str, ...]:
        return platforms_of(self.tags)

    def python_version(self) -> str | None:
        """The key of the oldest CPython it names: '3.12' for a `cp312` wheel, '3.14t' for a
        `cp314-cp314t` one (its ABI says free-threaded), None for `py3` and others."""
        versions = sorted(v for v in map(parse_tag, self.interpreters) if v is not None)
        if not versions:
            return None
        oldest = versions[0]
        threaded = bool(self.abis) and all(_threaded_abi(a) for a in self.abis)
        return f"{oldest.version}{'t' if threaded else ''}"

    def matches(self, distribution: str) -> bool:
        return self.distribution == canonicalize_name(distribution)

    def serves(self, python_key: str) -> bool:
        """Whether the wheel installs into this CPython ('3.13', '3.14t'), as an installer decides
        (packaging's tags of that interpreter): its own tag; abi3 from its version on in a GIL
        build; abi3t in a free-threaded one; never a cp314t wheel in 3.14, nor cp314 in 3.14t."""
        record = _record(python_key)
        tags = cpython_tags(record.version_tuple, abis=[record.abi_tag], platforms=self.platforms)
        accepted = {str(t) for t in tags}
        return any(tag in accepted for tag in self.tags)


def parse_wheel_name(name: str | Path) -> WheelName:
    """Parse a wheel file name (a path's last part); `InvalidWheelName` when it is not one."""
    filename = name.name if isinstance(name, Path) else name
    try:
        dist, version, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise InvalidWheelName(str(exc)) from None
    return WheelName(filename, dist, str(version), tuple(sorted(str(t) for t in tags)))


def version_field(name: str | Path) -> str:
    """The version exactly as a wheel file name spells it (its `.dist-info` directory spells it the
    same way), where `parse_wheel_name` gives the normalized one."""
    filename = name.name if isinstance(name, Path) else name
    parse_wheel_name(filename)
    return filename.split("-")[1]


def variants_index_fields(name: str | Path) -> tuple[str, str]:
    """(distribution, version) of a PEP 825 `{name}-{version}-variants.json` file name."""
    filename = name.name if isinstance(name, Path) else name
    stem = filename.removesuffix("-variants.json")
    distribution, _, version = stem.rpartition("-")
    if stem == filename or not distribution or not version:
        msg = f"{filename}: not a `<name>-<version>-variants.json` file name"
        raise InvalidWheelName(msg)
    return distribution, version


VARIANT_LABEL = re.compile(r"^[0-9a-z._]{1,16}$")
"""A PEP 825 variant label: up to 16 characters of lower-case letters, digits, `_` and `.`."""
NULL_LABEL = "null"
"""The label of the null variant (no properties: what an installer takes when no other fits)."""


@dataclass(frozen=True)
class VariantWheelName:
    """A PEP 825 variant wheel's file name: the plain wheel name plus its variant label."""

    wheel: WheelName
    """The fields without the label (`filename` is the name without `-<label>`)."""
    label: str
    filename: str


def split_variant_label(name: str | Path) -> tuple[str, str | None]:
    """(`x-1.0-cp312-cp312-linux_x86_64.whl`, 'cu130') for `x-1.0-cp312-cp312-linux_x86_64-cu130.whl`;
    a name without a label comes back whole with None. Six parts are a variant label when the
    third is a Python tag (a build tag starts with a digit, a Python tag never does)."""
    filename = name.name if isinstance(name, Path) else name
    if not filename.endswith(".whl"):
        return filename, None
    parts = filename[: -len(".whl")].split("-")
    has_label = len(parts) == 7 or (len(parts) == 6 and parts[2][:1] and not parts[2][0].isdigit())
    if not has_label:
        return filename, None
    return "-".join(parts[:-1]) + ".whl", parts[-1]


def parse_variant_wheel_name(name: str | Path) -> VariantWheelName:
    """Parse a variant wheel's file name; `InvalidWheelName` without a valid label."""
    filename = name.name if isinstance(name, Path) else name
    base, label = split_variant_label(filename)
    if label is None:
        msg = f"{filename}: no variant label (a PEP 825 variant wheel ends in -<label>.whl)"
        raise InvalidWheelName(msg)
    if not VARIANT_LABEL.match(label):
        msg = f"{filename}: variant label {label!r} is not 1 to 16 of a-z, 0-9, '_' and '.' (PEP 825)"
        raise InvalidWheelName(msg)
    return VariantWheelName(parse_wheel_name(base), label, filename)


def variant_wheel_filename(wheel: WheelName, distribution: str, label: str) -> str:
    """The file name of `wheel`'s files as a variant of `distribution`: the name normalized as a
    wheel file name spells it (`my_engine`), the version and tags kept, `-<label>` added."""
    _name, version, tail = wheel.filename[: -len(".whl")].split("-", 2)
    return f"{filename_stem(distribution)}-{version}-{tail}-{label}.whl"


def filename_stem(distribution: str) -> str:
    """How a wheel's file and directory names spell a distribution: `my-engine` -> `my_engine`."""
    return re.sub(r"[-_.]+", "_", distribution).lower()


def report_path(wheel: Path) -> Path:
    """Where a wheel's verify report lives: `<wheel file name>.verify.json` beside it."""
    return wheel.with_name(wheel.name + REPORT_SUFFIX)


def is_report(path: Path) -> bool:
    return path.name.endswith(REPORT_SUFFIX)


def report_wheel(path: Path) -> Path:
    """The wheel a report belongs to."""
    return path.with_name(path.name[: -len(REPORT_SUFFIX)])


@dataclass(frozen=True)
class PlatformTag:
    """One platform tag: `manylinux_2_28_x86_64` -> manylinux, (2, 28), x86_64."""

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

    @property
    def image_name(self) -> str:
        """`manylinux_2_28` for `manylinux_2_28_x86_64` (cibuildwheel's image names)."""
        if self.libc is None:
            return self.family
        return f"{self.family}_{self.libc[0]}_{self.libc[1]}"

    @property
    def family_arch(self) -> str:
        """`manylinux_x86_64`: the family without the glibc version (build identifiers)."""
        return f"{self.family}_{self.arch}"


def parse_platform_tag(tag: str) -> PlatformTag:
    match = _MANYLINUX.fullmatch(tag)
    if match:
        family, major, minor, arch = match.groups()
        libc = (tag_number(major), tag_number(minor))
        if libc[0] is not None and libc[1] is not None:
            return PlatformTag(tag, family, (libc[0], libc[1]), arch)
    for legacy, libc in _LEGACY.items():
        if tag.startswith(legacy + "_"):
            return PlatformTag(tag, "manylinux", libc, tag[len(legacy) + 1 :])
    if tag.startswith("linux_"):
        return PlatformTag(tag, "linux", None, tag[len("linux_") :])
    if tag == "any":
        return PlatformTag(tag, "any", None, "")
    return PlatformTag(tag, "other", None, tag.rsplit("_", 1)[-1])


def foreign_files(distribution: str, files: Iterable[str]) -> list[str]:
    """The files under `distribution`'s name that are not this engine's: anything but its CPython
    platform wheels (`<name>-<version>-cp3…-<platform>.whl`). One such file means another project
    holds the name (check-resolution judges an installed wheel by the same rule)."""
    stem = canonicalize_name(distribution).replace("-", "_")
    return [f for f in files if not (f.startswith(f"{stem}-") and f.endswith(".whl") and "-cp3" in f)]
