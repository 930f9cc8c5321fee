"""File digests, shared by the stages that compare wheels with reports and indexes."""

from __future__ import annotations

import hashlib
import mmap
from pathlib import Path


def file_sha256(path: Path) -> str:
    """sha256 of a whole file, through a memory map (no copy). Raises OSError."""
    with path.open("rb") as fh:
        if not path.stat().st_size:
            return hashlib.sha256(b"").hexdigest()
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return hashlib.sha256(mapped).hexdigest()
