"""The README stands alone and carries the two commands the executable-README tier runs."""

from __future__ import annotations

import re
from pathlib import Path

from tests.readme import NAMES, README, readme_commands

ROOT = README.parent


def test_the_readme_marks_one_set_up_and_one_test_command() -> None:
    commands = readme_commands()
    assert sorted(commands) == sorted(NAMES)
    for name, command in commands.items():
        assert len(command.splitlines()) == 1, f"{name}: one command line, so .ci/run and the test agree"
    assert commands["setup"].startswith("bash scripts/bootstrap.sh")
    assert "nox -s" in commands["test"] and "tests" in commands["test"]


def test_the_parser_takes_only_the_marked_block() -> None:
    text = "x\n<!-- readme-test: setup -->\n```bash\necho a\n```\n```bash\necho b\n```\n"
    assert readme_commands(text) == {"setup": "echo a"}


def test_links_stay_inside_the_repository() -> None:
    """Every relative link resolves to a file or directory of the repository; no document that
    lives elsewhere (design notes, style guides) is pointed at."""
    text = README.read_text(encoding="utf-8")
    anchors = {_anchor(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://")):
            continue
        if target.startswith("#"):
            assert target[1:] in anchors, target
            continue
        path = (ROOT / target.split("#")[0]).resolve()
        assert path.exists() and ROOT in (path, *path.parents), target
    for outside in ("DESIGN.md", "STYLE.md", "/work/"):
        assert outside not in text


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading."""
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return slug.replace(" ", "-")


def test_the_toolkits_name_on_pypi_is_the_one_the_readme_gives() -> None:
    import tomlkit

    from release import DISTRIBUTION

    project = tomlkit.parse((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == DISTRIBUTION
    assert f"pip install {DISTRIBUTION}" in README.read_text(encoding="utf-8")


def test_the_ci_entry_reads_the_same_commands() -> None:
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "readme_command setup" in run and "readme_command test" in run
    assert Path(ROOT / "scripts" / "bootstrap.sh").is_file()
