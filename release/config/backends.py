"""Per-backend runtime knowledge, read from `packaging/backends/<name>.json`.

Nothing here is specific to one engine: runtime sonames, the libraries repair must never vendor,
where the toolkit lives and how to install it.
"""

from __future__ import annotations

import fnmatch
import json
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml

from release.config.dataschema import DocumentReader, compose, json_schema, spec
from release.config.devices import ContainerDevices
from release.config.machines import MACHINES
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
    version_places: tuple[int, ...] = spec(
        "How one number in `version_define` encodes the version: the place value of each part, "
        "largest first. [1000, 10] reads CUDART_VERSION 13020 as 13.2 (major = n // 1000, minor = "
        "n % 1000 // 10). Empty: each macro of `version_define` is one part.",
        default=(),
    )
    export_env: tuple[str, ...] = spec(
        "More environment variables set to the prefix found, for the engine's build (CMake's "
        "CUDAToolkit_ROOT); the first of `env` is always set, unless the prefix is /usr.",
        default=(),
    )
    link_dirs: tuple[str, ...] = spec(
        "Directories under the toolkit prefix put first on the linker's search path (`LIBRARY_PATH`) "
        "for the engine's build, never on the loader's: CUDA's `lib64/stubs`, whose link stub "
        "`libcuda.so` lets a plain `-lcuda` link the driver API.",
        default=(),
    )
    install_prefix: str | None = spec(
        "Where `install` puts the toolkit of a version (`{version}`: the variant's `toolkit`): the "
        "prefix of `link_dirs` in container builds, whose toolkit is installed there, not probed.",
        default=None,
    )
    install: str = spec("The command that installs the toolkit; it takes the declared toolkit version.")
    install_env: tuple[str, ...] = spec(
        "Environment variables the install command reads (an installer's location), passed into "
        "the build container.",
        default=(),
    )


PLACE_KINDS = ("loaded", "loader", "site-packages", "sdk-module", "directory")
"""The kinds of `runtime_places` (see `RuntimePlace.kind`)."""


@dataclass(frozen=True, kw_only=True)
class RuntimePlace:
    """One place a wheel's import looks for its runtime (release/init/runtime_places.py reads it)."""

    kind: Literal["loaded", "loader", "site-packages", "sdk-module", "directory"] = spec(
        "`loaded`: a copy already in the process (torch or the SDK loaded it); `loader`: the "
        "dynamic loader's own search (ldconfig, LD_LIBRARY_PATH); `site-packages`: `path` under each "
        "`sys.path` entry (a runtime wheel's lib directory); `sdk-module`: the directory of the file "
        "`<module>.find_libraries(<shortname>)` names, which must hold the exact soname (TheRock's "
        "`rocm_sdk`: its library package's name carries a nonce, so it is never guessed); "
        "`directory`: `path`, an absolute glob, newest version first."
    )
    path: str | None = spec("The directory of `site-packages` and `directory` places.", default=None)
    module: str | None = spec("The importable module of an `sdk-module` place.", default=None)

    def as_data(self) -> dict[str, str]:
        """As the import-time check reads it (JSON)."""
        data: dict[str, str] = {"kind": self.kind}
        for key in ("path", "module"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        return data


@dataclass(frozen=True, kw_only=True)
class LocalBuildImage:
    """The local build image recipe `release init` writes for a variant of the backend
    (`build_image.debian`): Debian packages and the toolkit install made into a local image."""

    toolkit: str = spec("The toolkit version the image carries: init writes it as the variant's `toolkit`.")
    packages: tuple[str, ...] = spec(
        "Debian packages of the toolkit (`pkg/ARCHIVE` from another).", default=()
    )
    toolkit_install: tuple[str, ...] | None = spec(
        "Run the backend's install command for the declared toolkit with these arguments "
        "(`[]`: none); absent: no install in the image.",
        default=None,
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
    architectures: str | None = spec(
        "A regular expression matching one GPU architecture name of this backend as its code "
        "containers spell it (`gfx[0-9]{3,4}[a-z]?` for gfx942): what `device-code` reads from the "
        "device sections and compares with a variant's `architectures`. Null: no device code.",
        default=None,
    )
    cmake_spellings: tuple[str, ...] = spec(
        "How CMake projects name this backend in a backend switch or an option (`hip` and `amd` for "
        "rocm), for `release init`; the backend's own name always counts.",
        default=(),
    )
    bare_distribution: bool = spec(
        "Whether `release init` gives this backend's variant the project's own name (CUDA's, as GPU "
        "packages on PyPI do); the others add `-<backend>` (`foo-rocm`, `foo-cpu`).",
        default=False,
    )
    toolkit: ToolkitProbe | None = spec("How to find the toolkit; null for none.")
    runtime_hint: str = spec(
        "What a user installs to provide the runtime. It may name {soname} (the runtime soname a "
        "wheel binds), {releases} (the toolkit releases that provide it: 'ROCm 7.x or 10.x') and "
        "{debian} (its Debian packages)."
    )
    toolkit_name: str = spec(
        "What the toolkit's releases are called in messages: 'ROCm' gives 'ROCm 7.x or 10.x'.", default=""
    )
    driver_sonames: tuple[str, ...] = spec(
        "Sonames of the GPU driver's own libraries an engine may NEED (CUDA's libcuda.so.1, linked "
        "through the toolkit's stubs/libcuda.so for the driver API). The driver provides them at load "
        "time, not a toolkit: bound like the runtime, never vendored (`exclude` must match each), "
        "named in `Requires-External` and by the import guard with `driver_hint`.",
        default=(),
    )
    driver_name: str = spec(
        "What provides `driver_sonames`, in messages ('the NVIDIA driver').", default="the GPU driver"
    )
    driver_hint: str = spec(
        "What a user does when a driver library does not resolve; it may name {soname}.", default=""
    )
    runtime_sonames: Mapping[str, tuple[str, ...]] = spec(
        "The runtime sonames a wheel built with each toolkit major binds, e.g. {'10': ['libamdhip64.so.7']}: "
        "what `runtime-abi` expects for the variant's declared toolkit. A soname need not carry the "
        "toolkit's major (HIP's follows HIP_VERSION_MAJOR: ROCm 7.x and 10.x both give .so.7).",
        default_factory=dict,
    )
    runtime_places: tuple[RuntimePlace, ...] = spec(
        "Where a wheel's import looks for a runtime soname, in order; the first place that has it "
        "gives the process's one copy (a copy already loaded comes first). The reference engine's "
        "import check and the guard `release init` writes read them; the message names every place "
        "looked. Empty: the dynamic loader's path only.",
        default=(),
    )
    single_copy: tuple[str, ...] = spec(
        "Library names (`libamdhip64`) of which a process may hold one file only: smoke fails a leg "
        "whose process, after the imports, maps two files of one of them, naming both.",
        default=(),
    )
    debian_runtime: Mapping[str, tuple[str, ...]] = spec(
        "The Debian packages that provide each runtime soname, e.g. {'libamdhip64.so.7': ['libamdhip64-7']} "
        "(install scripts, local images and hints).",
        default_factory=dict,
    )
    machines: tuple[str, ...] = spec(
        "The machine architectures this backend has (x86_64, aarch64): the matrix's "
        "`platform.architectures` narrowed for its variants (ROCm and MUSA: [x86_64]). Empty: every one.",
        default=(),
    )
    local_build_image: LocalBuildImage | None = spec(
        "The Debian recipe of a local build image with this backend's toolkit, which `release init` "
        "writes into each such variant's `build_image.debian` (suite: the toolkit's base suite).",
        default=None,
    )
    container: ContainerDevices = spec(
        "What a container of this backend's GPU legs is given: device nodes, groups, IPC, environment.",
        default_factory=ContainerDevices,
    )
    debian_archive: Mapping[str, str] = spec(
        "The Debian archive that carries each runtime soname's packages where the stable suites do not "
        "('sid', 'experimental'): the install script takes them from there, pinned, the C library "
        "staying the base suite's.",
        default_factory=dict,
    )

    @property
    def places(self) -> tuple[RuntimePlace, ...]:
        """`runtime_places`, or the dynamic loader's path where the data names none."""
        return self.runtime_places or (RuntimePlace(kind="loader"),)

    @property
    def spellings(self) -> tuple[str, ...]:
        """Every name a CMake project may give this backend, its own first."""
        return tuple(dict.fromkeys((self.name, *self.cmake_spellings)))

    def machines_of(self, declared: Sequence[str]) -> tuple[str, ...]:
        """The matrix's machines (in its order) that this backend has."""
        return tuple(m for m in declared if not self.machines or m in self.machines)

    @property
    def release_name(self) -> str:
        return self.toolkit_name or self.title

    def sonames_for(self, toolkit: str | None) -> tuple[str, ...]:
        """The runtime sonames a wheel built with `toolkit` (e.g. '10.0') binds; () when unknown."""
        if not toolkit:
            return ()
        return tuple(self.runtime_sonames.get(toolkit.split(".", 1)[0], ()))

    def majors_providing(self, soname: str) -> tuple[str, ...]:
        """The toolkit majors whose runtime is `soname`, in numeric order ('7', '10')."""
        majors = [m for m, names in self.runtime_sonames.items() if soname in names]
        return tuple(sorted(majors, key=_numeric))

    def releases_providing(self, soname: str) -> str:
        """The toolkit releases that provide `soname`, for a person: 'ROCm 7.x or 10.x'."""
        majors = self.majors_providing(soname)
        if not majors:
            return f"a {self.release_name} release that provides {soname}"
        return f"{self.release_name} " + " or ".join(f"{m}.x" for m in majors)

    def driver_help(self, soname: str) -> str:
        """`driver_hint` for one driver soname: what a user installs so that the loader finds it."""
        return self.driver_hint.format(soname=soname)

    def runtime_help(self, soname: str) -> str:
        """`runtime_hint` for one soname: what a user installs so that the loader finds it."""
        packages = " ".join(self.debian_runtime.get(soname, ())) or soname
        archive = self.debian_archive.get(soname)
        if archive and archive != "sid":
            # Only that archive carries it (HIP 7.2: experimental): apt must be pointed there.
            packages = f"-t {archive} {packages}"
        releases = self.releases_providing(soname)
        return self.runtime_hint.format(soname=soname, releases=releases, debian=packages)

    def script_rows(self) -> list[tuple[str, ...]]:
        """One row per toolkit major for the install scripts' table (see `runtime_table`)."""
        rows: list[tuple[str, ...]] = []
        for major in sorted(self.runtime_sonames, key=_numeric):
            for soname in self.runtime_sonames[major]:
                debian = ",".join(self.debian_runtime.get(soname, ())) or "-"
                archive = self.debian_archive.get(soname) or "-"
                rows.append((self.name, major, soname, debian, archive, self.releases_providing(soname)))
        return rows


SCHEMA_FILE = Path(__file__).with_name("backend.schema.json")
SCHEMA_ID = "https://example.invalid/gpu-wheel-release/config/backend.schema.json"

HINT_FIELDS = frozenset({"soname", "releases", "debian"})
"""The placeholders `runtime_hint` may use."""

RUNTIME_TABLE = "runtimes.tsv"
"""The install scripts' copy of the soname table, beside them (written by `release schema --write`)."""


def _numeric(major: str) -> tuple[int, str]:
    return (int(major), major) if major.isdigit() else (1 << 30, major)


def runtime_table(backends: Iterable[Backend]) -> str:
    """The soname table as the install scripts read it (bash, no Python needed: the scripts also
    run in a bare Debian and in manylinux's before-all): one tab-separated row per toolkit major."""
    head = [
        "# Generated from packaging/backends/*.json by `python -m release schema --write`: do not edit.",
        "# The install scripts read it (bash): per toolkit major, the runtime soname a wheel binds, the",
        "# Debian packages that provide it, the Debian archive that carries them ('-': the distribution's",
        "# own) and the releases that provide that soname. Tab-separated; '-' is empty.",
        "# backend\tmajor\tsoname\tdebian\tarchive\treleases",
    ]
    rows = ["\t".join(row) for b in sorted(backends, key=lambda b: b.name) for row in b.script_rows()]
    return "\n".join([*head, *rows]) + "\n"


TOOLKIT_TABLE = "toolkits.tsv"
"""The install scripts' copy of each backend's version probe, beside them (`release schema --write`)."""


def toolkit_table(backends: Iterable[Backend]) -> str:
    """How the install scripts read an installed toolkit's version, as the toolkit does
    (`release.machine.toolchain.read_version`): one tab-separated row per backend with a toolkit."""
    head = [
        "# Generated from packaging/backends/*.json by `python -m release schema --write`: do not edit.",
        "# The install scripts read it (bash, _common.sh toolkit_probe): per backend, the version header,",
        "# its macro(s), the place values of one macro ('-': each macro is one part) and the version",
        "# files (space-separated, the first found wins), relative to the toolkit's prefix. '-' is empty.",
        "# backend\theader\tdefines\tplaces\tfiles",
    ]
    rows = []
    for b in sorted(backends, key=lambda b: b.name):
        t = b.toolkit
        if t is None:
            continue
        places = ",".join(str(p) for p in t.version_places) or "-"
        files = " ".join(t.version_files) or "-"
        rows.append("\t".join((b.name, t.version_header or "-", t.version_define or "-", places, files)))
    return "\n".join([*head, *rows]) + "\n"


def _check(backend: Backend, file: str, lines: Mapping[str, int]) -> list[Problem]:
    """What the model cannot say: the tables agree with each other and the hint's placeholders exist."""
    problems: list[Problem] = []
    sonames = {s for names in backend.runtime_sonames.values() for s in names}
    for key in ("debian_runtime", "debian_archive"):
        table: Mapping[str, object] = getattr(backend, key)
        for soname in table:
            if soname not in sonames:
                known = ", ".join(sorted(sonames)) or "none"
                where = f"{key}.{soname}"
                message = f"{soname!r} is no runtime soname of runtime_sonames (known: {known})"
                problems.append(Problem(file, lines.get(where, lines.get(key)), where, message))
    try:
        parsed = string.Formatter().parse(backend.runtime_hint)
        fields = {name for _text, name, _spec, _conv in parsed if name}
    except ValueError as exc:
        fields, message = set(), f"not a template: {exc} (write a literal brace as {{{{ or }}}})"
        problems.append(Problem(file, lines.get("runtime_hint"), "runtime_hint", message))
    unknown = sorted(fields - HINT_FIELDS)
    if unknown:
        message = f"unknown placeholder {{{unknown[0]}}} (known: {', '.join(sorted(HINT_FIELDS))})"
        problems.append(Problem(file, lines.get("runtime_hint"), "runtime_hint", message))
    problems.extend(_driver_problems(backend, file, lines, sonames))
    problems.extend(_place_problems(backend, file, lines))
    if backend.architectures is not None:
        problem = _pattern_problem(backend.architectures)
        if problem:
            problems.append(Problem(file, lines.get("architectures"), "architectures", problem))
    problems.extend(_machine_problems(backend, file, lines))
    probe = backend.toolkit
    if probe is not None and probe.version_places:
        places = list(probe.version_places)
        if any(p <= 0 for p in places) or places != sorted(set(places), reverse=True):
            where = "toolkit.version_places"
            message = "expected positive place values, largest first (e.g. [1000, 10])"
            problems.append(Problem(file, lines.get(where, lines.get("toolkit")), where, message))
    if "debian" in fields:
        for soname in sorted(sonames - set(backend.debian_runtime)):
            message = f"names {{debian}}, but debian_runtime has no package for {soname}"
            problems.append(Problem(file, lines.get("runtime_hint"), "runtime_hint", message))
    return problems


def _machine_problems(backend: Backend, file: str, lines: Mapping[str, int]) -> list[Problem]:
    problems: list[Problem] = []
    for index, machine in enumerate(backend.machines):
        if machine not in MACHINES:
            where = f"machines[{index}]"
            message = f"{machine!r} is no machine architecture (known: {', '.join(MACHINES)})"
            problems.append(Problem(file, lines.get(where, lines.get("machines")), where, message))
    return problems


def _driver_problems(
    backend: Backend, file: str, lines: Mapping[str, int], runtime: set[str]
) -> list[Problem]:
    """Driver libraries are excluded by default, are no runtime soname, and have a hint."""
    problems: list[Problem] = []
    where = "driver_sonames"
    for soname in backend.driver_sonames:
        if soname in runtime:
            message = f"{soname!r} is a runtime soname (runtime_sonames): a driver library is the driver's"
            problems.append(Problem(file, lines.get(where), where, message))
        elif not any(fnmatch.fnmatchcase(soname, glob) for glob in backend.exclude):
            stem = soname.split(".so")[0]
            message = f"{soname!r} matches no `exclude` glob: repair would vendor the driver (add {stem}.so*)"
            problems.append(Problem(file, lines.get(where), where, message))
    if backend.driver_sonames and not backend.driver_hint:
        message = "driver_sonames need a driver_hint (what a user installs: the driver)"
        problems.append(Problem(file, lines.get(where), "driver_hint", message))
    try:
        fields = {name for _t, name, _s, _c in string.Formatter().parse(backend.driver_hint) if name}
    except ValueError as exc:
        fields = set()
        message = f"not a template: {exc} (write a literal brace as {{{{ or }}}})"
        problems.append(Problem(file, lines.get("driver_hint"), "driver_hint", message))
    if fields - {"soname"}:
        message = f"unknown placeholder {{{sorted(fields - {'soname'})[0]}}} (known: soname)"
        problems.append(Problem(file, lines.get("driver_hint"), "driver_hint", message))
    return problems


def _place_problems(backend: Backend, file: str, lines: Mapping[str, int]) -> list[Problem]:
    """Each place has what its kind reads: a path (absolute for `directory`) or a module."""
    problems: list[Problem] = []
    for index, place in enumerate(backend.runtime_places):
        where = f"runtime_places[{index}]"
        line = lines.get(where, lines.get("runtime_places"))
        if place.kind in ("site-packages", "directory") and not place.path:
            problems.append(Problem(file, line, where, f"a {place.kind} place needs a `path`"))
        elif place.kind == "directory" and not str(place.path).startswith("/"):
            problems.append(Problem(file, line, where, f"expected an absolute path, got {place.path!r}"))
        elif place.kind == "site-packages" and str(place.path).startswith("/"):
            problems.append(Problem(file, line, where, "expected a path relative to site-packages"))
        if place.kind == "sdk-module" and not place.module:
            problems.append(Problem(file, line, where, "an sdk-module place needs a `module` (rocm_sdk)"))
    return problems


def _pattern_problem(pattern: str) -> str | None:
    if not pattern.isascii():
        return "expected an ASCII regular expression"
    try:
        compiled = re.compile(pattern.encode("ascii"))
    except re.error as exc:
        return f"not a regular expression: {exc}"
    if compiled.match(b""):
        return "matches the empty string: it must match one architecture name (e.g. gfx[0-9]{3,4})"
    return None


def _without_schema_key(node: yaml.Node) -> yaml.Node:
    """The document less its `$schema` key: it names the committed schema for editors."""
    if isinstance(node, yaml.MappingNode):
        node.value = [
            (k, v) for k, v in node.value if not (isinstance(k, yaml.ScalarNode) and k.value == "$schema")
        ]
    return node


def load_backends(directories: Path | Sequence[Path]) -> dict[str, Backend]:
    """Every `*.json` backend of the directories, validated; a later directory adds backends or
    replaces those of the same name. Each file's name must match its `name`."""
    dirs = [directories] if isinstance(directories, Path) else list(directories)
    problems: list[Problem] = []
    backends: dict[str, Backend] = {}
    files: list[Path] = []
    for directory in dirs:
        entries = list(directory.iterdir()) if directory.is_dir() else []
        files += sorted((f for f in entries if f.name.endswith(".json")), key=lambda f: f.name)
    if not files:
        shown = ", ".join(str(d) for d in dirs)
        raise MatrixError([Problem(shown, None, "", "no backend data (*.json) found")])
    for file in files:
        reader = DocumentReader(str(file))
        try:
            node = _without_schema_key(compose(file.read_text(encoding="utf-8"), str(file)))
            backend = reader.read(node, Backend, "")
        except MatrixError as exc:
            problems.extend(exc.problems)
            continue
        problems.extend(reader.problems)
        if reader.problems:
            continue
        checked = _check(backend, str(file), reader.lines)
        if checked:
            problems.extend(checked)
            continue
        stem = file.name.removesuffix(".json")
        if backend.name != stem:
            problems.append(
                Problem(
                    str(file), reader.lines.get("name", 1), "name", f"must be {stem!r} like the file name"
                )
            )
            continue
        backends[backend.name] = backend
    if problems:
        raise MatrixError(problems)
    return backends


def schema() -> dict[str, object]:
    """The JSON Schema of a backend file, generated from the model (`$schema` names it for editors)."""
    generated = json_schema(
        Backend, title="Backend data (packaging/backends/<name>.json)", schema_id=SCHEMA_ID
    )
    properties = generated.get("properties")
    if isinstance(properties, dict):
        generated["properties"] = {
            "$schema": {"type": "string", "description": "This schema, for editors."},
            **properties,
        }
    return generated


def schema_text() -> str:
    return json.dumps(schema(), indent=2) + "\n"
