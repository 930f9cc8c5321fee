"""How smoke judges the matrix's commands (release.smoke.verdict): the JSON object that ends a
command's output is its verdict, whatever it logged before; a self-test must print one. And what
smoke and the container build's import test install: the declared source, never a skipped one."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from release.builder.cibw import cibuildwheel_options
from release.builder.cibw import test_environment as import_test_environment
from release.config.matrix import load
from release.plan.resolve import RequirementSource
from release.plan.steps import make_plan
from release.smoke.outcome import Outcome, Step, command_outputs
from release.smoke.requirements import install_argvs, left_out
from release.smoke.verdict import command_argv, json_ok, judge, shown, smoke_commands

ROOT = Path(__file__).resolve().parents[2]
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


# --- engine.smoke.requirements.skip: a heavy requirement left out of smoke and the import test ----------


def test_a_skipped_requirement_is_left_out_of_the_smoke_install(tmp_path: Path) -> None:
    wheel, pip = tmp_path / "w.whl", ["/v/bin/python", "-m", "pip"]
    source = RequirementSource(index_url="https://pypi.org/simple", skip=("Torch",))
    requires = ["torch>=2.9", "numpy>=1.26", 'triton; extra == "gpu"']
    assert left_out(requires, source) == (["numpy>=1.26", 'triton; extra == "gpu"'], ["torch>=2.9"])
    first, second = install_argvs(pip, wheel, requires, source)
    assert first[3:6] == ["install", "--index-url", "https://pypi.org/simple"]
    assert first[-2:] == ["numpy>=1.26", 'triton; extra == "gpu"'] and str(wheel) not in first
    assert second[3:] == ["install", "--no-deps", "--no-index", str(wheel)]  # torch is never asked for
    alone = install_argvs(pip, wheel, ["torch"], RequirementSource(skip=("torch",)))
    assert alone == [[*pip, "install", "--no-deps", "--no-index", str(wheel)]]
    plain = install_argvs(pip, wheel, ["numpy"], RequirementSource(index_url="https://pypi.org/simple"))
    assert len(plain) == 1 and plain[0][-1] == str(wheel)


def test_the_container_import_test_uses_the_smoke_source_and_never_the_index_by_default(
    tmp_path: Path,
) -> None:
    variant = make_plan(load(ROOT / "matrix.yaml")).variant("cpu")

    def env(source: RequirementSource) -> dict[str, str]:
        return import_test_environment(dataclasses.replace(variant, smoke_requirements=source))

    assert env(RequirementSource()) == {"UV_OFFLINE": "1"}
    assert env(RequirementSource(index_url="https://pypi.org/simple")) == {
        "UV_INDEX_URL": "https://pypi.org/simple"
    }
    excludes = "/project/release-test-excludes.txt"
    assert env(RequirementSource(find_links=tmp_path, skip=("torch",))) == {
        "UV_OFFLINE": "1",
        "UV_FIND_LINKS": "/release-find-links",
        "UV_EXCLUDE": excludes,
    }
    steps = tuple(
        s for s in make_plan(load(ROOT / "matrix.yaml")).builds
        if s.variant.name == "cpu" and s.identifier.endswith("_x86_64")
    )  # fmt: skip
    assert cibuildwheel_options(steps)["test-environment"] == "UV_OFFLINE=1"
