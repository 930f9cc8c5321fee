"""A CPython interpreter as wheels and build images name it: one frozen record per version and
build (`3.14`, `3.14t`), with its tags, paths and the stable ABIs it loads. The table of the ones the
toolkit knows, with their status, is `release/config/pythons.json` (`release.config.pythons`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Status = Literal["supported", "newer", "prerelease"]
_KEY = re.compile(r"3\.([0-9]{1,3})(t?)", re.ASCII)
_TAG = re.compile(r"cp3([0-9]{1,3})(t?)", re.ASCII)
STABLE_ABI_FROM = {"abi3": (3, 2), "abi3t": (3, 15)}
"""The first CPython whose GIL build loads abi3 wheels (PEP 384), and whose free-threaded build
loads abi3t wheels (PEP 803)."""


@dataclass(frozen=True, order=True)
class Python:
    """One CPython interpreter: a version and whether it is the free-threaded build.

    Its tags, paths and names come from methods here; no other module parses `"3.14t"`."""

    minor: int
    free_threaded: bool = False
    status: Status = "supported"

    @property
    def key(self) -> str:
        """`3.14` or `3.14t`: how matrix.yaml, pythons.json and `--python` name it."""
        return f"3.{self.minor}{'t' if self.free_threaded else ''}"

    @property
    def version(self) -> str:
        """`3.14`, also for the free-threaded build."""
        return f"3.{self.minor}"

    @property
    def version_tuple(self) -> tuple[int, int]:
        return (3, self.minor)

    @property
    def identifier_tag(self) -> str:
        """`cp314`, `cp314t`: how cibuildwheel's identifiers and the plan's steps name it."""
        return f"cp3{self.minor}{'t' if self.free_threaded else ''}"

    @property
    def interpreter_tag(self) -> str:
        """The interpreter tag of its wheels: `cp314` for both builds (PEP 425; the ABI tells them apart)."""
        return f"cp3{self.minor}"

    @property
    def abi_tag(self) -> str:
        """The ABI tag of its version-specific wheels: `cp314`, `cp314t`."""
        return self.identifier_tag

    def wheel_tag(self, platform: str) -> str:
        """`cp314-cp314t-manylinux_2_28_x86_64`: the tag of its version-specific wheel on `platform`."""
        return f"{self.interpreter_tag}-{self.abi_tag}-{platform}"

    @property
    def executable(self) -> str:
        """The interpreter's file name: `python3.14`, `python3.14t`."""
        return f"python{self.key}"

    @property
    def stable_abis(self) -> tuple[str, ...]:
        """The stable ABIs it loads: abi3 from 3.2 (GIL builds), abi3t from 3.15 (free-threaded)."""
        name = "abi3t" if self.free_threaded else "abi3"
        return (name,) if self.version_tuple >= STABLE_ABI_FROM[name] else ()

    def manylinux_path(self) -> str:
        """Its home in a manylinux image: `/opt/python/cp314-cp314`, `/opt/python/cp314-cp314t`."""
        return f"/opt/python/{self.interpreter_tag}-{self.abi_tag}"

    def manylinux_interpreter(self) -> str:
        return f"{self.manylinux_path()}/bin/python"

    def cibuildwheel_identifier(self, platform: str) -> str:
        """cibuildwheel's build identifier on `platform` (`manylinux_x86_64`): exact, so a cp314
        selector never matches cp314t and the reverse."""
        return f"{self.identifier_tag}-{platform}"


_NUMBERS = {str(n): n for n in range(1000)}


def tag_number(text: str) -> int | None:
    """A number of a tag (`14` of cp314, `28` of manylinux_2_28): ASCII digits 0-999 without a
    leading zero, read from a closed table (no `int()` of text: it takes other scripts' digits)."""
    return _NUMBERS.get(text)


def parse_key(text: str) -> Python | None:
    """`3.14` or `3.14t` as a record (status unknown: supported), or None when it is neither."""
    match = _KEY.fullmatch(text)
    minor = tag_number(match.group(1)) if match else None
    return None if match is None or minor is None else Python(minor, match.group(2) == "t")


def parse_tag(tag: str) -> Python | None:
    """`cp314`, `cp314t` (an interpreter or ABI tag) as a record, or None (`py3`, non-ASCII digits)."""
    match = _TAG.fullmatch(tag)
    minor = tag_number(match.group(1)) if match else None
    return None if match is None or minor is None else Python(minor, match.group(2) == "t")


def sort_key(key: str) -> tuple[int, bool]:
    """Oldest first, each version's GIL build before its free-threaded one; unknown text last."""
    parsed = parse_key(key)
    return (parsed.minor, parsed.free_threaded) if parsed is not None else (10**6, False)
