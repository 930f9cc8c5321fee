"""Every RELEASE_* environment variable is declared once (release/settings.py), read through it,
listed by `release --help`, and documented in docs/settings.md as rendered from the declarations."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from release import settings
from release.cli import build_parser
from release.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"\bRELEASE_[A-Z][A-Z0-9_]*\b")
NOT_VARIABLES = {"RELEASE_IMAGE_GCC", "RELEASE_YML"}
"""Python constants that happen to be spelled RELEASE_*: no environment is read under them."""
SOURCES = ("release", "tests", "scripts", "noxfile.py", ".ci/run")


def _sources() -> list[Path]:
    found: list[Path] = []
    for part in SOURCES:
        path = ROOT / part
        found += [path] if path.is_file() else [p for p in path.rglob("*") if p.suffix in (".py", ".sh")]
    return found


def test_every_name_in_the_code_is_declared() -> None:
    declared = {s.name for s in settings.SETTINGS}
    used = {(name, path.relative_to(ROOT).as_posix()) for path in _sources()
            for name in NAME.findall(path.read_text(encoding="utf-8"))}  # fmt: skip
    undeclared = sorted((name, where) for name, where in used if name not in declared | NOT_VARIABLES)
    assert undeclared == [], "declare them in release/settings.py"
    toolkits = {name for name in declared if name.startswith("RELEASE_")}
    assert toolkits <= {name for name, _where in used}, "a declared setting nothing reads"


def test_no_release_variable_is_read_past_the_settings() -> None:
    direct = re.compile(r"(?:environ(?:\.get)?\(|environ\[|getenv\()\s*[\"']RELEASE_")
    offenders = [p.relative_to(ROOT).as_posix() for p in _sources() if p.suffix == ".py"
                 and p.name != "settings.py" and direct.search(p.read_text(encoding="utf-8"))]  # fmt: skip
    assert offenders == []


def test_docs_page_is_rendered_from_the_declarations() -> None:
    page = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert page == settings.markdown(), "regenerate: python -m release.settings > docs/settings.md"


def test_help_lists_the_toolkits_settings() -> None:
    text = build_parser().format_help()
    for s in settings.SETTINGS:
        assert (s.name in text) == (s.scope == "toolkit"), s.name


def test_values_defaults_and_clear_errors() -> None:
    assert settings.number("RELEASE_HEARTBEAT", {}) == 10.0
    assert settings.number("RELEASE_HEARTBEAT", {"RELEASE_HEARTBEAT": "0"}) == 0.0
    assert settings.switch("RELEASE_SMOKE_NO_USERNS", {"RELEASE_SMOKE_NO_USERNS": "1"}) is True
    assert settings.switch("RELEASE_SMOKE_NO_USERNS", {}) is False
    assert settings.path("RELEASE_MINBASE_DIR", {}) is None
    assert settings.path("RELEASE_MINBASE_DIR", {"RELEASE_MINBASE_DIR": "/x/y"}) == Path("/x/y")
    assert settings.text("RELEASE_GH", {"RELEASE_GH": ""}) == "gh"
    for bad in ("ten", "-1", "nan"):
        with pytest.raises(UsageError, match=rf"RELEASE_HEARTBEAT='{bad}': want a number of 0 or more"):
            settings.number("RELEASE_HEARTBEAT", {"RELEASE_HEARTBEAT": bad})
    with pytest.raises(UsageError, match=r"RELEASE_SMOKE_NO_USERNS='yes': want 1 \(on\) or 0 \(off\)"):
        settings.switch("RELEASE_SMOKE_NO_USERNS", {"RELEASE_SMOKE_NO_USERNS": "yes"})


def test_a_flag_its_variable_and_its_default_are_declared_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`settings.argument`: the variable, when set, is the flag's default, and its help names it."""
    import argparse

    monkeypatch.setenv("GITHUB_REPOSITORY", "ringlet/xfer")
    parser = argparse.ArgumentParser()
    settings.argument(parser, "--repo", env="GITHUB_REPOSITORY", help="the GitHub repository")
    assert parser.parse_args([]).repo == "ringlet/xfer"
    assert parser.parse_args(["--repo", "a/b"]).repo == "a/b"
    assert "$GITHUB_REPOSITORY" in parser.format_help()
    monkeypatch.delenv("GITHUB_REPOSITORY")
    parser = argparse.ArgumentParser()
    settings.argument(parser, "--repo", env="GITHUB_REPOSITORY", help="the GitHub repository")
    assert parser.parse_args([]).repo is None
    with pytest.raises(KeyError):
        settings.argument(parser, "--other", env="NOT_DECLARED", help="x")


def _command_help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        build_parser(command).parse_args([command, "--help"])
    return capsys.readouterr().out


def test_every_command_names_the_github_repository_repo(capsys: pytest.CaptureFixture[str]) -> None:
    """One flag name for the GitHub repository: `--repo` (`--repository` is an index's URL)."""
    for command in ("release-checks", "github-release", "ready", "hardware", "rehearse"):
        assert "--repo OWNER/NAME" in _command_help(command, capsys), command
    assert "--repository" not in _command_help("hardware", capsys)


def test_platform_variables_are_read_through_the_settings() -> None:
    assert settings.in_ci({"CI": "true"}) and settings.in_ci({"CI": "1"}) and not settings.in_ci({})
    assert settings.in_github_actions({"GITHUB_ACTIONS": "true"})
    assert not settings.in_github_actions({"CI": "1"})
    assert settings.pyenv_root({"PYENV_ROOT": "/opt/pyenv"}) == Path("/opt/pyenv")
    assert settings.pyenv_root({}) == Path.home() / ".pyenv"
