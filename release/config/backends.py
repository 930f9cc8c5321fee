"""Per-backend runtime knowledge, read from `packaging/backends/<name>.json`.

Nothing here is specific to one engine: runtime sonames, the libraries repair must never vendor,
where the toolkit lives and how to install it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from release.config.dataschema import DocumentReader, compose, spec
from release.errors import MatrixError, Problem


@dataclass(frozen=True, kw_only=True)
class ToolkitProbe:
    """How to find a backend's toolkit and read its version."""

    env: tuple[str, ...] = spec("Environment variables naming the toolkit prefix, in order.")
    prefixes: tuple[str, ...] = spec("Prefixes (globs allowed) searched after the variables.")
    marker: str = spec("File relative to a prefix that proves the toolkit is there.")
    version_files: tuple[str, ...] = spec("Files relative to the prefix holding the version.", default=())
    version_header: str | None = spec("Header defining the version macros.", default=None)
    version_define: str | None = spec("Macro(s), comma-separated, that spell the version.", default=None)
    install: str = spec("The command that installs the toolkit; it takes the declared toolkit version.")
    install_env: tuple[str, ...] = spec(
        "Environment variables the install command reads (an installer's location), passed into "
        "the build container.",
        default=(),
    )


@dataclass(frozen=True, kw_only=True)
class Backend:
    """What the toolkit knows about one accelerator backend."""

    schema_version: int = spec("Format version of this file.")
    name: str = spec("Backend name used by `variants.<v>.backend`.")
    title: str = spec("Human name.")
    runtime_libraries: tuple[str, ...] = spec("Globs of the runtime's libraries.")
    exclude: tuple[str, ...] = spec("Default repair excludes: bound at load time, never vendored.")
    requires_runtime_needed: tuple[str, ...] = spec(
        "Soname prefixes, one of which a GPU extension must NEED."
    )
    device_code_sections: tuple[str, ...] = spec("ELF sections that hold GPU code objects.")
    toolkit: ToolkitProbe | None = spec("How to find the toolkit; null for none.")
    runtime_hint: str = spec("What a user installs to provide the runtime.")
    runtime_sonames: Mapping[str, tuple[str, ...]] = spec(
        "The runtime sonames a wheel built with each toolkit major binds, e.g. {'6': ['libamdhip64.so.6']}: "
        "what `runtime-abi` expects for the variant's declared toolkit.",
        default_factory=dict,
    )
    debian_runtime: Mapping[str, tuple[str, ...]] = spec(
        "Debian packages that provide each toolkit major's runtime (for local images and hints).",
        default_factory=dict,
    )


def load_backends(directory: Path) -> dict[str, Backend]:
    """Every `*.json` backend in a directory, validated; the file name must match `name`."""
    problems: list[Problem] = []
    backends: dict[str, Backend] = {}
    entries = list(directory.iterdir()) if directory.is_dir() else []
    files = sorted((f for f in entries if f.name.endswith(".json")), key=lambda f: f.name)
    if not files:
        raise MatrixError([Problem(str(directory), None, "", "no backend data (*.json) found")])
    for file in files:
        reader = DocumentReader(str(file))
        try:
            backend = reader.read(compose(file.read_text(encoding="utf-8"), str(file)), Backend, "")
        except MatrixError as exc:
            problems.extend(exc.problems)
            continue
        problems.extend(reader.problems)
        if reader.problems:
            continue
        stem = file.name.removesuffix(".json")
        if backend.name != stem:
            problems.append(Problem(str(file), 1, "name", f"must be {stem!r} like the file name"))
            continue
        backends[backend.name] = backend
    if problems:
        raise MatrixError(problems)
    return backends
