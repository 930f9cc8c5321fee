"""The toolkit's own wheel for a container build from a source tree: built once per change of the
toolkit (not once per Python in the container), for each Python's `before-build` to install."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from release.builder.reuse import tree_digest, wheel_key

EPOCH = "315532800"
"""The wheel's timestamps (1980-01-01): its bytes follow the toolkit's files alone."""


def build_toolkit_wheel(parts: list[Path], out: Path) -> Path | None:
    """The toolkit's wheel in `out`, built with uv from the toolkit's `parts` (pyproject.toml,
    release/, ... copied into the container project) once per change of them: kept by their digest
    in `toolkit-wheels/` beside the project's directory, so that a no-op run builds nothing. Each
    Python's `before-build` then installs a wheel instead of building the tree again (about 12 s a
    Python in the container). Its bytes are fixed (EPOCH; the container key hashes them). None
    without uv or when the build fails: each Python then installs from the tree, as before."""
    uv = Path(sys.executable).with_name("uv")
    found = str(uv) if uv.is_file() else shutil.which("uv")
    present = [p for p in parts if p.exists()]
    if found is None or not present:
        return None
    digest = wheel_key({p.name: tree_digest(p) if p.is_dir() else _file_digest(p) for p in present})
    kept = present[0].parent.parent / "toolkit-wheels" / digest[:24]
    if len(list(kept.glob("*.whl"))) != 1:
        shutil.rmtree(kept.parent, ignore_errors=True)  # an older toolkit's wheel goes
        wheel = _build(found, present)
        if wheel is None:
            return None
        kept.mkdir(parents=True)
        shutil.copy2(wheel, kept / wheel.name)
        shutil.rmtree(wheel.parent.parent, ignore_errors=True)
    wheel = next(kept.glob("*.whl"))
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy2(wheel, out / wheel.name)
    return out / wheel.name


def _build(uv: str, parts: list[Path]) -> Path | None:
    """`uv build --wheel` of a copy of `parts` (setuptools writes build/ and *.egg-info beside the
    source); the wheel in a temporary directory, or None."""
    tmp = Path(tempfile.mkdtemp(prefix="toolkit-wheel-"))
    copy = tmp / "src"
    copy.mkdir()
    for part in parts:
        if part.is_dir():
            shutil.copytree(part, copy / part.name)
        else:
            shutil.copy2(part, copy / part.name)
    try:
        proc = subprocess.run(
            [uv, "build", "--wheel", "--quiet", "--out-dir", str(tmp / "out"), str(copy)],
            capture_output=True, text=True, env={**os.environ, "SOURCE_DATE_EPOCH": EPOCH},
            timeout=300, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        proc = None
    wheels = sorted((tmp / "out").glob("*.whl")) if proc is not None and proc.returncode == 0 else []
    if len(wheels) != 1:
        shutil.rmtree(tmp, ignore_errors=True)
        return None
    return wheels[0]


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
