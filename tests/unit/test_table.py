"""The table renderer: the terminal table, and the same table as Markdown in the job summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from release import cli, table

HEADERS = ("wheel", "result", "seconds")
ROWS = [("a-1.0-cp312.whl", "pass", 1.5), ("b|c.whl", "FAIL\nsecond line", 12)]


def test_plain_text_without_a_summary_file(tmp_path: Path) -> None:
    text = table.render(HEADERS, ROWS, environ={})
    assert text.splitlines()[0] == "wheel            result            seconds"
    assert text.splitlines()[2].endswith("    1.5")  # numbers right-aligned
    assert list(tmp_path.iterdir()) == []


def test_the_summary_file_gets_the_markdown_table(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    plain = table.render(HEADERS, ROWS, title="Verify", environ=env)
    assert plain == table.render(HEADERS, ROWS, environ={})  # the terminal sees the same table
    assert summary.read_text(encoding="utf-8") == (
        "earlier step\n"
        "#### Verify\n\n"
        "| wheel | result | seconds |\n"
        "| --- | --- | ---: |\n"
        "| a-1.0-cp312.whl | pass | 1.5 |\n"
        "| b\\|c.whl | FAIL second line | 12 |\n\n"
    )
    table.render(("x",), [], environ=env)  # appended, never replacing what the job wrote
    assert summary.read_text(encoding="utf-8").endswith("| x |\n| --- |\n\n")


def test_long_cells_are_cut_and_empty_ones_kept() -> None:
    md = table.markdown(("a", "b"), [("x" * 1000, "")])
    row = md.splitlines()[2]
    assert len(row) < table.MAX_CELL + 20 and "…" in row
    assert row.endswith("|   |")


def test_an_unwritable_summary_warns_and_the_command_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-dir" / "summary.md"
    text = table.render(HEADERS, ROWS, environ={"GITHUB_STEP_SUMMARY": str(missing)})
    assert text.startswith("wheel")
    assert "warning: GITHUB_STEP_SUMMARY=" in capsys.readouterr().err


def test_every_command_table_reaches_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through os.environ, as in a GitHub Actions step: `release plan` here."""
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    root = Path(__file__).resolve().parents[2]
    assert cli.main(["--matrix", str(root / "matrix.yaml"), "plan"]) == 0
    capsys.readouterr()
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("| identifier | distribution | backend | python | platform floor | runs |\n")
    assert "| cp312-rocm-manylinux_x86_64 | xfer-engine-rocm | rocm | 3.12 | manylinux_2_28_x86_64 | " in text
