"""Staging's `.gitignore` matcher (pathspec on RE2, `release/builder/gitignore.py`) against git
itself: a corpus of patterns in nested `.gitignore` files and a tree of paths, each path's verdict
from `git check-ignore` compared with the toolkit's (issue 57, cause 7)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from release.builder.gitignore import GitIgnore

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("git") is None, reason="no git"),
]

ROOT_RULES = """
*.o
!keep.o
/top-only/
build/
**/cache
logs/**
doc/*.html
data[0-9].bin
data[!0-9].txt
v?.md
\\#hash
[z-a]
*a*a*a*a*a*a*a*a*a*a*a*a*b
sub/**/deep.txt
""" + "trailing\\ \n"  # an escaped trailing space
SUB_RULES = """
/gen/
!*.keep
*.keep.o
local
"""
FILES = [
    "x.o", "keep.o", "src/y.o", "src/keep.o", "top-only/f", "src/top-only/f", "build/f", "src/build/f",
    "a/b/cache/f", "cache/f", "logs/today/x", "logs/x", "doc/a.html", "doc/sub/a.html", "data7.bin",
    "dataX.bin", "data7.txt", "dataX.txt", "v1.md", "v12.md", "#hash", "m", "z", "q",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "sub/deep.txt", "sub/x/y/deep.txt", "trailing ", "sub/gen/f", "gen/f", "sub/a.keep", "sub/a.keep.o",
    "sub/local", "local", "sub/inner/local",
]  # fmt: skip


def test_the_matcher_agrees_with_git_check_ignore(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text(ROOT_RULES.lstrip("\n"), encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text(SUB_RULES.lstrip("\n"), encoding="utf-8")
    for name in FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x", encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    proc = subprocess.run(
        ["git", "-C", str(tmp_path), "check-ignore", "--no-index", "--stdin"],
        input="\n".join(FILES) + "\n",
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode in (0, 1), proc.stderr
    by_git = set(proc.stdout.splitlines())
    matcher = GitIgnore(tmp_path)

    def ignored(path: str) -> bool:  # as the staging walk asks: parents first, a skipped one ends it
        parts = path.split("/")
        for n in range(1, len(parts)):
            if matcher.ignored("/".join(parts[:n]), is_dir=True):
                return True
        return matcher.ignored(path, is_dir=False)

    ours = {path for path in FILES if ignored(path)}
    assert ours == by_git, {"only git": sorted(by_git - ours), "only ours": sorted(ours - by_git)}
    assert len(by_git) > 15  # the corpus exercises the rules
