"""What a variant's runtime means for its build and its images, from the backend data: the
requirements its import-time message names (`runtime_requirements`) and the Debian packages that
provide its runtime in a local image (`debian_runtime_packages`)."""

from __future__ import annotations

import json

from release.config.backends import Backend

RUNTIME_ENV = "RELEASE_RUNTIME_REQUIREMENTS"
"""The environment variable that tells the engine's build, for each runtime soname the variant
binds, which releases provide it and how a user installs it (JSON: {soname: {"provided_by": ...,
"install": ...}}), so that its import-time message says what the toolkit's hints say."""


def runtime_requirements(backend: Backend, sonames: tuple[str, ...]) -> dict[str, str]:
    """`RUNTIME_ENV` for a build binding `sonames` (nothing for a variant that binds no runtime).
    It covers every soname of the backend's table, so that a wheel built against another one
    (`--allow-toolkit-mismatch`) still names the releases that provide what it binds, and the
    driver's libraries, with the driver's words."""
    if not sonames:
        return {}
    every = dict.fromkeys([*sonames, *(s for names in backend.runtime_sonames.values() for s in names)])
    places = [p.as_data() for p in backend.places]  # where the import looks, in order
    table = {s: {"provided_by": backend.releases_providing(s), "install": backend.runtime_help(s),
                 "places": places} for s in every}  # fmt: skip
    # The driver's libraries (libcuda.so.1): the GPU driver provides them, not a toolkit release.
    for soname in backend.driver_sonames:
        table[soname] = {"provided_by": backend.driver_name, "install": backend.driver_help(soname)}
    return {RUNTIME_ENV: json.dumps(table, sort_keys=True, separators=(",", ":"))}


def debian_runtime_packages(backend: Backend, sonames: tuple[str, ...], suite: str) -> tuple[str, ...]:
    """The Debian packages that provide `sonames` on a `suite` base, each as `pkg/ARCHIVE` where
    the backend data says another archive carries it (make-image.sh pins the base's C library)."""
    packages: list[str] = []
    for soname in sonames:
        archive = backend.debian_archive.get(soname)
        for package in backend.debian_runtime.get(soname, ()):
            packages.append(f"{package}/{archive}" if archive and archive != suite else package)
    return tuple(dict.fromkeys(packages))
