"""Where the GPU runtime may live, and loading it from there: `find_runtime` is the release
toolkit's own (release/init/runtime_places.py, the function the guard of `release init` carries);
a test keeps this copy equal to it. The places come from the toolkit's backend data, recorded by
the build in `_build_info.RUNTIME_REQUIREMENTS`."""

from __future__ import annotations


def find_runtime(soname: str, places: list[dict[str, str]]) -> tuple[str | None, list[str]]:
    """Load `soname` from the first of `places` that has it: (what was loaded, or None; what each
    place looked at said, one phrase per place tried before it, for a one-sentence message).
    What was loaded is the file's path, or the soname where the loader or the process had it.
    Nothing a place does (a module that raises, a directory without the library) escapes."""
    import ctypes
    import glob
    import importlib
    import os
    import re
    import sys

    local = getattr(os, "RTLD_LOCAL", 0)
    looked: list[str] = []

    def short(exc: BaseException) -> str:
        text = " ".join(str(exc).split())
        return f"{type(exc).__name__}: {text[:120]}" if text else type(exc).__name__

    def load(path: str) -> str | None:
        # RTLD_LOCAL: the extension's NEEDED entry matches the loaded copy by its soname, while
        # other libraries of the process (torch's) never bind their calls to this copy.
        try:
            ctypes.CDLL(path, mode=local)
        except OSError as exc:
            return short(exc)
        return None

    def newest_first(path: str) -> list[tuple[int, int, str]]:
        return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", path)]

    stem = soname.split(".so", 1)[0]
    shortname = stem[3:] if stem.startswith("lib") else stem
    for place in places:
        kind, where = place.get("kind", ""), place.get("path", "")
        candidates: list[str] = []
        label = where
        if kind == "loaded":
            try:
                ctypes.CDLL(soname, mode=local | getattr(os, "RTLD_NOLOAD", 4))
            except OSError:
                looked.append("already loaded in this process (no)")
                continue
            return soname, looked
        if kind == "loader":
            error = load(soname)
            if error is None:
                return soname, looked
            looked.append("the dynamic loader's path (ldconfig, LD_LIBRARY_PATH)")
            continue
        if kind == "site-packages":
            label = f"{where} in site-packages"
            candidates = [os.path.join(base, where, soname) for base in sys.path if base]
        elif kind == "sdk-module":
            module = place.get("module", "")
            label = f"the pip packages {module}.find_libraries({shortname!r}) names"
            try:
                found = list(importlib.import_module(module).find_libraries(shortname))
                candidates = [os.path.join(os.path.dirname(str(found[0])), soname)] if found else []
                if not candidates:
                    label += " (none)"
                elif not os.path.exists(candidates[0]):
                    label += f" (no {soname} in {os.path.dirname(candidates[0])})"
            except ModuleNotFoundError as exc:
                why = f"{module} is not installed" if exc.name == module else short(exc)
                label += f" ({why})"
            except Exception as exc:  # a broken SDK install must end in the sentence, not a traceback
                label += f" ({module} failed: {short(exc)})"
        elif kind == "directory":
            directories = sorted(glob.glob(where), key=newest_first, reverse=True)
            candidates = [os.path.join(d, soname) for d in directories]
        else:
            looked.append(f"an unknown kind of place {kind!r}")
            continue
        for candidate in candidates:
            if os.path.exists(candidate):
                error = load(candidate)
                if error is None:
                    return candidate, looked
                label += f" ({candidate} did not load: {error})"
                break
        looked.append(label)
    return None, looked
