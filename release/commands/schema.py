"""`release schema`: print the JSON Schemas generated from the models, or check the committed ones."""

from __future__ import annotations

import argparse
import json
import sys

from release.config import matrix as matrix_mod
from release.config.matrix import LoadedMatrix
from release.errors import ReleaseError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help="fail if the committed schema drifted")
    parser.add_argument("--write", action="store_true", help="rewrite the committed schema")


def run(args: argparse.Namespace, loaded: LoadedMatrix | None) -> int:
    del loaded
    text = json.dumps(matrix_mod.schema(), indent=2) + "\n"
    target = matrix_mod.SCHEMA_FILE
    if args.write:
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}")
        return 0
    if args.check:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            msg = f"{target} is out of date with release/config/matrix.py: run `release schema --write`"
            raise ReleaseError(msg)
        print(f"{target.name} is up to date")
        return 0
    sys.stdout.write(text)
    return 0
