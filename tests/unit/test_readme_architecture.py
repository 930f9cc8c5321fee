"""README's architecture table is generated from the layer map and the package docstrings
(`release.layers`), its table of commands from `release.cli.COMMANDS`, and a test fails when
either drifts, as the matrix schema does."""

from __future__ import annotations

from pathlib import Path

import pytest

from release import cli, layers
from release.errors import ReleaseError
from release.layers import (
    BEGIN,
    END,
    LAYERS,
    architecture_table,
    markers,
    source_readme,
    with_architecture,
    with_section,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_tables_are_the_generated_ones() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert with_architecture(readme) == readme, "regenerate it: python -m release schema --write"
    assert with_section(readme, "commands", cli.command_table()) == readme


def test_every_command_has_a_row(monkeypatch: pytest.MonkeyPatch) -> None:
    table = cli.command_table()
    assert [c for c in cli.COMMANDS if f"| `release {c}` |" not in table] == []
    assert "Exit codes (also in `--help`): 1 error, 2 usage," in table
    monkeypatch.setitem(cli.COMMANDS, "brand-new", ("plan", "a command the README does not know"))
    with pytest.raises(ReleaseError, match="COMMAND_GROUPS must name every command"):
        cli.command_table()
    last, names = cli.COMMAND_GROUPS[-1]
    groups = (*cli.COMMAND_GROUPS[:-1], (last, (*names, "brand-new")))
    monkeypatch.setattr(cli, "COMMAND_GROUPS", groups)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert with_section(readme, "commands", cli.command_table()) != readme


def test_commands_are_grouped_by_who_uses_them() -> None:
    """The README's table starts each group with its name: everyday, release day, maintainers."""
    rows = [line for line in cli.command_table().splitlines() if line.startswith("| ") and "`release" in line]
    starts = [row.split(" | ")[0].strip("| ") for row in rows]
    assert [s for s in starts if s] == ["everyday", "release day", "maintainers"]
    assert rows[0].startswith("| everyday | `release plan` |")


def test_every_package_has_a_row_with_its_docstring() -> None:
    table = architecture_table()
    for layer, names in LAYERS:
        for name in names:
            row = next(line for line in table.splitlines() if f"`release/{name}" in line)
            assert row.startswith(f"| {layer} |")
            assert row.split(" | ")[2].strip(" |"), f"release/{name} has no docstring to show"


def _package(tmp_path: Path, docstring: str) -> Path:
    package = tmp_path / "release"
    for _, names in LAYERS:
        for name in names:
            (package / name).mkdir(parents=True, exist_ok=True)
            (package / name / "__init__.py").write_text(f'"""{name} holds things."""\n', encoding="utf-8")
    (package / "plan" / "__init__.py").write_text(f'"""{docstring}\n\nMore."""\n', encoding="utf-8")
    return package


def test_a_docstring_change_is_drift(tmp_path: Path) -> None:
    readme = f"# x\n\n{BEGIN}\n{END}\n\nafter\n"
    before = with_architecture(readme, _package(tmp_path, "Planning | once."))
    assert "| plan | `release/plan/` | Planning \\| once. |" in before
    assert before.endswith(f"{END}\n\nafter\n")
    after = with_architecture(before, _package(tmp_path, "Planning, changed."))
    assert after != before and "Planning, changed." in after
    assert with_architecture(after, _package(tmp_path, "Planning, changed.")) == after


def test_a_readme_without_the_markers_is_refused() -> None:
    with pytest.raises(ReleaseError, match="architecture markers"):
        with_architecture("# x\n\n| layer | package |\n")


def test_an_installed_toolkit_has_no_readme_to_check(tmp_path: Path) -> None:
    package = tmp_path / "release"
    (package / "backends_data").mkdir(parents=True)
    (tmp_path / "README.md").write_text("# x\n", encoding="utf-8")
    assert source_readme(package) is None
    (package / "backends_data").rmdir()
    assert source_readme(package) == tmp_path / "README.md"


def test_schema_check_names_a_stale_readme(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "README.md"
    begin, end = markers("commands")
    stale.write_text(f"# x\n\n{BEGIN}\n| old |\n{END}\n\n{begin}\n{end}\n", encoding="utf-8")
    monkeypatch.setattr(layers, "source_readme", lambda: stale)
    monkeypatch.setattr("release.commands.schema.source_readme", lambda: stale)
    assert cli.main(["schema", "--check"]) == 1
    assert "README.md is out of date with release/layers.py" in capsys.readouterr().err
    assert cli.main(["schema", "--write"]) == 0
    assert "| old |" not in stale.read_text(encoding="utf-8")
    assert "| `release plan` |" in stale.read_text(encoding="utf-8")
    assert cli.main(["schema", "--check"]) == 0
