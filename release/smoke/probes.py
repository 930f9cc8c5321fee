"""Small Python programs the smoke checks run with the fresh venv's interpreter."""

from __future__ import annotations

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
