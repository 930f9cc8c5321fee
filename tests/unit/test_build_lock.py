"""A second build of one variant waits for the first, says who holds the lock, and gives up at
its deadline (release.build.lock)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from release.build.lock import LOCK_NAME, build_lock
from release.errors import BuildError


def test_the_holder_is_named_and_the_wait_ends_at_the_deadline(tmp_path: Path) -> None:
    lines: list[str] = []
    with build_lock(tmp_path, what="the cpu build", say=lines.append):
        assert (tmp_path / LOCK_NAME).read_text(encoding="utf-8").strip() == str(os.getpid())
        # flock locks belong to the open file description: a second open in this process conflicts.
        second = build_lock(tmp_path, what="the cpu build", wait_s=0.5, say=lines.append)
        with pytest.raises(BuildError) as info, second:
            pass
    assert f"the cpu build is locked by pid {os.getpid()}" in str(info.value)
    assert "gave up after" in str(info.value)
    assert "\n" not in str(info.value)
    assert lines and f"locked by pid {os.getpid()}" in lines[0] and "waiting" in lines[0]


def test_the_lock_is_free_again_after_the_block(tmp_path: Path) -> None:
    with build_lock(tmp_path, what="x", say=print):
        pass
    fd = os.open(tmp_path / LOCK_NAME, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
