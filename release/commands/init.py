"""`release init`: set up a project's repository for releases.

In the repository (the directory of `--output`, `.` by default) it writes `matrix.yaml` (see
`release.init.scaffold`), `.release/matrix.schema.json` (what the matrix's first line points
editors at), a thin `noxfile.py` whose sessions come from the installed toolkit, the variant guard
at the top of the import package's `__init__.py` (see `release.init.guard`), and with `--ci github`
the release, CI and hardware workflows, pinned to this toolkit's version. Nothing that exists is
overwritten without `--force`, and nothing is written unless everything can be.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path

from release import requirement
from release.atomic import write_project_files
from release.config.backends import Backend, load_backends
from release.config.matrix import LoadedMatrix, loads
from release.config.resources import default_backends_dir
from release.errors import MatrixError, UsageError
from release.init import repository
from release.init.guard import guard_code, planned_guard
from release.init.scaffold import (
    DEFAULT_FLOOR,
    check_output,
    distribution_name,
    family_name,
    make_plan,
    parse_variants,
    render,
)
from release.init.scaffold import (
    Plan as ScaffoldPlan,
)
from release.init.scan import Project, policy_libraries, read_project, read_wheels
from release.wheel.files import read_bounded, reason


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
    add(
        "--output",
        type=Path,
        default=Path("matrix.yaml"),
        help="the matrix to write; its directory is the repository root (default: %(default)s)",
    )
    add("--force", action="store_true", help="overwrite files that exist (the matrix, the workflows)")
    add(
        "--ci",
        choices=repository.CI_SYSTEMS,
        help="also write the CI workflows (release, ci, hardware) for this CI system",
    )
    add(
        "--no-guard",
        action="store_true",
        help="print the variant guard instead of writing it into the import package's __init__.py",
    )


def run(args: argparse.Namespace, loaded: LoadedMatrix | None) -> int:
    del loaded
    output: Path = args.output
    check_output(output, force=args.force)
    project, plan, text, wheels_read = _scaffold(args, output)
    files, notes = _repository_files(output, text, ci=args.ci, force=args.force)
    guard, guard_file = _guard(plan.project, plan.variants, print_only=args.no_guard)
    root = output.resolve().parent
    guarded = [] if guard_file is None else [(*guard_file, project.path)]
    write_project_files([*((path, content, root) for path, content in files.items()), *guarded])
    imports = plan.project.import_name
    print(f"wrote {output}: {_variants_text(plan.variants)} of {project.name} (import {imports})")
    print(f"  python: {', '.join(plan.pythons)}; scripts: {', '.join(plan.scripts) or 'none'}")
    print(
        f"  system libraries: {', '.join(plan.system_libraries) or 'none'}"
        + ("" if wheels_read else " (no --wheel given: none read)")
    )
    for path in files:
        if path != output:
            print(f"wrote {path}")
    if not project.readme:
        notes.append(
            f"note: {args.path / 'pyproject.toml'} has no `readme`: publishing checks wheels with "
            "`twine check --strict`, which refuses a wheel without a long description "
            '(add readme = "README.md" to [project])'
        )
    for line in [*([guard] if guard else []), *notes]:
        print(line)
    if args.ci:
        print(f"the workflows install {requirement()}: to upgrade, rerun with a newer toolkit and --force")
    first, python = next(iter(plan.variants)), plan.pythons[0]
    print(
        f"next: fill in the `yours:` lines of {output.name}, check them with `release plan`, then "
        f"`nox -s build_{first}-{python} smoke_{first}-{python}`"
    )
    return 0


def _scaffold(args: argparse.Namespace, output: Path) -> tuple[Project, ScaffoldPlan, str, bool]:
    """The project read, the starter matrix planned and rendered (and checked to load), and
    whether any wheel was read."""
    project_dir: Path = args.path
    if not project_dir.is_dir():
        msg = f"{project_dir}: no such project directory"
        raise UsageError(msg)
    backends = load_backends(default_backends_dir(output))
    _check_project_files(project_dir)
    project = read_project(project_dir)
    variants = parse_variants(args.variants, backends)
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
    return project, plan, text, bool(facts.names)


def _repository_files(
    output: Path, matrix_text: str, *, ci: str | None, force: bool
) -> tuple[dict[Path, str], list[str]]:
    """Every file to write (path -> text) and notes for the user; refuses before anything is written."""
    root = output.resolve().parent
    files = {output: matrix_text, root / repository.SCHEMA_PATH: repository.schema_text()}
    notes: list[str] = []
    noxfile = root / "noxfile.py"
    if not os.path.lexists(noxfile):
        files[noxfile] = repository.noxfile_text()
    elif not repository.is_toolkit_noxfile(_project_text(noxfile).decode("utf-8", "replace")):
        notes.append(
            f"{noxfile} exists and is kept: add the toolkit's sessions to it with\n"
            '    from release.nox_sessions import register\n    register("matrix.yaml")'
        )
    gitignore = root / ".gitignore"
    current = _project_text(gitignore).decode("utf-8", "replace") if os.path.lexists(gitignore) else ""
    ignored = repository.gitignore_text(current)
    if ignored is not None:
        files[gitignore] = ignored
    if ci:
        workflows = repository.workflow_files(root)
        existing = [p for p in workflows if os.path.lexists(p)]
        if existing and not force:  # the project's own CI: written beside it, never over it
            workflows = repository.workflows_beside(workflows)
            taken = [str(p) for p in workflows if os.path.lexists(p)]
            if taken:
                msg = f"{', '.join(taken)} already exist: pass --force to overwrite them"
                raise UsageError(msg)
            notes.append(repository.merge_note(existing, list(workflows)))
        files.update(workflows)
    return files, notes


MAX_PROJECT_FILE = 4 << 20
"""The largest project file init reads (pyproject.toml, a CMake file, the noxfile, .gitignore)."""


def _check_project_files(project_dir: Path) -> None:
    """The files `release.init.scan` reads by name, held to the one reader's rules first: regular
    (a FIFO or a link to a device never blocks), bounded, UTF-8; each refusal one line."""
    pyproject = project_dir / "pyproject.toml"
    try:
        if os.path.lexists(pyproject):  # (a missing one: read_project says what init needs)
            _project_text(pyproject).decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = f"{pyproject}: cannot read it ({reason(exc)}); nothing was written"
        raise UsageError(msg) from None
    cmake = [project_dir / "CMakeLists.txt", *sorted((project_dir / "cmake").glob("*.cmake"))]
    for file in cmake:
        if os.path.lexists(file):
            _project_text(file)


def _project_text(path: Path) -> bytes:
    """A project file init reads before it writes: regular, bounded, or one line."""
    try:
        return read_bounded(path, MAX_PROJECT_FILE)
    except OSError as exc:
        msg = f"{path}: cannot read it ({reason(exc)}); nothing was written"
        raise UsageError(msg) from None


def _guard(
    project: Project, variants: Mapping[str, Backend], *, print_only: bool
) -> tuple[str | None, tuple[Path, str] | None]:
    """The guard that keeps two variants from sharing the import package and, where a backend has
    driver libraries, says a missing GPU driver in a sentence: (what to print, the
    `__init__.py` to write and its new text, or None), decided before anything is written."""
    drivers = {
        soname: (backend.driver_name, backend.driver_help(soname))
        for backend in variants.values()
        for soname in backend.driver_sonames
    }
    runtimes = {
        soname: (backend.releases_providing(soname), backend.runtime_help(soname), places)
        for backend in variants.values()
        if backend.runtime_places
        for soname in dict.fromkeys(s for names in backend.runtime_sonames.values() for s in names)
        for places in [[p.as_data() for p in backend.runtime_places]]
    }
    if len(variants) < 2 and not drivers and not runtimes:
        return None, None
    if project.variant_package is not None:  # no two variants share a package: nothing to guard
        packages = ", ".join(project.variant_package.import_name(v) for v in variants)
        return f"no variant guard: each variant ships its own import package ({packages})", None
    names = [distribution_name(family_name(project), v, variants) for v in variants]
    block = guard_code(project.import_name, names, drivers, runtimes)
    where = project.package_dir
    if print_only or where is None:
        place = f"{where / '__init__.py'}" if where else f"the `{project.import_name}` package's __init__.py"
        return (
            f"variant guard: put this at the top of {place} (release verify's variant-conflict rule "
            f"fails wheels without it):\n{block}"
        ), None
    init_file = where / "__init__.py"
    updated, said = planned_guard(init_file, project.import_name, names, drivers, runtimes)
    return said, None if updated is None else (init_file, updated)


def _variants_text(variants: Mapping[str, Backend]) -> str:
    return f"{len(variants)} variant(s) ({', '.join(variants)})"
