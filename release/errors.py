"""One exception hierarchy for the toolkit; `release.cli.main` is the one place that catches it.

Each class carries its own exit code so scripts and CI can tell failures apart.
"""

from __future__ import annotations

import errno
import os
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
    (9, "not reproducible"),
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


class ReproduceError(ReleaseError):
    """A rebuild from a release manifest did not give the manifest's bytes, or cannot be made from
    this checkout."""

    exit_code = 9


_OS_HINTS = {
    errno.ENOSPC: "free space there or write elsewhere (e.g. --wheelhouse)",
    errno.EDQUOT: "the disk quota is used up: free space there or write elsewhere",
    errno.EROFS: "write elsewhere (e.g. --wheelhouse, or a writable report path)",
    errno.EFBIG: "a file size limit (ulimit -f) stopped the write",
    errno.EACCES: "check the permissions of that path",
}


def os_error_line(exc: OSError) -> str:
    """One line for a failed system call: the path, what went wrong, and what to do about it
    (`/wheelhouse/rocm: no space left on device (ENOSPC): free space there or write elsewhere`)."""
    code = exc.errno if isinstance(exc.errno, int) else None
    what = (exc.strerror or (os.strerror(code) if code else str(exc))).strip()
    what = what[:1].lower() + what[1:]
    name = errno.errorcode.get(code, "") if code else ""
    where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
    line = f"{where}: {what}" if where else what
    if name:
        line += f" ({name})"
    hint = _OS_HINTS.get(code) if code else None
    return f"{line}: {hint}" if hint else line
