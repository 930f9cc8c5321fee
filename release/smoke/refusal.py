"""What a smoke run expects of an import where a library it binds is absent: a refusal in the
package's own words, a sentence that names the library, never the loader's bare error.

The GPU driver's libraries (the backend's `driver_sonames`: CUDA's libcuda.so.1) are absent
wherever no GPU is, which is every smoke image and host but a hardware runner: where one is
missing, the import must refuse and say that the driver is what is missing.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

from release.plan.resolve import ResolvedVariant

# The loader's own words as the whole message: what the user must never be left with.
BARE_LOADER_ERROR = re.compile(r"(?a)^\w*(?:Error|Exception): \S+\.so[.\d]*: cannot open shared object file")


def absent_drivers(missing: Sequence[str], variant: ResolvedVariant) -> list[str]:
    """The GPU driver's libraries among the `missing` sonames."""
    return [m for m in missing if m in variant.backend.driver_sonames]


def absent_runtime(missing: Sequence[str], sonames: Sequence[str], variant: ResolvedVariant) -> list[str]:
    """The GPU runtime's libraries among the `missing` sonames, the driver's left out: those the
    import binds (`sonames`) and any the variant's runtime globs name (an engine that NEEDs
    libhsa-runtime64.so.1 beside libamdhip64.so.7 finds both where TheRock's layouts keep them)."""
    drivers = absent_drivers(missing, variant)
    return [
        m for m in missing
        if m not in drivers
        and (m.startswith(tuple(sonames)) or any(fnmatch.fnmatchcase(m, g) for g in variant.runtime_globs))
    ]  # fmt: skip


def refusal_problem(returncode: int, message: str, names: Sequence[str], *, driver: bool) -> str | None:
    """What is wrong with an import's refusal (its exit code and last line), or None. `names`:
    what the message must name (one of them); `driver`: the GPU driver is what is absent."""
    what = "the GPU driver" if driver else "the runtime"
    if returncode == 0:
        return f"the import succeeded without {what}"
    if BARE_LOADER_ERROR.search(message):
        return f"bare loader error: {message}"
    if names and not any(name in message for name in names):
        return f"the message does not name {names[0]}"
    if driver and "driver" not in message.lower():
        return f"the message does not say that {what} is missing"
    return None
