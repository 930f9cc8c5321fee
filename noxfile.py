"""Sessions generated from matrix.yaml; each one calls `python -m release`.

Sessions run in the interpreter that runs nox (the toolkit is installed there by the README's
set-up command); the Python a build targets is the session's parameter, found by
`release.build.interpreters` on PATH or in pyenv's version directories, so nothing needs exporting.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from release.build.interpreters import interpreter_dirs  # noqa: E402
from release.config import matrix as _matrix  # noqa: E402

MATRIX_FILE = os.environ.get("RELEASE_MATRIX", str(ROOT / "matrix.yaml"))
MATRIX = _matrix.load(MATRIX_FILE).matrix
PYTHONS = list(MATRIX.python)

# Make `python3.X` resolvable for nox and for every tool it starts (pyenv shims alone fail).
os.environ["PATH"] = os.pathsep.join([*interpreter_dirs(MATRIX.python), os.environ.get("PATH", "")])

nox.options.sessions = ["plan", "lint", "tests"]
nox.options.error_on_missing_interpreters = True
nox.options.default_venv_backend = "none"

# Per-Python sessions need a real interpreter so nox parametrizes them and fails on a missing
# one; their venv stays empty (the toolkit keeps its own cached builder environments).
PER_PYTHON: dict[str, object] = {"venv_backend": "venv", "venv_params": ["--without-pip"]}

TOOLKIT = [sys.executable, "-m", "release", "--matrix", MATRIX_FILE]


@nox.session
def plan(session: nox.Session) -> None:
    """Print the build steps the matrix expands to."""
    session.run(*TOOLKIT, "plan", *session.posargs, external=True)


def _make_build(variant: str) -> None:
    @nox.session(name=f"build_{variant}", python=PYTHONS, **PER_PYTHON)
    def build(session: nox.Session) -> None:
        session.run(
            *TOOLKIT,
            "build",
            "--variant",
            variant,
            "--python",
            str(session.python),
            *session.posargs,
            external=True,
        )

    build.__doc__ = f"Build, repair and verify the {variant} wheel for one Python."


def _make_smoke(variant: str) -> None:
    @nox.session(name=f"smoke_{variant}", python=PYTHONS, **PER_PYTHON)
    def smoke(session: nox.Session) -> None:
        session.run(
            *TOOLKIT,
            "smoke",
            "--variant",
            variant,
            "--python",
            str(session.python),
            *session.posargs,
            external=True,
        )

    smoke.__doc__ = f"Install the {variant} wheel in fresh environments and images; run the selftest."


for _variant in MATRIX.variants:
    _make_build(_variant)
    _make_smoke(_variant)


@nox.session
def verify(session: nox.Session) -> None:
    """Verify every wheel in wheelhouse/ against the matrix."""
    wheelhouse = Path(MATRIX_FILE).resolve().parent / "wheelhouse"
    wheels = session.posargs or sorted(str(p) for p in wheelhouse.glob("*/*.whl"))
    if not wheels:
        session.error("no wheels in wheelhouse/: run a build_<variant> session first")
    session.run(*TOOLKIT, "verify", *wheels, external=True)


@nox.session
def publish(session: nox.Session) -> None:
    """Preflight the whole wheelhouse and upload it (pass --tag, --repository, --dry-run)."""
    session.run(*TOOLKIT, "publish", *session.posargs, external=True)


@nox.session
def tests(session: nox.Session) -> None:
    """Unit and integration tests (pass pytest arguments after --)."""
    session.run(sys.executable, "-m", "pytest", *(session.posargs or ["tests"]), external=True)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff and mypy --strict on release/."""
    session.run(sys.executable, "-m", "ruff", "check", ".", external=True)
    session.run(sys.executable, "-m", "mypy", "--strict", "release", external=True)
    session.run(*TOOLKIT, "schema", "--check", external=True)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks that print ratios measured in one run (build scaling, verify vs auditwheel)."""
    session.run(sys.executable, str(ROOT / "benchmarks" / "run.py"), *session.posargs, external=True)
