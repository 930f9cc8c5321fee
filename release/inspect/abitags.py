"""What a wheel's tags and its extension modules' file names say about the Pythons that load them.

The tags are parsed by `packaging` (`packaging.tags.parse_tag`: `cp314-cp314t`, `cp315-abi3.abi3t`);
the file names by the suffixes CPython's importer tries on Linux:

- `.cpython-314-x86_64-linux-gnu.so` (or `.cpython-314.so`): CPython 3.14 with the GIL only;
  `.cpython-314t-…` the free-threaded 3.14 only;
- `.abi3.so`: every GIL-enabled CPython (the stable ABI, PEP 384); free-threaded 3.15 does not
  import it (it left that build's `importlib.machinery.EXTENSION_SUFFIXES`);
- `.abi3-x86_64-linux-gnu.so`: the stable-ABI name 3.15 added; 3.12 to 3.14 do not import it;
- `.abi3t.so`: the stable ABI for free-threaded builds (PEP 803), which 3.15 and later import with
  or without the GIL.

A file of no such suffix (`_x.so`, `libfoo.so.1`) is not judged here: every CPython imports a bare
`.so`, and a library is no module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.tags import Tag, parse_tag

from release.config.names import ascii_int

FREE_THREADED_STABLE = (3, 15)
"""The first CPython with `abi3t` (PEP 803), and with the `.abi3-<triplet>.so` name."""

_TRIPLET = r"-[a-z0-9_]+-[a-z0-9_]+(?:-[a-z0-9_]+)?"
_SUFFIX = re.compile(
    r"\.(?:cpython-(?P<major>[0-9])(?P<minor>[0-9]{1,3})(?P<t>t?)d?(?:" + _TRIPLET + r")?"
    r"|(?P<stable>abi3t?)(?P<triplet>" + _TRIPLET + r")?)\.so$",
    re.ASCII,
)
_CPYTHON = re.compile(r"^cp([0-9])([0-9]{1,3})(t?)$", re.ASCII)


@dataclass(frozen=True)
class ModuleName:
    """What an extension module's file name says it is built for."""

    path: str
    stable: str | None
    """`abi3` or `abi3t` for a stable-ABI name; None for a version-specific one."""
    version: tuple[int, int] | None
    """(3, 14) of `.cpython-314…`; None for a stable-ABI name."""
    free_threaded: bool
    """`cpython-314t`, or `abi3t`."""
    triplet: bool
    """A stable-ABI name with the platform triplet (`.abi3-x86_64-linux-gnu.so`, 3.15's form)."""

    @property
    def spelled(self) -> str:
        if self.stable is not None:
            return f".{self.stable}{'-<triplet>' if self.triplet else ''}.so"
        assert self.version is not None  # noqa: S101 (a version-specific name has one)
        return f"cpython-{self.version[0]}{self.version[1]}{'t' if self.free_threaded else ''}"


def module_name(path: str) -> ModuleName | None:
    """The ABI an extension module's file name claims, or None for a name that claims none."""
    leaf = path.rpartition("/")[2]
    match = _SUFFIX.search(leaf)
    if match is None:
        return None
    stable = match.group("stable")
    if stable is not None:
        return ModuleName(path, stable, None, stable == "abi3t", match.group("triplet") is not None)
    major = ascii_int(match.group("major"), high=9)
    minor = ascii_int(match.group("minor"), high=999)
    if major is None or minor is None:
        return None
    return ModuleName(path, None, (major, minor), match.group("t") == "t", triplet=False)


@dataclass(frozen=True)
class AbiTag:
    """One (interpreter, ABI) pair of a wheel's tags, as packaging parsed it."""

    interpreter: str
    abi: str
    version: tuple[int, int] | None
    """(3, 14) of `cp314`; None for `py3` and other interpreters."""
    abi_version: tuple[int, int] | None
    """(3, 14) of the ABI `cp314`/`cp314t`; None for `abi3`, `abi3t`, `none`."""
    free_threaded: bool
    """The ABI is `cp314t` or `abi3t`."""

    @property
    def spelled(self) -> str:
        return f"{self.interpreter}-{self.abi}"


def _cpython(text: str) -> tuple[tuple[int, int], bool] | None:
    match = _CPYTHON.match(text)
    if match is None:
        return None
    major, minor = ascii_int(match.group(1), high=9), ascii_int(match.group(2), high=999)
    if major is None or minor is None:
        return None
    return (major, minor), match.group(3) == "t"


def abi_tags(tags: tuple[str, ...]) -> list[AbiTag]:
    """The distinct (interpreter, ABI) pairs of the wheel's tags (`cp315-abi3`, `cp315-abi3t`), in
    order; a tag packaging cannot parse is left out (wheel-integrity judges the name)."""
    found: dict[tuple[str, str], AbiTag] = {}
    for text in tags:
        try:
            parsed: frozenset[Tag] = parse_tag(text)
        except ValueError:
            continue
        for tag in sorted(parsed, key=str):
            key = (tag.interpreter, tag.abi)
            if key in found:
                continue
            interpreter = _cpython(tag.interpreter)
            abi = _cpython(tag.abi)
            found[key] = AbiTag(
                tag.interpreter,
                tag.abi,
                interpreter[0] if interpreter is not None and not interpreter[1] else None,
                abi[0] if abi is not None else None,
                (abi is not None and abi[1]) or tag.abi == "abi3t",
            )
    return list(found.values())


def loads(tag: AbiTag, module: ModuleName) -> str:
    """'' when the Pythons `tag` names import `module` by its file name; else why not (a phrase)."""
    if module.stable is None:
        assert module.version is not None  # noqa: S101 (a version-specific name has one)
        if module.free_threaded and tag.abi == "abi3":
            return (
                f"a free-threaded build ({module.spelled}) in a {tag.spelled} wheel: a t build never "
                "claims abi3, the GIL-enabled stable ABI"
            )
        if tag.abi == "none":
            return f"a {module.spelled} module in a {tag.spelled} wheel (tagged for every Python)"
        if tag.abi in ("abi3", "abi3t"):
            return (
                f"a {module.spelled} module in a {tag.spelled} wheel (a stable ABI claimed for a build "
                "of one Python)"
            )
        if (tag.abi_version, tag.free_threaded) != (module.version, module.free_threaded):
            return f"a {module.spelled} module in a {tag.spelled} wheel"
        return ""
    if module.stable == "abi3":
        if tag.free_threaded:
            return (
                f"an abi3 module ({module.spelled}) in a {tag.spelled} wheel: free-threaded Pythons do not "
                "import the GIL-enabled stable ABI"
            )
        lowest = tag.version or tag.abi_version
        if module.triplet and (lowest is None or lowest < FREE_THREADED_STABLE):
            return (
                f"a 3.15-style stable-ABI name ({module.spelled}) in a {tag.spelled} wheel: CPython "
                "3.14 and older do not import it (name it .abi3.so)"
            )
        if tag.abi not in ("abi3", "none") and tag.abi_version is None:
            return f"an abi3 module in a {tag.spelled} wheel"
        return ""
    # abi3t: 3.15 and later, with or without the GIL
    lowest = tag.version or tag.abi_version
    if lowest is None or lowest < FREE_THREADED_STABLE:
        return (
            f"an abi3t module ({module.spelled}) in a {tag.spelled} wheel: only CPython 3.15 and later "
            "import it"
        )
    return ""
