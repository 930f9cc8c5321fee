"""Debian's archive and the root file systems made from it: the one mirror setting and the one
debootstrap path.

`debian_mirror` is the toolkit's only reading of the mirror (scripts/_common.sh `debian_mirror`
reads it the same way for the scripts): `DEBIAN_MIRROR`, else the first Debian archive this
system's apt sources name, else `DEFAULT_MIRROR`. `make_rootfs` is the only way the toolkit makes a
plain `debootstrap --variant=minbase` tree: scripts/make-image.sh `rootfs`, which runs the same
debootstrap step as its `base` leaf (the images'), with the same day-long tarball cache and the same
lock per package set, so no module of `release/` runs debootstrap itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from release import process, settings
from release.config.resources import toolkit_scripts
from release.errors import ToolchainError
from release.table import printable
from release.wheel.files import read_text

DEFAULT_MIRROR = "http://deb.debian.org/debian"
APT_SOURCES = Path("/etc/apt")
SOURCES_LIMIT = 1 << 20
"""The most bytes of one apt sources file read."""
_SOURCE_LINE = re.compile(
    r"^\s*(?:deb\s+(?:\[[^\]]*\]\s+)?(?P<one>\S+)\s+\S+|URIs:\s*(?P<deb822>\S+))", re.ASCII
)


def apt_source_files(apt: Path = APT_SOURCES) -> list[Path]:
    """The files apt reads its sources from: sources.list, then sources.list.d's `*.list` and
    `*.sources` by name (apt ignores any other name there, `.disabled` ones among them)."""
    listed = sorted(apt.glob("sources.list.d/*"), key=lambda p: p.name)
    return [apt / "sources.list", *(p for p in listed if p.suffix in (".list", ".sources"))]


def debian_mirror(sources: Iterable[Path] | None = None) -> str:
    """The Debian mirror: `DEBIAN_MIRROR`, else the first Debian archive (a URI ending in /debian)
    `sources` name (default: this system's apt sources, one-line `.list` and deb822 `.sources`
    alike), else `DEFAULT_MIRROR`."""
    chosen = settings.text("DEBIAN_MIRROR")
    if chosen:
        return chosen.rstrip("/")
    for file in apt_source_files() if sources is None else sources:
        try:
            text = read_text(file, SOURCES_LIMIT)
        except (OSError, UnicodeDecodeError):
            continue  # absent, not a regular file, too large or not text: apt would not read it either
        for line in text.splitlines():
            found = _SOURCE_LINE.match(line)
            uri = found and (found["one"] or found["deb822"]).rstrip("/")
            if uri and uri.endswith("/debian"):
                return uri
    return DEFAULT_MIRROR


def make_rootfs(
    out: Path,
    suite: str,
    *,
    include: Sequence[str] = (),
    as_root: Sequence[str] = (),
    workdir: Path | None = None,
    log: Callable[[str], None] = print,
) -> None:
    """A plain `debootstrap --variant=minbase` tree of `suite` in `out` (absent or empty), through
    make-image.sh `rootfs` (`as_root`: the words that run it as root, `sudo -n` say; `workdir`:
    the leaf's scratch and tarball cache, default make-image.sh's own). One line names what failed."""
    mirror = debian_mirror()
    argv = [*as_root, "bash", str(toolkit_scripts() / "make-image.sh"), "rootfs", "--suite", suite]
    argv += ["--out", str(out), "--mirror", mirror]
    if include:
        argv += ["--include", ",".join(include)]
    if workdir is not None:
        argv += ["--workdir", str(workdir)]
    log(f"making {out} (debootstrap --variant=minbase {suite} from {mirror}, through make-image.sh rootfs)")
    try:
        proc = process.run(argv, timeout=process.INSTALL_S, merge=True)
    except process.TimedOut:
        msg = f"making {out} ran past {process.INSTALL_S:.0f} s and was stopped"
        raise ToolchainError(msg) from None
    if proc.returncode != 0:
        said = [line for line in proc.stdout.splitlines() if line.strip()]
        last = printable(said[-1]) if said else f"make-image.sh rootfs exited {proc.returncode}"
        msg = f"making {out} failed: {last}"
        raise ToolchainError(msg)
