"""One exception hierarchy for the toolkit; `release.cli.main` is the one place that catches it.

Each class carries its own exit code so scripts and CI can tell failures apart.
"""

from __future__ import annotations

from dataclasses import dataclass

EXIT_CODES = (
    (1, "error"),
    (2, "usage"),
    (3, "invalid matrix"),
    (4, "missing toolchain"),
    (5, "build"),
    (6, "verification"),
    (7, "smoke"),
    (8, "publish"),
)
"""Every exit code the CLI uses, for `--help` (each class below carries its own)."""


class ReleaseError(Exception):
    """Base of every error a user can act on; printed without a traceback."""

    exit_code = 1


class UsageError(ReleaseError):
    """The command line asked for something that does not exist."""

    exit_code = 2


@dataclass(frozen=True)
class Problem:
    """One located problem in a configuration file."""

    file: str
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        key = f" {self.key}:" if self.key else ""
        return f"{where}:{key} {self.message}"


class MatrixError(ReleaseError):
    """`matrix.yaml` (or a data file in `packaging/`) is invalid; lists every problem found."""

    exit_code = 3

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in problems))


class ToolchainError(ReleaseError):
    """A compiler, GPU toolkit or helper tool is missing or too old."""

    exit_code = 4


class BuildError(ReleaseError):
    """Compiling, staging or repairing a wheel failed."""

    exit_code = 5


class VerifyError(ReleaseError):
    """A wheel broke one or more verification rules."""

    exit_code = 6


class SmokeError(ReleaseError):
    """A wheel failed to install or run in a fresh environment or image."""

    exit_code = 7


class PublishError(ReleaseError):
    """Preflight or upload failed; nothing more was uploaded."""

    exit_code = 8
