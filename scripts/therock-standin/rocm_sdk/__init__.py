"""Stand-in of TheRock's `rocm_sdk` (the `rocm` distribution from AMD's index): the same public
API, written for these tests from the API's documented behaviour (no code of TheRock's).

The libraries live in a library package whose name carries a nonce (`_rocm_sdk_core<nonce>`,
`lib/` inside), so only this module knows where: `find_libraries` names the files,
`preload_libraries` loads them (RTLD_GLOBAL unless `rtld_global=False`), `initialize_process`
preloads what it is given and what `ROCM_SDK_PRELOAD_LIBRARIES` lists (comma or semicolon
separated), raising RuntimeError when that variable names something it cannot load.
"""

import ctypes
import importlib
import os
import re
from pathlib import Path

from ._dist_info import LIBRARIES, PY_PACKAGE_SUFFIX_NONCE, __version__

__all__ = ["__version__", "find_libraries", "initialize_process", "preload_libraries"]

_ALL_CDLLS: dict = {}


def find_libraries(*shortnames):
    """Absolute paths of the libraries named by shortname (`amdhip64`), one each; ModuleNotFoundError
    for an unknown name or a library package that is not installed, FileNotFoundError when the
    package holds no such file."""
    paths = []
    for shortname in shortnames:
        if shortname not in LIBRARIES:
            msg = f"Unknown rocm library '{shortname}'"
            raise ModuleNotFoundError(msg)
        package, pattern = LIBRARIES[shortname]
        name = f"_{package.replace('-', '_')}{PY_PACKAGE_SUFFIX_NONCE}"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            msg = f"Missing required rocm libraries: install them with `pip install rocm[{package}]`"
            raise ModuleNotFoundError(msg) from None
        lib = Path(module.__file__).parent / "lib"
        matches = sorted(lib.glob(pattern))
        if not matches:
            msg = f"Could not find rocm library '{shortname}' in {lib} ({pattern})"
            raise FileNotFoundError(msg)
        paths.append(matches[0])
    return paths


def preload_libraries(*shortnames, rtld_global=True):
    mode = ctypes.RTLD_GLOBAL if rtld_global else ctypes.RTLD_LOCAL
    for shortname in shortnames:
        if shortname not in _ALL_CDLLS:
            (path,) = find_libraries(shortname)
            _ALL_CDLLS[shortname] = ctypes.CDLL(str(path), mode=mode)


def initialize_process(*, preload_shortnames=None, rtld_global=True, env_override=True, **_ignored):
    if preload_shortnames:
        preload_libraries(*preload_shortnames, rtld_global=rtld_global)
    listed = os.getenv("ROCM_SDK_PRELOAD_LIBRARIES") if env_override else None
    if listed is not None:
        names = [s.strip() for s in re.split("[,;]", listed) if s.strip()]
        try:
            preload_libraries(*names, rtld_global=rtld_global)
        except Exception as exc:
            msg = f"Could not preload libraries from ROCM_SDK_PRELOAD_LIBRARIES='{listed}'"
            raise RuntimeError(msg) from exc
