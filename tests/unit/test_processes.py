"""Every process the toolkit starts goes through `release.process` (deadline, output cap, signals
forwarded to the child's group): read from the source, no process started."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

RELEASE = Path(__file__).resolve().parents[2] / "release"

LAUNCHERS = {
    "subprocess": {"run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput"},
    "os": {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp"},
    "pty": {"spawn", "fork"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
}
"""The calls that start a process, by module (and every `os.exec*` and `os.spawn*`)."""

ALLOWED = {
    "process.py": "the one module that starts processes: run, stream, start",
}
"""Modules of release/ (relative paths) that may start a process directly, with the reason."""


def _launches(name: str, attr: str) -> bool:
    if name == "os" and attr.startswith(("exec", "spawn")):
        return True
    return attr in LAUNCHERS.get(name, set())


def launches(source: str) -> Iterator[tuple[int, str]]:
    """(line, what) of each place `source` starts a process (or imports a way to)."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}  # local name -> launching module
    direct: dict[str, str] = {}  # local name -> "module.function"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in LAUNCHERS:
                    aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module in LAUNCHERS and node.level == 0:
            for alias in node.names:
                if _launches(node.module, alias.name):
                    direct[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                    yield node.lineno, f"from {node.module} import {alias.name}"
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            module = aliases.get(func.value.id)
            if module is not None and _launches(module, func.attr):
                yield node.lineno, f"{module}.{func.attr}(...)"
        elif isinstance(func, ast.Name) and func.id in direct:
            yield node.lineno, f"{direct[func.id]}(...)"


def _sources() -> Iterator[tuple[str, str]]:
    for path in sorted(RELEASE.rglob("*.py")):
        yield path.relative_to(RELEASE).as_posix(), path.read_text(encoding="utf-8")


def test_every_process_is_started_by_release_process() -> None:
    found = [
        f"release/{name}:{line}: {what}: use release.process (run, stream or start)"
        for name, source in _sources()
        if name not in ALLOWED
        for line, what in launches(source)
    ]
    assert not found, "\n".join(found)


def test_each_exception_still_starts_a_process() -> None:
    """An allow-list entry whose module no longer starts anything directly is stale: remove it."""
    sources = dict(_sources())
    for name, reason in ALLOWED.items():
        assert name in sources, f"release/{name} ({reason}) does not exist"
        assert list(launches(sources[name])), f"release/{name} starts no process directly: drop it"


@pytest.mark.parametrize(
    "source",
    [
        "import subprocess\nsubprocess.check_output(['ls'])",
        "import subprocess as sp\nsp.Popen(['ls'])",
        "from subprocess import run\nrun(['ls'])",
        "import os\nos.execvp('ls', ['ls'])",
        "import os\nos.spawnlp(os.P_WAIT, 'ls', 'ls')",
        "import os\nos.system('ls')",
        "import pty\npty.spawn(['ls'])",
        "import asyncio\nasyncio.create_subprocess_exec('ls')",
    ],
)
def test_each_way_of_starting_a_process_is_seen(source: str) -> None:
    assert list(launches(source))


@pytest.mark.parametrize(
    "source",
    [
        "import subprocess\nexcept_ = subprocess.TimeoutExpired\nsubprocess.CompletedProcess([], 0)",
        "from release import process\nprocess.run(['ls'], timeout=1)",
        "import os\nos.killpg(1, 15)\nos.environ.get('X')",
    ],
)
def test_what_starts_nothing_is_not_flagged(source: str) -> None:
    assert not list(launches(source))
