"""`python -m release`: one parser, one place that turns `ReleaseError` into an exit code."""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import re
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from release.errors import NotImplementedYet, ReleaseError, UsageError

# command -> (module, help). Each module has `add_arguments(parser)` and `run(args, loaded)`.
COMMANDS: dict[str, tuple[str, str]] = {
    "plan": ("plan", "expand the matrix into build (or smoke) steps"),
    "build": ("build", "build, repair and verify wheels for selected steps"),
    "repair": ("repair", "auditwheel repair one wheel with a variant's runtime excludes"),
    "verify": ("verify", "inspect wheels and apply the verification rules"),
    "smoke": ("smoke", "install wheels in fresh environments and simulated images"),
    "publish": ("publish", "preflight the whole set and upload it idempotently"),
    "cibuildwheel-config": ("cibw", "print the cibuildwheel configuration of a variant"),
    "init": ("init", "write a starter matrix.yaml for a project"),
    "schema": ("", "print the JSON Schema of matrix.yaml (or --check the committed one)"),
}
# Commands that work without a matrix file, and one that never reads it (it writes one).
MATRIX_OPTIONAL = {"verify", "schema"}
NO_MATRIX = {"init"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        choice = re.search(r"invalid choice: '([^']*)'", message)
        if choice:
            close = difflib.get_close_matches(choice.group(1), list(COMMANDS), n=1, cutoff=0.6)
            message += f"; did you mean {close[0]!r}?" if close else ""
        msg = f"{self.prog}: {message}"
        raise UsageError(msg)


def _stage(module: str) -> ModuleType | None:
    try:
        return importlib.import_module(f"release.{module}")
    except ModuleNotFoundError as exc:
        if exc.name == f"release.{module}":
            return None
        raise


def _selected_command(argv: Sequence[str]) -> str | None:
    """The first word that names a command; only that stage's module is imported."""
    return next((word for word in argv if word in COMMANDS), None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with `command`, only that stage is imported and given its options."""
    parser = _Parser(prog="python -m release", description=__doc__)
    parser.add_argument("--matrix", default="matrix.yaml", help="the matrix file (default: %(default)s)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == "schema":
            p.add_argument("--check", action="store_true", help="fail if the committed schema drifted")
            p.add_argument("--write", action="store_true", help="rewrite release/matrix.schema.json")
            continue
        if command is not None and name != command:
            continue
        stage = _stage(module)
        if stage is None:
            p.set_defaults(placeholder=True)
        else:
            stage.add_arguments(p)
    return parser


def _schema_command(args: argparse.Namespace) -> int:
    from release import matrix as matrix_mod  # noqa: PLC0415 (start-up time: imported when needed)

    text = json.dumps(matrix_mod.schema(), indent=2) + "\n"
    target = matrix_mod.SCHEMA_FILE
    if args.write:
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}")
        return 0
    if args.check:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            msg = f"{target} is out of date with release/matrix.py: run `python -m release schema --write`"
            raise ReleaseError(msg)
        print(f"{target.name} is up to date")
        return 0
    sys.stdout.write(text)
    return 0


def dispatch(args: argparse.Namespace) -> int:
    if args.command == "schema":
        return _schema_command(args)
    module, _ = COMMANDS[args.command]
    stage = _stage(module)
    if stage is None:
        msg = f"`release {args.command}` is not implemented yet"
        raise NotImplementedYet(msg)
    path = Path(args.matrix)
    optional = args.command in MATRIX_OPTIONAL and not path.exists()
    loaded = None
    if not optional and args.command not in NO_MATRIX:
        from release import matrix as matrix_mod  # noqa: PLC0415 (start-up time: imported when needed)

        loaded = matrix_mod.load(path)
    result: int = stage.run(args, loaded)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    words = list(argv if argv is not None else sys.argv[1:])
    debug = "--debug" in words
    try:
        parser = build_parser(_selected_command(words))
        args, extra = parser.parse_known_args(words)
        if extra and not getattr(args, "placeholder", False):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        return dispatch(args)
    except ReleaseError as exc:
        if debug:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
