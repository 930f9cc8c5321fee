"""The minbase tree is made through the toolkit's one debootstrap path, make-image.sh `rootfs`, by one
process at a time: parallel test workers (pytest-xdist) and two smoke runs used to debootstrap into
one `.partial` directory together, and all but one failed. The leaf's day-long tarball cache (the
one the local images' `base` leaf uses, in a scratch workdir here) serves every later tree.

`debootstrap` here is a stand-in script (named so): it records each call with its arguments, takes a
while, and makes the one file the tree is recognised by. Everything around it is real: the
make-image.sh leaf, its flock, its tarball cache, tar. The real debootstrap runs in test_images.py."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import shutil
import stat
from pathlib import Path

import pytest

from release.errors import ToolchainError
from release.smoke import image

pytestmark = pytest.mark.integration

MIRROR = "http://mirror.invalid/debian"
STANDIN = """#!/bin/sh
# stand-in for debootstrap: --variant=minbase [--include=...] SUITE TARGET MIRROR
echo "$*" >> "{calls}"
sleep 1
[ -n "$FAIL" ] && {{ echo "E: stand-in failure" >&2; exit 1; }}
eval "target=\\${{$(($# - 1))}}"
mkdir -p "$target/usr/bin" && : > "$target/usr/bin/ldd"
"""


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if os.geteuid() != 0:
        pytest.skip("make-image.sh rootfs runs as root (the smoke tier asks sudo -n for it)")
    calls = tmp_path / "calls"
    tool = tmp_path / "bin" / "debootstrap"
    tool.parent.mkdir()
    tool.write_text(STANDIN.format(calls=calls))
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DEBIAN_MIRROR", MIRROR)
    return calls


def _build(target_and_work: tuple[str, str]) -> str:
    target, work = target_and_work
    return str(image.ensure_minbase(Path(target), log=lambda _line: None, workdir=Path(work)))


def _calls(calls: Path) -> list[str]:
    return calls.read_text().splitlines() if calls.exists() else []


def test_parallel_builders_run_debootstrap_once(standin: Path, tmp_path: Path) -> None:
    target, work = tmp_path / "cache" / "minbase-bookworm", tmp_path / "work"
    work.mkdir()
    with multiprocessing.get_context("fork").Pool(4) as pool:
        results = pool.map(_build, [(str(target), str(work))] * 4)
    assert results == [str(target)] * 4
    [call] = _calls(standin)
    assert call.split() == ["--variant=minbase", image.MINBASE_SUITE, call.split()[2], MIRROR], (
        "the one mirror"
    )
    assert call.split()[2].startswith(f"{target}.partial.")
    assert (target / "usr/bin/ldd").exists()
    assert stat.S_IMODE(target.stat().st_mode) == 0o755, "a non-root smoke user must be able to read it"
    assert sorted(p.name for p in target.parent.iterdir()) == [".minbase-bookworm.lock", "minbase-bookworm"]
    # The leaf's cache, keyed as the images' debootstrap results are (suite, mirror, packages).
    key = hashlib.sha256(f"{image.MINBASE_SUITE} {MIRROR} \n".encode()).hexdigest()[:16]
    assert (work / f"base-{image.MINBASE_SUITE}-{key}.tar").is_file()


def test_a_second_tree_comes_from_the_cache(standin: Path, tmp_path: Path) -> None:
    """Another checkout's tree (another RELEASE_MINBASE_DIR) is unpacked from the same tarball."""
    work = tmp_path / "work"
    work.mkdir()
    first, second = tmp_path / "one" / "minbase-bookworm", tmp_path / "two" / "minbase-bookworm"
    assert _build((str(first), str(work))) == str(first)
    assert _build((str(second), str(work))) == str(second)
    assert len(_calls(standin)) == 1, "the second tree ran debootstrap again"
    assert (second / "usr/bin/ldd").exists()
    assert stat.S_IMODE(second.stat().st_mode) == 0o755


def test_a_failed_build_leaves_no_partial_tree(
    standin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAIL", "1")
    target, work = tmp_path / "cache" / "minbase-bookworm", tmp_path / "work"
    work.mkdir()
    (target.parent / "minbase-bookworm.partial.old").mkdir(parents=True)  # an interrupted build's
    with pytest.raises(ToolchainError, match="debootstrap failed: E: stand-in failure") as failed:
        image.ensure_minbase(target, log=lambda _line: None, workdir=work)
    assert "\n" not in str(failed.value)
    assert [p.name for p in target.parent.iterdir()] == [".minbase-bookworm.lock"]
    assert not list(work.glob("base-*.tar")), "a failed debootstrap was cached"
    monkeypatch.delenv("FAIL")
    assert image.ensure_minbase(target, log=lambda _line: None, workdir=work) == target
    assert len(_calls(standin)) == 2


def test_no_debootstrap_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH of the tools the leaf needs, debootstrap not among them (nor /usr/sbin)."""
    if os.geteuid() != 0:
        pytest.skip("make-image.sh rootfs runs as root (the smoke tier asks sudo -n for it)")
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("bash", "basename", "dirname", "readlink", "date", "id", "mkdir", "ls", "sha256sum", "cut",
                 "flock", "find", "tar", "rm", "sed", "cat"):  # fmt: skip
        found = shutil.which(name)
        assert found, name
        (tools / name).symlink_to(found)
    monkeypatch.setenv("PATH", str(tools))
    target, work = tmp_path / "cache" / "minbase-bookworm", tmp_path / "work"
    work.mkdir()
    with pytest.raises(ToolchainError) as failed:
        image.ensure_minbase(target, log=lambda _line: None, workdir=work)
    assert str(failed.value).endswith(
        "debootstrap not found: apt-get install debootstrap (or run scripts/setup-podman.sh)"
    )
    assert "\n" not in str(failed.value)
    assert [p.name for p in target.parent.iterdir()] == [".minbase-bookworm.lock"]
