"""Issue 57 cause 10: every number flag is finite, in range and ASCII (`--timeout nan` was a
traceback, `--wait nan` waited forever): a usage line and exit 2, before anything runs."""

from __future__ import annotations

import pytest

from release import cli

FLAGS = [
    ("hardware", "--timeout"), ("hardware", "--wait"), ("hardware", "--bench"), ("build", "--lock-wait"),
    ("images", "--pull-timeout"),
    ("build", "--jobs"), ("publish", "--tries"), ("publish", "--backoff"), ("publish", "--upload-timeout"),
    ("publish", "--index-timeout"), ("release-checks", "--timeout"), ("release-checks", "--size-limit"),
    ("verify-release", "--timeout"), ("verify-release", "--settle"), ("reproduce", "--jobs"),
]  # fmt: skip


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e400", "\u0663", "99999999999999999999", "0x10"])
@pytest.mark.parametrize(("command", "flag"), FLAGS)
def test_a_number_flag_refuses_what_is_not_a_plain_bounded_number(
    command: str, flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([command, flag, value]) == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "name", "value"),
    [
        (["hardware", "--variant", "cpu", "--timeout", "600.5"], "timeout", 600.5),
        (["build", "--jobs", "4"], "jobs", 4),
    ],
)
def test_a_plain_number_is_taken(argv: list[str], name: str, value: float) -> None:
    assert getattr(cli.build_parser(argv[0]).parse_args(argv), name) == value
