"""xfer: a transfer engine for moving buffers (host or GPU memory) between processes.

Before the compiled extension is loaded this module checks two things, so that
a broken install fails with a sentence instead of a bare loader error:

* the GPU runtime library this variant was built against (recorded in
  ``_build_info``) can be loaded, and
* no second ``xfer-engine*`` variant is installed beside this one (they share
  the import package ``xfer`` and would overwrite each other's files).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from importlib import metadata

from . import _build_info
from ._runtime import find_runtime

__version__ = _build_info.VERSION
BACKEND = _build_info.BACKEND

_WHEELS = {
    "cpu": ("xfer-engine-cpu", "no GPU"),
    "cuda": ("xfer-engine", "NVIDIA GPUs, CUDA"),
    "hip": ("xfer-engine-rocm", "AMD GPUs, ROCm/HIP"),
    "musa": ("xfer-engine-musa", "Moore Threads GPUs, MUSA"),
}

_RUNTIMES = {"cuda": "CUDA", "hip": "ROCm", "musa": "MUSA"}

# Outside the release toolkit (a plain `pip install engine/`) the build records no requirements:
# then the message says what is generally true of the backend.
_RUNTIME_HELP = {
    "cuda": "install the CUDA runtime that provides {soname} (a CUDA toolkit, or `pip install "
    "nvidia-cuda-runtime`) or make its lib directory visible to the loader (ldconfig / LD_LIBRARY_PATH)",
    "hip": "install the HIP runtime that provides {soname} (a ROCm release under /opt/rocm, TheRock's pip "
    "packages `rocm[libraries]` from AMD's index, or the distribution's libamdhip64 package) or make its "
    "lib directory visible to the loader (ldconfig / LD_LIBRARY_PATH)",
    "musa": "install the Moore Threads MUSA runtime that provides {soname} (under /usr/local/musa) or "
    "make its lib directory visible to the loader (ldconfig / LD_LIBRARY_PATH)",
}


# The GPU driver's own library (an engine calling the driver API NEEDs it): the driver provides it,
# not a toolkit or a runtime wheel, so the message says the driver is missing.
_DRIVERS = {
    "libcuda.so.1": (
        "the NVIDIA driver",
        "install or update the NVIDIA GPU driver, which provides libcuda.so.1 (a CUDA toolkit or "
        "`pip install nvidia-cuda-runtime` does not)",
    ),
}


def _requirement(backend: str, soname: str) -> tuple[str, str]:
    """(the releases that provide `soname`, how to install it): the release toolkit's words, from
    its backend data, where the build recorded them (`needs libamdhip64.so.7 (ROCm 7.x or 10.x)`).
    The soname is not the release: ROCm 7.x and 10.x both ship libamdhip64.so.7."""
    try:
        table = json.loads(getattr(_build_info, "RUNTIME_REQUIREMENTS", "") or "{}")
    except ValueError:
        table = {}
    entry = table.get(soname) if isinstance(table, dict) else None
    if isinstance(entry, dict):
        provided_by, install = entry.get("provided_by"), entry.get("install")
        if isinstance(provided_by, str) and isinstance(install, str):
            return provided_by, install
    if soname in _DRIVERS:
        return _DRIVERS[soname]
    runtime = _RUNTIMES.get(backend, backend)
    help_text = _RUNTIME_HELP.get(backend, "install the runtime that provides {soname}").format(soname=soname)
    return f"the {runtime} runtime", help_text


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


_MAX_PATH_ENTRIES = 256
_MAX_DIRECTORY_ENTRIES = 100_000


def _installed_variants() -> list[str]:
    """Names of installed ``xfer-engine*`` distributions, read from the names of the ``.dist-info``
    directories on ``sys.path`` alone: no other distribution's METADATA is read (one may be
    undecodable, a FIFO or a link to /dev/zero), and the walk is bounded."""
    found: dict[str, str] = {}
    for base in sys.path[:_MAX_PATH_ENTRIES]:
        if not isinstance(base, str):
            continue
        try:
            with os.scandir(base or ".") as entries:
                for entry in itertools.islice(entries, _MAX_DIRECTORY_ENTRIES):
                    if not entry.name.endswith(".dist-info"):
                        continue
                    name = _canonical(entry.name[: -len(".dist-info")].split("-", 1)[0])
                    if name.isascii() and name.startswith("xfer-engine"):
                        found[name] = name
        except (OSError, ValueError):  # not a directory, unreadable, an embedded NUL
            continue
    return sorted(found.values())


def _distribution() -> str | None:
    """The installed distribution this copy of ``xfer`` belongs to, if any."""
    here = os.path.dirname(os.path.abspath(__file__))
    for name in _installed_variants():
        try:
            dist = metadata.distribution(name)
            init = dist.locate_file("xfer/__init__.py")
            if os.path.dirname(os.path.abspath(str(init))) == here:
                return name
        except Exception:
            continue
    return None


def _check_single_variant() -> None:
    variants = _installed_variants()
    if len(variants) <= 1:
        return
    msg = (
        f"xfer: several variants of the engine are installed in this environment: {', '.join(variants)}. "
        "They share the import package 'xfer' and overwrite each other's files, so which one you get is "
        f"undefined. Keep exactly one: `pip uninstall {' '.join(variants)}` and then reinstall the one "
        "for your hardware (xfer-engine-cpu: no GPU, xfer-engine: CUDA, xfer-engine-rocm: ROCm, "
        "xfer-engine-musa: MUSA)."
    )
    if os.environ.get("XFER_ALLOW_MULTIPLE_VARIANTS") == "1":
        import warnings

        warnings.warn(msg + " (continuing: XFER_ALLOW_MULTIPLE_VARIANTS=1)", RuntimeWarning, stacklevel=3)
        return
    raise ImportError(msg)


# Outside the release toolkit the build records no places: these are what its backend data says
# for each backend (the toolkit's packaging/backends/<name>.json, `runtime_places`).
_DEFAULT_PLACES = {
    "cuda": [
        {"kind": "loaded"},
        {"kind": "site-packages", "path": "nvidia/cu13/lib"},
        {"kind": "site-packages", "path": "nvidia/cuda_runtime/lib"},
        {"kind": "loader"},
    ],
    "hip": [
        {"kind": "loaded"},
        {"kind": "loader"},
        {"kind": "sdk-module", "module": "rocm_sdk"},
        {"kind": "directory", "path": "/opt/rocm/core-*/lib"},
        {"kind": "directory", "path": "/opt/rocm/lib"},
    ],
}


def _places(backend: str, soname: str) -> list[dict[str, str]]:
    """Where the runtime may live, in order: the toolkit's backend data as the build recorded it."""
    try:
        table = json.loads(getattr(_build_info, "RUNTIME_REQUIREMENTS", "") or "{}")
    except ValueError:
        table = {}
    entry = table.get(soname) if isinstance(table, dict) else None
    places = entry.get("places") if isinstance(entry, dict) else None
    if isinstance(places, list) and all(isinstance(p, dict) for p in places):
        return places
    return _DEFAULT_PLACES.get(backend, [{"kind": "loaded"}, {"kind": "loader"}])


def _check_runtime() -> None:
    backend = _build_info.BACKEND
    for soname in _build_info.RUNTIME_SONAMES:
        # The first place that has it is the one copy of the process: one already loaded (torch's)
        # comes first, so the process never holds two.
        found, looked = find_runtime(soname, _places(backend, soname))
        if found is not None:
            continue
        dist = _distribution() or _build_info.DEFAULT_DISTRIBUTION
        wheel, hardware = _WHEELS.get(backend, (dist, backend))
        others = ", ".join(f"`{w}` ({hw})" for b, (w, hw) in _WHEELS.items() if b != backend)
        provided_by, help_text = _requirement(backend, soname)
        msg = (
            f"xfer: the installed variant {dist} (backend {backend}, built for {hardware}) needs "
            f"{soname} ({provided_by}), and no copy of {soname} was found (looked: {'; '.join(looked)}). "
            f"To use this variant, {help_text}. "
            f"Otherwise install the wheel for your hardware instead: `pip uninstall {dist}` and then "
            f"`pip install xfer-engine-cpu` for no GPU; other variants: {others}."
        )
        raise ImportError(msg)


_check_single_variant()
_check_runtime()

from ._xfer import XferError  # noqa: E402
from ._engine import Engine  # noqa: E402

__all__ = ["BACKEND", "Engine", "XferError", "__version__"]
