"""File digests, shared by the stages that compare wheels with reports and indexes."""

from __future__ import annotations

import hashlib
from pathlib import Path

_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """sha256 of a whole file, read in 1 MiB pieces (a large wheel is never held or mapped
    whole). Raises OSError."""
    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    with path.open("rb", buffering=0) as fh:
        while count := fh.readinto(view):
            digest.update(view[:count])
    return digest.hexdigest()
