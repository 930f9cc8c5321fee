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


GUIDES = (
    "local-builds", "matrix", "verify", "images", "hardware", "release-builds", "publishing", "variants",
    "adopting", "engine", "benchmarks", "settings",
)  # fmt: skip
"""The pages of docs/ the README sends a reader to, one per task."""


def _documents() -> list[Path]:
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


def broken_links(document: Path, root: Path = ROOT) -> list[str]:
    """Every relative link of `document` that names no file or directory of the repository, or an
    anchor that no heading of its target makes (links inside code blocks are not links)."""
    text = re.sub(r"^```.*?^```", "", document.read_text(encoding="utf-8"), flags=re.M | re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        name, _, anchor = target.partition("#")
        path = (document.parent / name).resolve() if name else document
        if not (path.exists() and root.resolve() in (path, *path.parents)):
            broken.append(f"{document.name}: {target} (no such file)")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{document.name}: {target} (no such heading)")
    return broken


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading."""
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return slug.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {_anchor(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


def test_every_link_resolves() -> None:
    """Every relative link of README.md and docs/*.md resolves to a file or directory of the
    repository, and an `#anchor` to a heading of its page."""
    assert [b for d in _documents() for b in broken_links(d)] == []


def test_a_broken_link_is_caught(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Second part\n", encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text(
        "# T\n\n[ok](docs/a.md#second-part) [gone](docs/b.md) [bad](docs/a.md#third) [up](#t) [no](#x)\n"
        "```text\n[in code](nowhere.md)\n```\n[out](../../etc/passwd)\n",
        encoding="utf-8",
    )
    assert broken_links(readme, tmp_path) == [
        "README.md: docs/b.md (no such file)", "README.md: docs/a.md#third (no such heading)",
        "README.md: #x (no such heading)", "README.md: ../../etc/passwd (no such file)",
    ]  # fmt: skip


def test_the_readme_is_a_guide() -> None:
    """The README stays short (what it is, the two commands, sessions, commands, the map) and
    links every task's page; no document that lives outside the repository is pointed at."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 250
    assert [g for g in GUIDES if f"](docs/{g}.md)" not in text] == []
    for document in [README, *(ROOT / "docs" / f"{g}.md" for g in GUIDES)]:
        for outside in ("DESIGN.md", "STYLE.md", "/work/"):
            assert outside not in document.read_text(encoding="utf-8"), document


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
