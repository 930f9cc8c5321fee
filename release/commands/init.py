"""`release init`: write a starter matrix.yaml for a project (see `release.init.scaffold`)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from release.config.backends import Backend, load_backends
from release.config.matrix import (
    LoadedMatrix,
    default_backends_dir,
    loads,
)
from release.errors import MatrixError, UsageError
from release.init.scaffold import DEFAULT_FLOOR, check_output, make_plan, parse_variants, render
from release.init.scan import policy_libraries, read_project, read_wheels


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("path", nargs="?", type=Path, default=Path(), metavar="PATH", help="the project (default: .)")
    add("--variants", help="backends to make variants of, comma-separated (default: every known backend)")
    add(
        "--wheel",
        action="append",
        type=Path,
        default=[],
        help="a wheel built from the project, before repair: its scripts and system libraries are read "
        "(repeatable)",
    )
    add("--import-name", help="the top-level import package (default: found in the project)")
    add("--output", type=Path, default=Path("matrix.yaml"), help="file to write (default: %(default)s)")
    add("--force", action="store_true", help="overwrite the output file if it exists")


def run(args: argparse.Namespace, loaded: LoadedMatrix | None) -> int:
    output: Path = args.output
    check_output(output, force=args.force)
    project_dir: Path = args.path
    if not project_dir.is_dir():
        msg = f"{project_dir}: no such project directory"
        raise UsageError(msg)
    backends = load_backends(default_backends_dir(output))
    project = read_project(project_dir)
    variants = parse_variants(args.variants, list(backends))
    for wheel in args.wheel:
        if not wheel.is_file():
            msg = f"--wheel {wheel}: no such file"
            raise UsageError(msg)
    facts = read_wheels(args.wheel)
    plan = make_plan(
        project,
        output=output,
        backends=backends,
        variants=variants,
        wheels=facts,
        import_name=args.import_name,
        policy=policy_libraries(DEFAULT_FLOOR),
    )
    text = render(plan)
    try:
        loads(text, path=output.resolve())
    except MatrixError as exc:  # a bug of init, never the user's: say so plainly
        msg = f"init produced a matrix that does not load (please report this):\n{exc}"
        raise UsageError(msg) from None
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    print(f"wrote {output}: {_variants_text(plan.variants)} of {project.name} (import {project.import_name})")
    print(f"  python: {', '.join(plan.pythons)}; scripts: {', '.join(plan.scripts) or 'none'}")
    print(
        f"  system libraries: {', '.join(plan.system_libraries) or 'none'}"
        + ("" if facts.names else " (no --wheel given: none read)")
    )
    print(f"next: fill in the `yours:` lines, then `python -m release --matrix {output} plan`")
    return 0


def _variants_text(variants: Mapping[str, Backend]) -> str:
    return f"{len(variants)} variant(s) ({', '.join(variants)})"
