"""`release workflows`: render the GitHub workflows from the toolkit's templates for this
repository, print them, or check (`--check`, a unified diff per drifted file) or rewrite
(`--write`) the committed ones.

In the toolkit's own repository the rendering is the toolkit's (installed from the checkout, run
as `python -m release`, with its own lint and test jobs); anywhere else it is what
`release init --ci github` writes for an adopter, pinned to this toolkit's version.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from release.atomic import write_project_files
from release.config.matrix import LoadedMatrix
from release.errors import ReleaseError
from release.init import workflows
from release.wheel.files import read_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "root", nargs="?", type=Path, default=Path(), metavar="PATH", help="the repository (default: .)"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="fail with a diff if a committed workflow drifted")
    mode.add_argument("--write", action="store_true", help="rewrite the committed workflows")


def _current(path: Path) -> str | None:
    """The committed workflow's text; None where there is none, or it is not a regular UTF-8 file
    of a workflow's size (a link is replaced, never followed, by the write)."""
    try:
        return None if path.is_symlink() else read_text(path, 1 << 20)
    except (OSError, UnicodeDecodeError):
        return None


def target_for(root: Path) -> workflows.Target:
    return workflows.TOOLKIT_REPOSITORY if workflows.is_toolkit_repository(root) else workflows.adopter()


def run(args: argparse.Namespace, loaded: LoadedMatrix | None) -> int:
    del loaded
    root: Path = args.root
    files = workflows.rendered(root, target_for(root))
    if args.write:
        changed = {path: text for path, text in files.items() if _current(path) != text}
        write_project_files([(path, text, root) for path, text in changed.items()])
        for path in files:
            print(f"{'wrote' if path in changed else 'unchanged'} {path}")
        return 0
    if args.check:
        diffs = workflows.drift(files)
        if diffs:
            sys.stdout.write("".join(diffs.values()))
            names = ", ".join(str(path) for path in diffs)
            msg = f"{names}: not the templates' rendering (diff above): run `release workflows --write`"
            raise ReleaseError(msg)
        print(", ".join(p.name for p in files) + " are the templates' rendering")
        return 0
    for path, text in files.items():
        sys.stdout.write(f"# --- {path}\n{text}")
    return 0
