"""This repository's sessions: the matrix's (from the toolkit, as any project gets them with
`release init`) and the toolkit's own tests, lint and benchmarks.

Sessions run in the interpreter that runs nox (`.venv/bin/nox` after `bash scripts/bootstrap.sh`);
none makes a venv. `RELEASE_MATRIX=path/to/matrix.yaml nox ...` drives them from another matrix;
`RELEASE_TEST_TIER=unit nox -s tests` runs the unit tier only; `RELEASE_TEST_WORKERS=N` runs the tests in
N pytest-xdist workers (0: one process).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))  # this checkout's toolkit, even where another copy is installed

from release import settings  # noqa: E402
from release.nox_sessions import register  # noqa: E402

register(ROOT / "matrix.yaml")

nox.options.sessions = ["plan", "lint", "tests"]
nox.options.default_venv_backend = "none"

TIERS = {
    "unit": ["tests/unit", "tests/hostile", "tests/corpus"],  # no process starts in any (seconds)
    "integration": ["tests/integration"],
    "all": ["tests"],
}


@nox.session
def tests(session: nox.Session) -> None:
    """Unit and integration tests (pass pytest arguments after --; RELEASE_TEST_TIER=unit narrows)."""
    tier = settings.text("RELEASE_TEST_TIER")
    if tier not in TIERS:
        session.error(f"RELEASE_TEST_TIER={tier!r}: one of {', '.join(TIERS)}")
    # RELEASE_TEST_WORKERS=N runs N pytest-xdist workers, each test file whole on one worker, in its
    # order (--dist loadfile: module fixtures made once, a file's tests never race each other;
    # loadgroup cannot regroup under pytest 9.2, whose node ids xdist 3.8 no longer rewrites);
    # 0 or unset: one process, as before.
    workers = settings.raw("RELEASE_TEST_WORKERS")
    if not workers.isdigit():
        session.error(f"RELEASE_TEST_WORKERS={workers!r}: a number of workers (0: no xdist)")
    # --no-loadscope-reorder: files go out in collection order, which puts the longest first
    # (tests/ci_time.py LONG_FILES); xdist's default order (most tests first) put them last.
    parallel = ["-n", workers, "--dist", "loadfile", "--no-loadscope-reorder"] if int(workers) > 0 else []
    # --durations: the slowest tests and fixture set-ups (images, builds) show at the end of every run;
    # tests/ci_time.py adds which shared fixture made which image or wheelhouse, in how many seconds.
    session.run(
        sys.executable, "-m", "pytest", "--durations=25", *parallel, *(session.posargs or TIERS[tier]),
        external=True,
    )  # fmt: skip


@nox.session
def lint(session: nox.Session) -> None:
    """ruff, mypy --strict on release/, the drift check of what is generated (the schemas,
    scripts/runtimes.tsv, the README's tables) and the workflows' (the committed .github/workflows
    are the templates rendered for this repository)."""
    session.run(sys.executable, "-m", "ruff", "check", ".", external=True)
    session.run(sys.executable, "-m", "mypy", "--strict", "release", external=True)
    session.run(sys.executable, "-m", "release", "schema", "--check", external=True)
    session.run(sys.executable, "-m", "release", "workflows", "--check", external=True)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks that print ratios measured in one run (build scaling, verify vs auditwheel)."""
    session.run(sys.executable, str(ROOT / "benchmarks" / "run.py"), *session.posargs, external=True)
