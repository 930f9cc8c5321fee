"""`release.cli.main`: one place turns user errors into exit codes; tracebacks only with --debug."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from release import cli
from release.commands import plan
from release.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
MATRIX_FILE = str(ROOT / "matrix.yaml")


def test_unknown_command_exits_2_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--matrix", MATRIX_FILE, "plna"]) == 2
    out, err = capsys.readouterr()
    assert "invalid choice: 'plna'" in err
    assert "'plan'" in err
    assert err.startswith("error: python -m release: ")
    assert "Traceback" not in out + err


def test_no_command_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "COMMAND" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["--matrix", MATRIX_FILE, "plan", "--no-such-option"],
        ["--no-such-option", "plan"],
        ["--matrix", MATRIX_FILE, "plan", "extra-argument"],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert "unrecognized arguments" in err
    assert "Traceback" not in out + err


def test_user_error_has_no_traceback_without_debug(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--matrix", MATRIX_FILE, "plan", "--select", "nothing-*"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("error: --select 'nothing-*' matches no step")
    assert "Traceback" not in out + err


def test_debug_shows_the_traceback_of_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--debug", "--matrix", MATRIX_FILE, "plan", "--select", "nothing-*"]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert "UsageError" in err
    assert "error: --select 'nothing-*' matches no step" in err


def test_missing_matrix_file_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "matrix.yaml"
    assert cli.main(["--matrix", str(missing), "plan"]) == 3
    out, err = capsys.readouterr()
    assert f"{missing}: cannot read" in err
    assert "Traceback" not in out + err


def test_default_matrix_is_matrix_yaml_in_the_working_directory(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    assert cli.main(["plan", "--select", "cp313-cpu-*"]) == 0
    assert "2 build steps from matrix.yaml" in capsys.readouterr().out  # x86_64 and aarch64


def test_matrix_is_accepted_after_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["plan", "--matrix", MATRIX_FILE, "--select", "cp313-cpu-x86_64"]) == 0
    assert "1 build steps from matrix.yaml" in capsys.readouterr().out


def test_version_and_exit_codes_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    from release import __version__

    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert __version__ in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "exit codes: 1 error, 2 usage, 3 invalid matrix" in " ".join(out.split())


@pytest.mark.parametrize(
    ("argv0", "expected"),
    [
        ("/usr/local/bin/release", "release"),
        ("/x/release/__main__.py", "python -m release"),
        ("python3", "python -m release"),
    ],
)
def test_program_name_follows_the_invocation(argv0: str, expected: str) -> None:
    assert cli.program_name(argv0) == expected


def test_every_command_has_a_module_with_the_stage_interface() -> None:
    parser = cli.build_parser()
    assert isinstance(parser, argparse.ArgumentParser)
    for name in cli.COMMANDS:
        module = cli.command_module(name)
        assert callable(module.add_arguments), name
        assert callable(module.run), name


def test_the_stage_sees_the_loaded_matrix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[object] = []

    def run(args: argparse.Namespace, loaded: object) -> int:
        seen.append(loaded)
        return 17

    monkeypatch.setattr(plan, "run", run)
    assert cli.main(["--matrix", MATRIX_FILE, "plan"]) == 17
    assert len(seen) == 1
    assert getattr(seen[0], "path", None) == Path(MATRIX_FILE).resolve()


def test_interrupt_exits_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def run(args: argparse.Namespace, loaded: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(plan, "run", run)
    assert cli.main(["--matrix", MATRIX_FILE, "plan"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_exit_codes_are_distinct() -> None:
    from release import errors

    codes = {
        cls.__name__: cls.exit_code
        for cls in vars(errors).values()
        if isinstance(cls, type) and issubclass(cls, errors.ReleaseError)
    }
    assert codes["UsageError"] == 2
    assert codes["MatrixError"] == 3
    assert len(set(codes.values())) == len(codes)
    assert sorted(codes.values()) == [code for code, _what in errors.EXIT_CODES]
    assert issubclass(UsageError, errors.ReleaseError)


def test_each_shared_flag_is_declared_in_one_module() -> None:
    """`--variant`, `--python`, `--wheelhouse` and `--matrix` are spelled in release/flags.py
    only: a command says what the flag means to it and its shape, not how it is declared."""
    import ast
    from pathlib import Path

    release = Path(__file__).resolve().parents[2] / "release"
    shared = {"--variant", "--python", "--wheelhouse", "--matrix"}
    spelled = sorted(
        f"{path.relative_to(release.parent)}:{node.lineno}"
        for path in release.rglob("*.py") if path.name != "flags.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)  # add_argument("--variant"), add("--variant"), settings.argument(...)
        and ast.unparse(node.func).split(".")[-1] in ("add_argument", "add", "argument")
        and any(isinstance(a, ast.Constant) and a.value in shared for a in node.args)
    )  # fmt: skip
    assert spelled == []
