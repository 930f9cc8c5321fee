"""nox sessions generated from a matrix, for any repository: a noxfile calls `register`.

    import nox  # noqa: F401 (nox loads this file)
    from release.nox_sessions import register
    register("matrix.yaml")

Sessions (every one runs the `release` command of the interpreter that runs nox, where the toolkit
is installed; none makes a venv of its own):

- `plan`: the build steps the matrix expands to;
- `build_<variant>`: every Python of the variant in parallel behind one table (`release build`);
  `build_<variant>-3.12`: one Python;
- `smoke_<variant>` and `smoke_<variant>-3.12`: the wheels in fresh venvs and the variant's images;
- `verify`: every wheel in `wheelhouse/`; `publish`: preflight and upload (`-- --tag vX.Y.Z`);
- `rehearse`: what the release workflow runs for a tag, here and in order (`-- --tag vX.Y.Z`).

A per-Python session whose interpreter is missing (or has no headers) is skipped on a local run,
and nox ends with a table of what was skipped and the command that gets it; with `CI=true` it
fails instead. `RELEASE_MATRIX=path/to/matrix.yaml nox ...` drives the sessions from another matrix.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Callable
from pathlib import Path

import nox

from release import settings
from release.config import matrix as matrix_mod
from release.machine.interpreters import Interpreter, interpreter, missing_table
from release.settings import in_ci

_skipped: list[Interpreter] = []


def _print_skipped() -> None:
    if _skipped:
        print("\nskipped for a missing Python (CI=true fails instead):", file=sys.stderr)
        print(missing_table(list({i.version: i for i in _skipped}.values())), file=sys.stderr)


def _require_python(session: nox.Session, version: str) -> None:
    found = interpreter(version)
    if found.usable:
        return
    if version.endswith("t"):  # a free-threaded CPython: no source reaches this machine
        session.skip(f"GitHub-only: Python {version} (no free-threaded CPython on this machine)")
    line = f"{found.problem}: `{found.fix}`"
    if in_ci():
        session.error(line)
    if not _skipped:
        atexit.register(_print_skipped)
    _skipped.append(found)
    session.skip(line)


def matrix_file(matrix_path: str | os.PathLike[str] | None = None) -> Path:
    """`RELEASE_MATRIX`, else the given path, else `matrix.yaml` (nox runs in the noxfile's directory)."""
    return (settings.path("RELEASE_MATRIX") or Path(matrix_path or "matrix.yaml")).resolve()


def register(matrix_path: str | os.PathLike[str] | None = None) -> matrix_mod.LoadedMatrix:
    """Declare the matrix's sessions in the noxfile being loaded; returns the loaded matrix."""
    path = matrix_file(matrix_path)
    loaded = matrix_mod.load(path)
    toolkit = [sys.executable, "-m", "release", "--matrix", str(path)]

    def command(session: nox.Session, *args: str) -> None:
        posargs = list(session.posargs)
        if args[:1] == ("smoke",):
            posargs, dropped = smoke_posargs(posargs)
            if dropped:
                session.log(f"smoke: {' '.join(dropped)} placed the build; smoke runs where the matrix says")
        session.run(*toolkit, *args, *posargs, external=True)

    def declare(name: str, doc: str, body: Callable[[nox.Session], None]) -> None:
        body.__doc__ = doc
        nox.session(name=name, venv_backend="none")(body)

    declare("plan", "Print the build steps the matrix expands to.", _plain(command, "plan"))
    for variant in loaded.matrix.variants:
        for stage, what in (("build", "Build, repair and verify"), ("smoke", "Smoke-test")):
            declare(
                f"{stage}_{variant}",
                f"{what} the {variant} wheels for every Python.",
                _stage(command, stage, variant, None),
            )
            for python in loaded.matrix.python:
                declare(
                    f"{stage}_{variant}-{python}",
                    f"{what} the {variant} wheel for Python {python}.",
                    _stage(command, stage, variant, python),
                )

    def verify(session: nox.Session) -> None:
        wheelhouse = loaded.root / "wheelhouse"
        wheels = session.posargs or sorted(str(p) for p in wheelhouse.glob("*/*.whl"))
        if not wheels:
            session.error(f"no wheels in {wheelhouse}: run a build_<variant> session first")
        session.run(*toolkit, "verify", *wheels, external=True)

    declare("verify", "Verify every wheel in wheelhouse/ against the matrix.", verify)
    declare(
        "publish",
        "Preflight the whole wheelhouse and upload it (pass --tag, --repository, --dry-run).",
        _plain(command, "publish"),
    )
    declare(
        "rehearse",
        "Run release.yml's jobs for a tag here, in order, as the runner user (-- --tag vX.Y.Z).",
        _plain(command, "rehearse"),
    )
    return loaded


def _plain(command: Callable[..., None], *args: str) -> Callable[[nox.Session], None]:
    def body(session: nox.Session) -> None:
        command(session, *args)

    return body


BUILD_PLACEMENT = {"--container": 0, "--release-image": 0, "--allow-toolkit-mismatch": 0, "--jobs": 1,
                   "--lock-wait": 1}  # fmt: skip
"""`release build`'s placement flags (and how many values each takes): `nox -s build_cpu-3.12
smoke_cpu-3.12 -- --container` hands them to both sessions, and the smoke session leaves them out."""


def smoke_posargs(posargs: list[str]) -> tuple[list[str], list[str]]:
    """The arguments a smoke session passes on, and the build-placement flags it leaves out."""
    kept: list[str] = []
    dropped: list[str] = []
    index = 0
    while index < len(posargs):
        word = posargs[index]
        flag = word.split("=", 1)[0]
        if flag in BUILD_PLACEMENT:
            width = 0 if "=" in word else BUILD_PLACEMENT[flag]
            dropped += posargs[index : index + 1 + width]
            index += 1 + width
            continue
        kept.append(word)
        index += 1
    return kept, dropped


def _stage(
    command: Callable[..., None], stage: str, variant: str, python: str | None
) -> Callable[[nox.Session], None]:
    def body(session: nox.Session) -> None:
        if python is None:
            command(session, stage, "--variant", variant)
            return
        _require_python(session, python)
        command(session, stage, "--variant", variant, "--python", python)

    return body
