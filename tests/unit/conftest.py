"""Unit tests never start a process: anything that tries fails loudly."""

from __future__ import annotations

import os
import subprocess

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
