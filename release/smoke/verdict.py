"""How smoke runs the matrix's commands and judges what they print.

A command's verdict is a JSON object with an `ok` key that ends its standard output: its last line
(earlier lines may be the library's logs), or the whole output when it is one JSON document (a
pretty-printed object). A plain command passes on exit 0 unless it prints such a verdict with
`ok` other than true; a self-test (`engine.smoke.self_tests`) must print one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from release.plan.resolve import ResolvedVariant
from release.wheel.files import load_json

MAX_LINES = 400
"""How many of the last lines are tried as the start of a multi-line JSON object."""


@dataclass(frozen=True)
class SmokeCommand:
    argv: tuple[str, ...]
    self_test: bool


def smoke_commands(
    commands: tuple[tuple[str, ...], ...], self_tests: tuple[tuple[str, ...], ...]
) -> list[SmokeCommand]:
    """The variant's commands in the order they run: the plain ones, then the self-tests."""
    return [SmokeCommand(c, False) for c in commands] + [SmokeCommand(c, True) for c in self_tests]


def command_argv(command: tuple[str, ...], *, python: str, bindir: Path, import_name: str) -> list[str]:
    """The command as it runs: `{python}` (a whole argument) is the venv's interpreter,
    `{import_name}` (anywhere) the variant's import package, a program the venv installed by path."""
    argv = [python if part == "{python}" else part.replace("{import_name}", import_name) for part in command]
    if argv[0] != python and (bindir / argv[0]).exists():
        argv[0] = str(bindir / argv[0])
    return argv


def not_run(variant: ResolvedVariant, drivers: Sequence[str]) -> list[str]:
    """A line per command and self-test that did not run because the import refused: the GPU
    `drivers` it needs are absent here."""
    why = f"GPU driver {', '.join(drivers)} absent here"
    kinds = {True: "self-test", False: "command"}
    return [
        f"{kinds[c.self_test]} {shown(c.argv, variant.import_name)}: not run: {why}, the import refuses"
        for c in smoke_commands(variant.smoke_commands, variant.smoke_self_tests)
    ]


def shown(command: tuple[str, ...], import_name: str) -> str:
    """The command as the report names it."""
    return " ".join(command).replace("{python}", "python").replace("{import_name}", import_name)


def last_object(stdout: str) -> dict[str, object] | None:
    """The JSON object that ends stdout (the whole of it, or its last lines from one that starts an
    object), nested at most `files.MAX_DEPTH` deep; None when the output ends with no such object.
    Lines before it (a library's banner, its logs) are skipped."""
    text = stdout.strip()
    if not text:
        return None
    candidates = [text]
    lines = text.splitlines()
    start = max(len(lines) - MAX_LINES, 0)
    candidates += [
        "\n".join(lines[i:])
        for i in range(len(lines) - 1, start - 1, -1)
        if lines[i].lstrip().startswith("{")
    ]
    for candidate in candidates:
        try:
            data = load_json(candidate.encode("utf-8", "surrogateescape"))
        except ValueError:
            continue
        return data if isinstance(data, dict) else None
    return None


def last_line_json(stdout: str, empty: bytes) -> object:
    """The JSON of stdout's last line (lines before it, a library's banner, are skipped), depth
    capped; `empty` when there is none; None when it is not JSON."""
    lines = stdout.strip().splitlines()
    try:
        return load_json(lines[-1].encode("utf-8", "surrogateescape") if lines else empty)
    except ValueError:
        return None


def device_not_run(stdout: str, command: str) -> list[str]:
    """A line when a self-test asked for its device checks (`--device`: `device_requested`) and
    skipped them (`device` not true: no GPU visible), read from the verdict that ends its output;
    none when they ran or were not asked for (the engine's selftest protocol)."""
    data = last_object(stdout) or {}
    if data.get("device_requested") is True and data.get("device") is not True:
        why = " ".join(str(data.get("device_reason") or "no reason given").split())[:200]
        return [f"device checks of {command}: skipped ({why})"]
    return []


def json_ok(stdout: str) -> bool | None:
    """The `ok` value of the JSON object that ends stdout (`last_object`); None when the output
    ends with no object that has one."""
    data = last_object(stdout)
    if data is None or "ok" not in data:
        return None
    return data["ok"] is True


def judge(returncode: int, stdout: str, *, self_test: bool) -> tuple[bool, str]:
    """(passed, the step's detail) for a command that ended with `returncode` and printed `stdout`."""
    if returncode != 0:
        return False, f"exit {returncode}"
    verdict = json_ok(stdout)
    if verdict is None:
        if self_test:
            return False, 'printed no verdict: a self-test must end its output with a JSON object with "ok"'
        return True, ""
    return verdict, "ok: true" if verdict else "reported ok: false"
