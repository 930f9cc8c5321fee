"""Unit tests never start a process: anything that tries fails loudly."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


class ProcessForbidden(AssertionError):
    pass


def _forbidden(*args: object, **kwargs: object) -> None:
    msg = "unit tests must not start processes; move this test to tests/integration"
    raise ProcessForbidden(msg)


@pytest.fixture(autouse=True)
def _no_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess.Popen, "__init__", _forbidden)
    for name in ("system", "execv", "execve", "execvp", "execvpe", "spawnv", "spawnve", "posix_spawn",
                 "posix_spawnp", "fork", "popen"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, _forbidden)


@pytest.fixture(autouse=True)
def _no_engine_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in for the engine probe (`podman info` is a process): no podman or docker answers in
    a unit test unless the test puts its own stand-in in. `release plan` probes this host, and
    would otherwise ask."""
    from release.machine.containers import ContainerEngine

    monkeypatch.setattr(ContainerEngine, "answering", staticmethod(lambda: None))


@pytest.fixture
def fake_interpreters(monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Self-contained interpreters as `make-image.sh` would be given them, whatever this machine
    has (a unit test must not depend on pyenv being here): 3.9 to 3.13 under /opt/test-pythons."""
    from release.machine import images

    homes = {f"3.{minor}": Path(f"/opt/test-pythons/3.{minor}.0") for minor in range(9, 14)}
    monkeypatch.setattr(images, "self_contained_home", homes.get)
    return homes
