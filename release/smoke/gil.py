"""Whether a free-threaded Python keeps the GIL off once the engine is imported.

CPython 3.13+ built with `--disable-gil` turns the GIL back on, with only a RuntimeWarning, when it
imports an extension module that does not declare `Py_mod_gil` (nanobind: `FREE_THREADED`;
pybind11: `py::mod_gil_not_used()`; Cython: `freethreading_compatible`). A test that sets
`PYTHON_GIL=0` or `PYTHON_GIL=1` hides that, so the probe runs without it (the smoke environment is
written whole, and the probe refuses to judge where the variable is set anyway) and reads
`sys._is_gil_enabled()` before and after the import.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from release.config.pythons import python
from release.plan.resolve import ResolvedVariant
from release.table import printable

_PROBE = """\
import json, os, sys
before = sys._is_gil_enabled()
import {name}
after = sys._is_gil_enabled()
print(json.dumps({{"python_gil": os.environ.get("PYTHON_GIL"), "before": before, "after": after}}))
"""


def gil_probe(import_name: str) -> str:
    """The `python -c` text that imports the engine and prints one JSON line about the GIL."""
    return _PROBE.format(name=import_name)


@dataclass(frozen=True)
class GilVerdict:
    ok: bool
    detail: str


def gil_verdict(output: str, *, needs_gil: bool) -> GilVerdict:
    """Judge the probe's last line. The GIL on after the import fails, unless the matrix declares
    that the engine needs it (`engine.needs_gil`): then it is reported and passes. No verdict (the
    import failed, no JSON, the GIL already on before the import) never reads as a pass."""
    lines = output.strip().splitlines()
    try:
        data = json.loads(lines[-1]) if lines else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), bool) for k in ("before", "after")):
        last = printable(lines[-1][:200]) if lines else ""
        return GilVerdict(False, f"the GIL probe printed no verdict (last line: {last!r})")
    if data.get("python_gil") is not None:
        said = printable(str(data["python_gil"]))
        return GilVerdict(
            False, f"PYTHON_GIL={said} is set: it decides the GIL for the module, nothing judged"
        )
    if data["before"]:
        msg = "the GIL is on before the import: not a free-threaded interpreter, nothing judged"
        return GilVerdict(False, msg)
    if not data["after"]:
        return GilVerdict(True, "sys._is_gil_enabled() is False after the import")
    if needs_gil:
        msg = "REPORTED: the import turns the GIL back on (engine.needs_gil: true declares it)"
        return GilVerdict(True, msg)
    return GilVerdict(
        False,
        "the import turned the GIL back on: an extension module does not declare free-threading support "
        "(Py_mod_gil; nanobind FREE_THREADED); fix the module, or declare engine.needs_gil: true",
    )


def check_gil(
    key: str,
    venv: Path,
    variant: ResolvedVariant,
    run: Callable[[Sequence[str]], Any],
    step: Callable[..., None],
) -> None:
    """Smoke's step for a free-threaded Python: the import keeps the GIL off (nothing for a GIL one).
    `run` and `step` are the smoke's own (`Smoke._run`, `Smoke._step`)."""
    if not python(key).free_threaded:
        return
    result = run([str(venv / "bin" / "python"), "-c", gil_probe(variant.import_name)])
    said = result.output if result.returncode == 0 else ""
    verdict = gil_verdict(said, needs_gil=variant.needs_gil)
    step("GIL stays off after import", result, verdict.ok, verdict.detail)
