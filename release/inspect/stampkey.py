"""The secret a verify report's reuse stamp is keyed by: only this user's toolkit can stamp a report.

A report's `reuse.digest` is an HMAC-SHA256 of its content and stamp, keyed by 32 random bytes kept
in `~/.cache/gpu-wheel-release/verify-key` (mode 0600, in a 0700 directory). Anyone may edit a
report and compute a new sha256 of it; without the key no edit yields a stamp that verify accepts,
so an edited report always costs a full verify. The key is made on first use (written to a new
file and renamed into place, `release.atomic`) and read back only when it is a regular file of
this user, unreadable by others, of exactly its size. Any other key file is not trusted: this
process then stamps with a key of its own, and no report is reused across runs.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from release.atomic import OutsideProject, make_directory, write_bytes
from release.wheel.files import open_regular

KEY_BYTES = 32


def key_path() -> Path:
    """Where this user's key lives."""
    return Path.home() / ".cache" / "gpu-wheel-release" / "verify-key"


def _read(path: Path) -> bytes | None:
    """The key at `path` when it is one this user made and no one else can read; else None."""
    with open_regular(path) as fh:
        info = os.fstat(fh.fileno())
        key = fh.read(KEY_BYTES + 1)
    if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077 or len(key) != KEY_BYTES:
        return None
    return key


@functools.cache
def verify_key() -> bytes:
    """This user's key (made on first use); a key of this process alone where the file is not
    one to trust or cannot be made."""
    path = key_path()
    try:
        return _read(path) or secrets.token_bytes(KEY_BYTES)
    except FileNotFoundError:
        pass
    except OSError:
        return secrets.token_bytes(KEY_BYTES)
    try:
        make_directory(path.parent, root=path.parent.parent)  # through no link on the way
        write_bytes(path, secrets.token_bytes(KEY_BYTES))  # a new file of mode 0600, renamed
    except (OSError, OutsideProject):
        return secrets.token_bytes(KEY_BYTES)
    try:
        return _read(path) or secrets.token_bytes(KEY_BYTES)
    except OSError:
        return secrets.token_bytes(KEY_BYTES)


def stamp_mac(data: bytes) -> str:
    """HMAC-SHA256 of `data` under this user's key, in hex."""
    return hmac.new(verify_key(), data, hashlib.sha256).hexdigest()
