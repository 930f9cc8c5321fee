"""How smoke judges the matrix's commands (release.smoke.verdict): the JSON object that ends a
command's output is its verdict, whatever it logged before; a self-test must print one."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.smoke.outcome import Outcome, Step, command_outputs
from release.smoke.verdict import command_argv, json_ok, judge, shown, smoke_commands

LOGGED = 'INFO mylib: transport tcp up\n{"ok": false, "write": {"verified": false}}\n'
PRETTY = '{\n  "ok": true,\n  "write": {\n    "bytes": 4096\n  }\n}\n'


@pytest.mark.parametrize(
    ("stdout", "verdict"),
    [
        ('{"ok": true}', True),
        ('{"ok": false}', False),
        (LOGGED, False),  # a log line first: judged all the same (issue 43: it was not)
        ('INFO a\nINFO b\n{"ok": true}\n', True),
        (PRETTY, True),  # one pretty-printed document
        ("INFO up\n" + PRETTY.replace("true", "false"), False),  # logs, then a pretty-printed object
        ('{"ok": "yes"}', False),  # only true is true
        ('{"ok": true}\nINFO done\n', None),  # the output does not end with the verdict
        ('{"capacity": 4096}', None),
        ("mylib 0.1.0", None),
        ("", None),
        ("[1, 2]", None),
    ],
)
def test_the_verdict_is_the_json_object_that_ends_the_output(stdout: str, verdict: bool | None) -> None:
    assert json_ok(stdout) is verdict


def test_a_command_that_logs_then_reports_ok_false_fails() -> None:
    assert judge(0, LOGGED, self_test=False) == (False, "reported ok: false")
    assert judge(0, '{"ok": true}', self_test=False) == (True, "ok: true")
    assert judge(3, '{"ok": true}', self_test=False) == (False, "exit 3")


def test_a_self_test_that_prints_no_verdict_fails_and_a_plain_command_passes() -> None:
    ok, detail = judge(0, "mylib 0.1.0\n", self_test=True)
    assert not ok and detail.startswith("printed no verdict: a self-test must end its output with a JSON")
    assert judge(0, "mylib 0.1.0\n", self_test=False) == (True, "")


def test_commands_run_before_self_tests_and_name_the_variant_s_import_package(tmp_path: Path) -> None:
    (tmp_path / "mylib-info").touch()
    ordered = smoke_commands((("mylib-info",),), (("{python}", "-m", "{import_name}", "selftest"),))
    assert [(c.argv[0], c.self_test) for c in ordered] == [("mylib-info", False), ("{python}", True)]
    argv = command_argv(ordered[1].argv, python="/v/bin/python", bindir=tmp_path, import_name="mylib_rocm")
    assert argv == ["/v/bin/python", "-m", "mylib_rocm", "selftest"]
    inline = command_argv(("{python}", "-c", "import {import_name}"), python="/p", bindir=tmp_path,
                          import_name="mylib_cpu")  # fmt: skip
    assert inline == ["/p", "-c", "import mylib_cpu"]
    assert command_argv(ordered[0].argv, python="/p", bindir=tmp_path, import_name="x") == [
        str(tmp_path / "mylib-info")
    ]
    assert shown(ordered[1].argv, "mylib_rocm") == "python -m mylib_rocm selftest"


def test_verbose_shows_every_command_s_output_passing_or_not() -> None:
    outcome = Outcome(wheel="w.whl", sha256="0", variant="cpu", python="3.12", image="host", expect="pass")
    outcome.steps += [
        Step("import mylib", True, 0.1),
        Step("mylib-info", True, 0.2, "ok: true", output='{"ok": true, "capacity": 4096}'),
        Step("python -m mylib selftest", False, 0.3, "reported ok: false", output=LOGGED.strip()),
    ]
    text = command_outputs([outcome])
    assert '[3.12 host] w.whl: mylib-info (ok)\n  | {"ok": true, "capacity": 4096}' in text
    assert "python -m mylib selftest (FAILED)\n  | INFO mylib: transport tcp up\n  | {" in text
    assert "import mylib" not in text
    assert outcome.as_json()["steps"][1]["output"] == '{"ok": true, "capacity": 4096}'  # type: ignore[index]
