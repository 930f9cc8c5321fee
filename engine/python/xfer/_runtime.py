"""Where the GPU runtime may live, and loading it from there: `find_runtime` is the release
toolkit's own (release/init/runtime_places.py, the function the guard of `release init` carries);
a test keeps this copy equal to it. The places come from the toolkit's backend data, recorded by
the build in `_build_info.RUNTIME_REQUIREMENTS`."""

from __future__ import annotations


def find_runtime(soname: str, places: list[dict[str, str]]) -> tuple[str | None, list[str]]:
    """Load `soname` from the first of `places` that has it: (what was loaded, or None; what each
    place looked at said, one phrase per place tried before it, for a one-sentence message).
    What was loaded is the file's path, or the soname where the loader or the process had it.
    Nothing a place does escapes: any exception a foreign SDK raises (`SystemExit` too, and one
    whose `str()` raises) means "not found there"; its answers are read one item, at most
    `limit` directories are tried, and every name in a phrase is escaped (no ESC, newline or NUL
    reaches the message)."""
    import ctypes
    import glob
    import importlib
    import itertools
    import os
    import re
    import sys

    local = getattr(os, "RTLD_LOCAL", 0)
    looked: list[str] = []
    limit = 64

    def shown(value: object) -> str:
        try:
            text = " ".join(str(value).split()) if isinstance(value, BaseException) else str(value)
        except BaseException:  # a foreign object's __str__ may raise anything
            return "(unprintable)"
        text = text if len(text) <= 300 else text[:300] + "..."
        return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)

    def short(exc: BaseException) -> str:
        try:
            name = type(exc).__name__
        except BaseException:  # a foreign exception's class may be anything
            name = "an exception"
        text = shown(exc)
        return f"{shown(name)}: {text[:120]}" if text else shown(name)

    def exists(path: str) -> bool:
        try:
            return os.path.exists(path)
        except (OSError, ValueError):  # an embedded NUL
            return False

    def load(path: str) -> str | None:
        # RTLD_LOCAL: the extension's NEEDED entry matches the loaded copy by its soname, while
        # other libraries of the process (torch's) never bind their calls to this copy.
        try:
            ctypes.CDLL(path, mode=local)
        except (OSError, ValueError) as exc:
            return short(exc)
        return None

    def newest_first(path: str) -> list[tuple[int, int, str]]:
        parts = re.split(r"([0-9]{1,9})", path)
        return [(0, int(p), "") if p.isascii() and p.isdigit() else (1, 0, p) for p in parts]

    stem = soname.split(".so", 1)[0]
    shortname = stem[3:] if stem.startswith("lib") else stem
    for place in places:
        kind, where = place.get("kind", ""), place.get("path", "")
        candidates: list[str] = []
        label = shown(where)
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
            label = f"{shown(where)} in site-packages"
            bases = [base for base in sys.path[:limit] if isinstance(base, str)]
            candidates = [os.path.join(base, where, soname) for base in bases]
        elif kind == "sdk-module":
            module = place.get("module", "")
            label = f"the pip packages {shown(module)}.find_libraries({shortname!r}) names"
            try:
                first = list(itertools.islice(importlib.import_module(module).find_libraries(shortname), 1))
                candidates = [os.path.join(os.path.dirname(str(first[0])), soname)] if first else []
                if not candidates:
                    label += " (none)"
                elif not exists(candidates[0]):
                    label += f" (no {soname} in {shown(os.path.dirname(candidates[0]))})"
            except ModuleNotFoundError as exc:
                why = f"{shown(module)} is not installed" if exc.name == module else short(exc)
                label += f" ({why})"
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # a broken SDK (sys.exit too) is "not there"
                candidates = []
                label += f" ({shown(module)} failed: {short(exc)})"
        elif kind == "directory":
            directories = sorted(itertools.islice(glob.iglob(where), limit), key=newest_first, reverse=True)
            candidates = [os.path.join(d, soname) for d in directories]
        else:
            looked.append(f"an unknown kind of place {shown(kind)!r}")
            continue
        for candidate in candidates:
            if exists(candidate):
                error = load(candidate)
                if error is None:
                    return candidate, looked
                label += f" ({shown(candidate)} did not load: {error})"
                break
        looked.append(label)
    return None, looked
