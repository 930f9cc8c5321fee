"""Auditing shared objects against Python's limited API with abi3audit (PyPA).

abi3audit reads files, so each shared object of the wheel is first copied into a private scratch
directory: a sparse copy of its headers and symbol tables, written from what verify's one pass
kept (`release.inspect.symboltables`; the whole member streamed again, within the wheel's
inflation budget, where those were too large to keep). abi3audit then runs once over all of them,
as `python -m abi3audit` with its JSON report, in a process of its own under an address-space
limit and a deadline. Members with the same bytes are audited once.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from release import process
from release.errors import ToolchainError, VerifyError
from release.inspect.contents import WheelContents
from release.inspect.symboltables import python_symbols
from release.wheel.files import read_json

DEADLINE = 300.0
"""Seconds abi3audit may take over one wheel's shared objects, all together (a 535 MB wheel of 13
shared objects takes about 20 s)."""
REPORT_LIMIT = 64 << 20
"""Bytes of abi3audit's JSON report read at most (a few KB a shared object)."""
MEMORY = 4 << 30
"""Address space abi3audit may use (it parses one file at a time with pyelftools); less where
verify itself runs under a lower hard limit (the corpus tier's 1 GiB), which a child cannot raise."""

_LIMITED = (
    "import resource, runpy, sys\n"
    "hard = resource.getrlimit(resource.RLIMIT_AS)[1]\n"
    "limit = {memory} if hard == resource.RLIM_INFINITY else min({memory}, hard)\n"
    "resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
    "sys.argv[0] = 'abi3audit'\n"
    "runpy.run_module('abi3audit', run_name='__main__', alter_sys=True)\n"
)


@dataclass(frozen=True)
class LimitedApiAudit:
    """What abi3audit found in one shared object, audited for the limited API of `floor`."""

    path: str
    outside: tuple[str, ...]
    """Python C API symbols that are in no version's limited API (`_PyObject_GetDictPtr`)."""
    newer: tuple[tuple[str, str], ...]
    """(symbol, version) for limited-API symbols added after the floor (`PyUnicode_AsUTF8`, 3.13)."""
    uses: tuple[str, ...] = ()
    """The Python names it leaves undefined: the API it takes from the interpreter."""
    defined: tuple[str, ...] = ()
    """The Python-like names it defines itself (its `PyInit_x`/`PyModExport_x` hooks, PEP 793):
    abi3audit takes every `Py` name for API use; these are left out of `outside` and `newer`."""

    @property
    def ok(self) -> bool:
        return not self.outside and not self.newer


def audit_limited_api(wheel: WheelContents, paths: Sequence[str], floor: str) -> list[LimitedApiAudit]:
    """Audit the wheel's shared objects at `paths` for the limited API of `floor` ('3.12')."""
    if importlib.util.find_spec("abi3audit") is None:
        msg = "abi3audit is not installed: the stable-abi rule needs it (pip install abi3audit)"
        raise ToolchainError(msg)
    digests = {m.name: m.digest for m in wheel.members}
    with tempfile.TemporaryDirectory(prefix="release-abi3-") as scratch:
        directory = Path(scratch)
        # abi3audit takes a file as a shared object by its suffix; the index keeps names apart. A
        # member with the bytes of one before it (`lib/x.so.0` beside `lib/x.so`) is judged as
        # that one; one whose symbols name nothing of Python's API has nothing to judge.
        copies: dict[str, str] = {}
        same: dict[str, str] = {}
        first: dict[str, str] = {}
        for index, path in enumerate(paths):
            digest = digests.get(path) or path
            if digest in first:
                same[path] = first[digest]
                continue
            first[digest] = path
            copy = str(directory / f"{index}.abi3.so")
            if wheel.symbol_copy(path, Path(copy)):
                copies[copy] = path
        if not copies:
            return [LimitedApiAudit(path, (), ()) for path in paths]
        report = directory / "report.json"
        argv = [
            sys.executable,
            "-c",
            _LIMITED.format(memory=MEMORY),
            "--report",
            "--output",
            str(report),
            "--strict",
            "--assume-minimum-abi3",
            floor,
            *copies,
        ]
        env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200"}
        try:
            proc = process.run(argv, timeout=DEADLINE, env=env, cwd=scratch)
        except process.TimedOut:
            msg = f"{wheel.path.name}: abi3audit did not finish within {DEADLINE:g} s"
            raise VerifyError(msg) from None
        try:
            data = read_json(report, REPORT_LIMIT)
        except (OSError, ValueError):
            lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
            why = lines[-1] if lines else f"exit status {proc.returncode}"
            msg = f"{wheel.path.name}: abi3audit could not audit its shared objects ({why})"
            raise VerifyError(msg) from None
        audited = {
            path: _own(_audit(data, copy, path, wheel.path.name), Path(copy)) for copy, path in copies.items()
        }
    return [_judged(audited.get(same.get(path, path)), path) for path in paths]


def _own(audit: LimitedApiAudit, copy: Path) -> LimitedApiAudit:
    """`audit` with the names the shared object defines taken out of its findings."""
    defined, undefined = python_symbols(copy)
    return LimitedApiAudit(
        audit.path,
        tuple(s for s in audit.outside if s not in defined),
        tuple((s, v) for s, v in audit.newer if s not in defined),
        tuple(sorted(undefined)),
        tuple(sorted(defined)),
    )


def _judged(audit: LimitedApiAudit | None, path: str) -> LimitedApiAudit:
    """`audit` (of the member with the same bytes, or None: nothing to judge) as `path`'s."""
    if audit is None:
        return LimitedApiAudit(path, (), ())
    return dataclasses.replace(audit, path=path)


def _audit(data: object, copy: str, path: str, wheel: str) -> LimitedApiAudit:
    """One shared object's result from abi3audit's JSON report (`specs` -> path -> `object`)."""
    try:
        result = data["specs"][copy]["object"]["result"]  # type: ignore[index]
        outside = tuple(sorted(str(s) for s in result["non_abi3_symbols"]))
        newer = tuple(sorted((str(k), str(v)) for k, v in result["future_abi3_objects"].items()))
    except (KeyError, TypeError, AttributeError):
        msg = f"{wheel}: {path}: abi3audit's report has no result for it"
        raise VerifyError(msg) from None
    return LimitedApiAudit(path, outside, newer)
