"""A second build of one variant waits for the first, says who holds the lock, and gives up at
its deadline (release.machine.lock)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from release.errors import BuildError
from release.machine.lock import LOCK_NAME, build_lock


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


def test_a_second_publish_of_the_project_says_who_publishes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`release publish` holds build/.publish.lock from preflight to the last upload: a second
    publish of the same project waits naming the holder, then stops with a publish error (exit 8)."""
    import argparse

    from release.commands import publish as command
    from release.config.matrix import load
    from release.errors import PublishError

    loaded = load(Path(__file__).resolve().parents[2] / "matrix.yaml")
    monkeypatch.setattr(command, "PUBLISH_LOCK_WAIT_S", 0.5)
    published: list[object] = []
    monkeypatch.setattr(command, "_publish", lambda *a, **k: published.append(k) or 0)
    args = argparse.Namespace(
        tag="v0.1.0", backoff=0.0, upload_timeout=5.0, index_timeout=5.0, tries=1, variant=None,
        repository="http://127.0.0.1:9/legacy/", index_url="http://127.0.0.1:9/simple/", wheelhouse=None,
        dry_run=True,
    )  # fmt: skip
    credentials = command.Credentials.from_env({}, username=None)
    assert command._run(args, loaded, credentials) == 0 and len(published) == 1  # free: it publishes
    held = build_lock(loaded.root / "build", what="the first publish", name=command.PUBLISH_LOCK, say=print)
    with held, pytest.raises(PublishError) as info:
        command._run(args, loaded, credentials)
    assert f"publishing {loaded.root / 'wheelhouse'} is locked by pid {os.getpid()}" in str(info.value)
    assert len(published) == 1
    assert "waiting" in capsys.readouterr().out
