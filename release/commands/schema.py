"""`release schema`: print the JSON Schemas generated from the models (the matrix's, or with
`--verify-report` the verify report's, with `--backend` a backend file's), or check or rewrite
the committed ones (all three), the install scripts' runtime table generated from the backend
data (`scripts/runtimes.tsv`) and, in a checkout of the toolkit, the README's architecture table
generated from the layer map (`release/layers.py`) and its table of commands (`release/cli.py`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from release.cli import command_table
from release.config import backends as backends_mod
from release.config import matrix as matrix_mod
from release.config.backends import RUNTIME_TABLE, TOOLKIT_TABLE, load_backends, runtime_table, toolkit_table
from release.config.matrix import LoadedMatrix
from release.config.resources import toolkit_backends, toolkit_scripts
from release.errors import ReleaseError
from release.inspect import report
from release.layers import source_readme, with_architecture, with_section


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--verify-report", action="store_true", help="print the verify report's schema, not the matrix's"
    )
    parser.add_argument(
        "--backend", action="store_true", help="print the schema of packaging/backends/<name>.json files"
    )
    parser.add_argument("--check", action="store_true", help="fail if a committed schema drifted")
    parser.add_argument("--write", action="store_true", help="rewrite the committed schemas")


def _committed() -> list[tuple[Path, str, str]]:
    """(file, generated text, the model it comes from) for each committed schema."""
    readme = source_readme()
    generated_readme = (
        []
        if readme is None
        else [
            (
                readme,
                with_section(
                    with_architecture(readme.read_text(encoding="utf-8")), "commands", command_table()
                ),
                "release/layers.py, the package docstrings and release/cli.py's COMMANDS",
            )
        ]
    )
    return [
        (
            matrix_mod.SCHEMA_FILE,
            json.dumps(matrix_mod.schema(), indent=2) + "\n",
            "release/config/matrix.py",
        ),
        (report.SCHEMA_FILE, report.schema_text(), "release/inspect/report.py and the rules"),
        (backends_mod.SCHEMA_FILE, backends_mod.schema_text(), "release/config/backends.py"),
        (
            toolkit_scripts() / RUNTIME_TABLE,
            runtime_table(load_backends(toolkit_backends()).values()),
            "packaging/backends/*.json",
        ),
        (
            toolkit_scripts() / TOOLKIT_TABLE,
            toolkit_table(load_backends(toolkit_backends()).values()),
            "packaging/backends/*.json",
        ),
        *generated_readme,
    ]


def run(args: argparse.Namespace, loaded: LoadedMatrix | None) -> int:
    del loaded
    schemas = _committed()
    if args.write:
        for target, text, _source in schemas:
            current = target.read_text(encoding="utf-8") if target.exists() else None
            if current != text:
                target.write_text(text, encoding="utf-8")
            print(f"{'wrote' if current != text else 'unchanged'} {target}")
        return 0
    if args.check:
        stale = [
            f"{target} is out of date with {source}"
            for target, text, source in schemas
            if (target.read_text(encoding="utf-8") if target.exists() else "") != text
        ]
        if stale:
            raise ReleaseError("; ".join(stale) + ": run `release schema --write`")
        print(", ".join(target.name for target, _t, _s in schemas) + " are up to date")
        return 0
    shown = 1 if args.verify_report else 2 if args.backend else 0
    sys.stdout.write(schemas[shown][1])
    return 0
