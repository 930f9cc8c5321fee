"""Issue 57 causes 5 and 9, issue 58 item 8: what a smoked package prints is judged without a
traceback and shown escaped, and a check that did not run is never read as a pass."""

from __future__ import annotations

import json

from release.smoke.outcome import Outcome, Step, command_outputs, count_line, failures, summary
from release.smoke.verdict import json_ok, judge, last_line_json, last_object

ESC = "\x1b]0;owned\x07\x1b[2J"


def test_a_verdict_nested_100000_deep_is_no_verdict() -> None:
    """Was RecursionError in smoke/verdict.py."""
    deep = "[" * 100_000 + "]" * 100_000
    assert json_ok('{"ok": true, "x": ' + deep + "}") is None
    assert judge(0, '{"ok": true, "x": ' + deep + "}", self_test=True)[0] is False


def test_a_banner_before_the_probe_json_is_skipped() -> None:
    """Was JSONDecodeError in check_runtime_location: a package printed a line at import."""
    probe = json.dumps({"mapped": ["/opt/x/libamdhip64.so.7"], "dirs": ["/opt/x"], "expected": "/opt/x"})
    assert last_object(f"Welcome to xfer 1.0!\n{probe}\n") == json.loads(probe)
    assert last_line_json("banner\n[\"/a.so\"]\n", b"[]") == ["/a.so"]
    assert last_line_json("banner only\n", b"[]") is None


def _outcome(**kw: object) -> Outcome:
    base: dict[str, object] = {"wheel": "w.whl", "sha256": "0", "variant": "cuda", "python": "3.12",
                               "image": "host", "expect": "ok"}  # fmt: skip
    return Outcome(**{**base, **kw})  # type: ignore[arg-type]


def test_command_output_is_escaped_in_the_log_and_with_verbose() -> None:
    """Was: a failed command's tail and --verbose printed raw, setting the terminal's title."""
    outcome = _outcome()
    line = outcome.add(Step(f"run {ESC}", False, 0.1, f"exit 1 {ESC}", f"out {ESC}"), f"tail {ESC}")
    shown = command_outputs([outcome])
    for text in (line, shown):
        assert "\x1b" not in text and "\x07" not in text
        assert "\\x1b" in text


def test_a_leg_whose_self_test_did_not_run_is_not_counted_as_passed() -> None:
    """Issue 58 item 8: no driver, the import refused, the self-test never ran: not "1/1 passed"."""
    leg = _outcome(steps=[Step("import xfer refused", True, 0.2)])
    leg.not_run.append("self-test python -m xfer.selftest: not run: GPU driver libcuda.so.1 absent here")
    assert leg.ok and not leg.passed
    assert "1/1 passed" not in count_line([leg], 3.0)
    assert count_line([leg], 3.0).startswith("0/1 passed")
    assert "NOT RUN" in summary([leg]) and "pass " not in summary([leg]).splitlines()[-1]
    assert leg.as_json()["passed"] is False
    done = _outcome(steps=[Step("import xfer", True, 0.2)])
    assert count_line([done], 1.0) == "1/1 passed in 1s"


def test_require_self_tests_and_ci_fail_a_leg_whose_checks_did_not_run() -> None:
    leg = _outcome(steps=[Step("import xfer refused", True, 0.2)])
    leg.not_run.append("self-test x: not run: no driver")
    assert failures([leg], None) == []
    assert failures([leg], "--require-self-tests") == [
        "w.whl in host: self-test x: not run: no driver (--require-self-tests)"
    ]
    assert failures([leg], "CI=true")[0].endswith("(CI=true)")


def test_a_block_of_lines_keeps_its_breaks_and_loses_its_escapes() -> None:
    from release.table import printable_lines

    block = f"[3.12 host] run ... FAILED\n  | {ESC}\n  | done"
    shown = printable_lines(block)
    assert shown.count("\n") == 2 and "\x1b" not in shown and "\x07" not in shown
    assert printable_lines(shown) == shown


def test_a_self_test_whose_device_checks_were_skipped_is_not_a_pass() -> None:
    """Issue 58 item 8, "no device": the selftest asked for its device checks and skipped them."""
    from types import SimpleNamespace

    from release.smoke.verdict import device_not_run, not_run

    skipped = '{"ok": true, "device_requested": true, "device": false, "device_reason": "no GPU\\u001b[2J"}'
    (line,) = device_not_run(f"log line\n{skipped}\n", "python -m xfer selftest --json --device")
    assert line.startswith("device checks of python -m xfer selftest --json --device: skipped (no GPU")
    assert device_not_run('{"ok": true, "device_requested": true, "device": true}', "x") == []
    assert device_not_run('{"ok": true, "device": false}', "x") == []
    selftest = ("{python}", "-m", "{import_name}", "selftest")
    variant = SimpleNamespace(
        import_name="xfer", smoke_commands=(("xfer-master", "--version"),), smoke_self_tests=(selftest,)
    )
    why = "not run: GPU driver libcuda.so.1 absent here, the import refuses"
    assert not_run(variant, ["libcuda.so.1"]) == [  # type: ignore[arg-type]
        f"command xfer-master --version: {why}",
        f"self-test python -m xfer selftest: {why}",
    ]
