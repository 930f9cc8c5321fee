"""Writes the TheRock stand-in's wheels (stdlib only: it also runs where only Python is):
`rocm` (the `rocm_sdk` module), `rocm-sdk-core` (the nonce-named library package, `lib/` holding
the given library files under their own names) and, for images whose torch preloads the runtime,
`torch` (the stand-in beside this file).

    python wheels.py DEST [--torch] LIBRARY...
"""

from __future__ import annotations

import base64
import hashlib
import runpy
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
TAG = "py3-none-linux_x86_64"


def wheel(
    dest: Path,
    name: str,
    version: str,
    files: dict[str, bytes],
    *,
    tag: str = "py3-none-any",
    metadata: str = "",
) -> Path:
    """A wheel of `files` (archive path: bytes); `metadata`: more METADATA lines."""
    dist = f"{name.replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    files = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{metadata}".encode(),
        f"{info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: standin\nRoot-Is-Purelib: false\nTag: {tag}\n".encode()
        ),
    }
    rows = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{path},sha256={digest},{len(data)}")
    rows.append(f"{info}/RECORD,,")
    out = dest / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in files.items():
            mode = 0o755 if "/lib/" in path else 0o644
            entry = zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0))
            entry.external_attr = (0o100000 | mode) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(entry, data)
        record = zipfile.ZipInfo(f"{info}/RECORD", date_time=(2026, 1, 1, 0, 0, 0))
        zf.writestr(record, "\n".join(rows) + "\n")
    return out


def _sources(package: str) -> dict[str, bytes]:
    return {f"{package}/{p.name}": p.read_bytes() for p in sorted((HERE / package).glob("*.py"))}


def write_wheels(dest: Path, libraries: Sequence[Path], *, torch: bool = False) -> list[Path]:
    """The stand-in's wheels in `dest`; `libraries` go into `_rocm_sdk_core_10_0_0/lib/`."""
    dest.mkdir(parents=True, exist_ok=True)
    info = runpy.run_path(str(HERE / "rocm_sdk" / "_dist_info.py"))
    version = info["__version__"]
    core = f"_rocm_sdk_core{info['PY_PACKAGE_SUFFIX_NONCE']}"
    core_files = {f"{core}/__init__.py": b'"""The ROCm SDK core libraries (lib/)."""\n'}
    core_files.update({f"{core}/lib/{lib.name}": lib.read_bytes() for lib in libraries})
    wheels = [
        wheel(dest, "rocm", version, _sources("rocm_sdk")),
        wheel(dest, "rocm-sdk-core", version, core_files, tag=TAG),
    ]
    if torch:
        wheels.append(wheel(dest, "torch", "2.13.0+standin", _sources("torch")))
    return wheels


if __name__ == "__main__":
    args = sys.argv[1:]
    with_torch = "--torch" in args
    rest = [a for a in args if a != "--torch"]
    for wheel in write_wheels(Path(rest[0]), [Path(p) for p in rest[1:]], torch=with_torch):
        print(wheel)
