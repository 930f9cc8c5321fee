"""README's "Where a change goes" cannot go stale: every path it names exists (a `<name>` part
stands for any name, and at least one file must match)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_PATH = re.compile(r"`([A-Za-z0-9_.<>*-]+(?:/[A-Za-z0-9_.<>*-]*)+)`")


def where_a_change_goes(readme: str) -> str:
    """The section: from its first line to the first blank line after its list."""
    lines = readme.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Where a change goes"))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return "\n".join(lines[start:end])


def named_paths(section: str) -> list[str]:
    """The repository paths a section names in backticks (`release/inspect/rules/`, `<name>.json`)."""
    return [m.group(1) for m in _PATH.finditer(section) if not m.group(1).startswith(("http", "/"))]


def missing_paths(section: str, root: Path = ROOT) -> list[str]:
    missing = []
    for path in named_paths(section):
        pattern = re.sub(r"<[^>]*>", "*", path.rstrip("/"))
        if not any(root.glob(pattern)):
            missing.append(path)
    return missing


def test_where_a_change_goes_names_paths_that_exist() -> None:
    section = where_a_change_goes((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(named_paths(section)) >= 4, section
    assert missing_paths(section) == [], f"README names paths that do not exist:\n{section}"


def test_a_stale_path_is_caught(tmp_path: Path) -> None:
    (tmp_path / "release" / "inspect" / "rules").mkdir(parents=True)
    (tmp_path / "packaging" / "backends").mkdir(parents=True)
    (tmp_path / "packaging" / "backends" / "cpu.json").write_text("{}", encoding="utf-8")
    section = (
        "Where a change goes:\n"
        "- a rule: `release/inspect/rules.py` (gone), now `release/inspect/rules/`;\n"
        "- a backend: `packaging/backends/<name>.json` and `scripts/install-<name>.sh`.\n"
    )
    assert named_paths(section) == [
        "release/inspect/rules.py", "release/inspect/rules/", "packaging/backends/<name>.json",
        "scripts/install-<name>.sh",
    ]  # fmt: skip
    assert missing_paths(section, tmp_path) == ["release/inspect/rules.py", "scripts/install-<name>.sh"]
