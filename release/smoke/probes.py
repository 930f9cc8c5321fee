"""Small Python programs the smoke checks run with the fresh venv's interpreter."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from release.smoke.image import Result

ELF_FILES = """
import json, sys
from importlib.metadata import distribution
found = []
for f in distribution(sys.argv[1]).files or ():
    p = f.locate()
    try:
        with open(p, "rb") as s:
            if s.read(4) == b"\\x7fELF":
                found.append(str(p))
    except OSError:
        pass
print(json.dumps(found))
"""

MAPPED_RUNTIME = """
import importlib, json, os, sys
importlib.import_module(sys.argv[1])
prefixes = tuple(sys.argv[2].split(","))
mapped = []
with open("/proc/self/maps") as maps:
    for line in maps:
        parts = line.split(None, 5)
        path = parts[5].strip() if len(parts) == 6 else ""
        if os.path.basename(path).startswith(prefixes) and path not in mapped:
            mapped.append(path)
print(json.dumps({"mapped": mapped, "dirs": sorted({os.path.realpath(os.path.dirname(p)) for p in mapped}),
                  "expected": os.path.realpath(sys.argv[3])}))
"""

ONE_COPY = """
import importlib, json, os, sys
for name in sys.argv[2:]:
    importlib.import_module(name)
stems = [s for s in sys.argv[1].split(",") if s]
files = {}
with open("/proc/self/maps") as maps:
    for line in maps:
        parts = line.split(None, 5)
        path = parts[5].strip() if len(parts) == 6 else ""
        base = os.path.basename(path)
        for stem in stems:
            if base == stem + ".so" or base.startswith(stem + ".so."):
                try:
                    st = os.stat(path)
                    key = (st.st_dev, st.st_ino)
                except OSError:
                    key = path
                files.setdefault(stem, {}).setdefault(key, path)
twice = {stem: sorted(found.values()) for stem, found in files.items() if len(found) > 1}
if twice:
    print(json.dumps(twice))
    sys.exit(3)  # TWO_COPIES
"""
"""Imports the modules named after the first argument, in order, then fails (exit 3, printing
{library: [paths]}) when the process maps two files of one library the first argument names
(comma-separated, `libamdhip64`): a second copy of a runtime in one process (two libamd_smi made
the device count 0 in SGLang's image)."""

TWO_COPIES = 3
"""`ONE_COPY`'s exit status when a library is mapped twice."""


def one_copy_argv(venv: Path, libraries: Sequence[str], modules: Sequence[str]) -> list[str]:
    """Import `modules` in order with the venv's Python, then check one copy of each of `libraries`."""
    return [str(venv / "bin" / "python"), "-c", ONE_COPY, ",".join(libraries), *modules]


def two_copies(result: Result) -> str:
    """What `ONE_COPY` found, for a person (`two copies of libamdhip64: /a and /b`); '' otherwise."""
    if result.returncode != TWO_COPIES:
        return ""
    try:
        data = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return ""
    if not isinstance(data, dict):
        return ""
    return "; ".join(
        f"two copies of {lib} in one process: {' and '.join(map(str, paths))}" for lib, paths in data.items()
    )
