"""Fresh virtual environments without ensurepip where the interpreter's own pip can fill them.

`python -m venv DIR` runs ensurepip, which unpacks and byte-compiles pip into every new venv: 4 to 6 s
of CPU each time, for a venv that often lives for one install. `FRESH_VENV` makes the same venv
(symlinks, as the command makes them on POSIX) without it when the interpreter has pip 22.3 or newer,
whose `--python` option installs into the venv while pip runs under the venv's own interpreter: the
wheel chosen, the files placed and the console scripts written are the ones the venv's own pip would
choose, place and write. The argv of FRESH_VENV: DIR, then `seed` to put pip in the venv whatever
the interpreter has (a later command runs pip from the venv). It prints "pip X" when the
interpreter's pip installs, "seeded" when pip is in the venv.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

FRESH_VENV = """
import sys, venv
try:
    import pip
    version = tuple(int(part) for part in pip.__version__.split(".")[:2])
except (ImportError, ValueError):
    version = ()
seed = sys.argv[2:] == ["seed"] or version < (22, 3)
venv.EnvBuilder(symlinks=True, with_pip=seed).create(sys.argv[1])
print("seeded" if seed else "pip " + pip.__version__)
"""


def fresh_venv_argv(interpreter: Path | str, venv: Path, *, seed: bool = False) -> list[str]:
    """The command that makes `venv` with `interpreter` (FRESH_VENV)."""
    return [str(interpreter), "-c", FRESH_VENV, str(venv), *(["seed"] if seed else [])]


def interpreter_installs(printed: str) -> bool:
    """Whether FRESH_VENV's output says the interpreter's pip installs (the venv has no pip)."""
    return printed.strip().startswith("pip ")


def pip_argv(interpreter: Path | str, venv: Path, *, seeded: bool) -> list[str]:
    """How pip runs for `venv`: its own (`seeded`), or the interpreter's aimed at it (`--python`)."""
    python = str(venv / "bin" / "python")
    return [python, "-m", "pip"] if seeded else [str(interpreter), "-m", "pip", "--python", python]


def runs_pip(command: Sequence[str]) -> bool:
    """Whether a command runs pip (`pip ...`, `{python} -m pip ...`): its venv needs pip in it."""
    return any(part in ("pip", "pip3") or part.startswith("pip3.") for part in command)
