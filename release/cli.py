"""`release` (or `python -m release`): one parser, one place that turns `ReleaseError` into an exit code.

Each command is a module of `release.commands` with `add_arguments(parser)` and `run(args, loaded)`;
only the chosen command's module is imported.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import signal
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from release import __version__, flags, interrupts, settings, table
from release.errors import EXIT_CODES, ReleaseError, UsageError, os_error_line

# command -> (module in release.commands, help).
COMMANDS: dict[str, tuple[str, str]] = {
    "plan": (
        "plan",
        "expand the matrix into build (or smoke) steps and where each runs here, or a workflow's plan",
    ),
    "build": ("build", "build, repair and verify wheels for selected steps"),
    "repair": ("repair", "auditwheel repair one wheel with a variant's (or explicit) excludes"),
    "verify": ("verify", "inspect wheels and apply the rules (a wheel beside its intact report: a hash)"),
    "smoke": ("smoke", "install wheels in fresh environments and simulated images"),
    "hardware": ("hardware", "one leg of the hardware tier: verified wheel, scripts, device selftest"),
    "publish": ("publish", "preflight the whole set and upload it idempotently"),
    "variants": ("variants", "PEP 825 variant wheels of one distribution from the per-variant wheels"),
    "check-resolution": ("check_resolution", "serve the release set locally; check what pip and uv install"),
    "release-checks": ("release_checks", "release-day checks: tag, files, sizes, index names, publishers"),
    "verify-release": ("verify_release", "re-check a release (a directory, the index) against its manifest"),
    "reproduce": ("reproduce", "rebuild wheels from a release manifest; compare them byte for byte"),
    "images": ("images", "read the serving images' facts (Python, glibc, runtime) and check the matrix"),
    "ready": ("ready", "what a tag push needs from outside the code (variables, environments, pins)"),
    "rehearse": ("rehearse", "run what the release workflow runs for a tag, here, in order"),
    "github-release": ("github_release", "attach files to the tag's GitHub Release, never replacing one"),
    "cibuildwheel-config": ("cibuildwheel_config", "print the cibuildwheel configuration of a variant"),
    "init": ("init", "set up a project: matrix.yaml, noxfile.py and (--ci github) its workflows"),
    "toolchain": ("toolchain", "install a backend's toolchain or CPython versions; check what a build needs"),
    "schema": ("schema", "print a JSON Schema; --check or --write every generated file (schemas, tables)"),
    "workflows": ("workflows", "render the GitHub workflows from the templates (--check, --write)"),
}
# Commands that work without a matrix file, and ones that never read it.
MATRIX_OPTIONAL = {"verify", "repair", "toolchain"}
NO_MATRIX = {"init", "schema", "verify-release", "workflows"}


COMMAND_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("everyday", ("plan", "build", "repair", "verify", "smoke", "publish")),
    (
        "release day",
        ("release-checks", "verify-release", "github-release", "ready", "reproduce", "check-resolution"),
    ),
    (
        "maintainers",
        ("init", "schema", "workflows", "rehearse", "images", "variants", "hardware", "toolchain",
         "cibuildwheel-config"),
    ),
)  # fmt: skip
"""Who reaches for each command, for the README's table: every command of `COMMANDS` in one group."""


def command_table() -> str:
    """The README's table of commands, grouped by who uses them, and its exit codes, generated from
    `COMMAND_GROUPS`, `COMMANDS` and `EXIT_CODES` (`release schema --write`)."""
    grouped = [name for _group, names in COMMAND_GROUPS for name in names]
    if sorted(grouped) != sorted(COMMANDS):
        msg = f"release/cli.py: COMMAND_GROUPS must name every command of COMMANDS once (it has {grouped})"
        raise ReleaseError(msg)
    rows = ["| | command | what it does |", "|---|---|---|"]
    for group, names in COMMAND_GROUPS:
        rows += [
            f"| {group if index == 0 else ''} | `release {name}` | {COMMANDS[name][1]} |"
            for index, name in enumerate(names)
        ]
    codes = ", ".join(f"{code} {what}" for code, what in EXIT_CODES)
    return "\n".join(rows) + f"\n\nExit codes (also in `--help`): {codes}.\n"


def program_name(argv0: str | None = None) -> str:
    """How the user invoked us: `release` for the console script, `python -m release` otherwise."""
    name = Path(argv0 if argv0 is not None else sys.argv[0]).name
    return "python -m release" if name in ("__main__.py", "", "-c") or name.startswith("python") else name


def _epilog() -> str:
    return "exit codes: " + ", ".join(f"{code} {what}" for code, what in EXIT_CODES)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        choice = re.search(r"invalid choice: '([^']*)'", message)
        if choice:
            close = difflib.get_close_matches(choice.group(1), list(COMMANDS), n=1, cutoff=0.6)
            message += f"; did you mean {close[0]!r}?" if close else ""
        msg = f"{self.prog}: {message}"
        raise UsageError(msg)


def command_module(command: str) -> ModuleType:
    return importlib.import_module(f"release.commands.{COMMANDS[command][0]}")


def _selected_command(argv: Sequence[str]) -> str | None:
    """The first word that names a command; only that command's module is imported."""
    return next((word for word in argv if word in COMMANDS), None)


def build_parser(command: str | None = None, prog: str | None = None) -> argparse.ArgumentParser:
    """The parser; with `command`, only that command's module is imported and given its options
    ('': none is, as for `release --help`, which lists the commands only); None: every command's."""
    parser = _Parser(
        prog=prog or program_name(),
        description=__doc__.splitlines()[0] if __doc__ else None,
        epilog=_epilog() + "\n\nenvironment (docs/settings.md):\n" + "\n".join(settings.help_lines()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    flags.matrix(parser)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, (_module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text, epilog=_epilog())
        # Accepted after the command too: `release plan --matrix other.yaml`.
        flags.matrix(p, after_command=True)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
        if command is not None and name != command:
            continue
        command_module(name).add_arguments(p)
    return parser


def dispatch(args: argparse.Namespace) -> int:
    module = command_module(args.command)
    path = Path(args.matrix)
    locate = getattr(module, "matrix_path", None)  # a command that finds its matrix elsewhere too
    if locate is not None:
        path = locate(args, path)
    loaded = None
    needs = getattr(module, "needs_matrix", None)
    wanted = args.command not in NO_MATRIX and (
        args.command not in MATRIX_OPTIONAL or path.exists() or (needs is not None and needs(args))
    )
    if wanted:
        from release.config import matrix as matrix_mod  # noqa: PLC0415 (start-up time: imported when needed)

        loaded = matrix_mod.load(path)
    result: int = module.run(args, loaded)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    words = list(argv if argv is not None else sys.argv[1:])
    debug = "--debug" in words
    try:
        with interrupts.handled():
            parser = build_parser(_selected_command(words) or "")
            args = parser.parse_args(words)
            code = dispatch(args)
            sys.stdout.flush()  # a closed stdout fails here, inside the try, not at exit
            return code
    except ReleaseError as exc:
        if debug:
            traceback.print_exc()
        shown = "\n".join(table.printable(line) for line in str(exc).split("\n"))  # untrusted text, escaped
        print(f"error: {shown}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        _silence_stdout()
        print("error: stdout was closed before the output was written (EPIPE)", file=sys.stderr)
        return 1
    except OSError as exc:
        if debug:
            traceback.print_exc()
        print(f"error: {os_error_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, interrupts.Interrupted) else signal.SIGINT
        print("terminated" if signum == signal.SIGTERM else "interrupted", file=sys.stderr)
        return 128 + signum


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush cannot fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
