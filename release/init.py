"""`python -m release init`: write a starter `matrix.yaml` for a project.

It reads what the project says about itself (`pyproject.toml`: name, build backend, CMake or not,
console scripts, `requires-python`) and, when wheels built from it are given, what those wheels
need (their ELF files' NEEDED entries), and writes a commented matrix with the variants asked
for. Everything it derives is data: distribution names, runtime excludes (from
`packaging/backends`), Python versions, system libraries. What it cannot know (toolkit versions,
images, hardware, a core prebuild, smoke commands beyond the import) is left as commented
examples for the maintainer.
"""

from __future__ import annotations

import argparse
import configparser
import fnmatch
import json
import os
import posixpath
import re
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from tomlkit.exceptions import TOMLKitError

from release.backends import Backend, load_backends
from release.dataschema import suggest
from release.elf import ElfReadError, inspect_elf, is_elf
from release.errors import MatrixError, UsageError
from release.matrix import (
    SCHEMA_FILE,
    SUPPORTED_PYTHONS,
    LoadedMatrix,
    Publish,
    default_backends_dir,
    loads,
)

DEFAULT_FLOOR = "manylinux_2_28_x86_64"
SKBUILD = "scikit_build_core"
# CUDA wheels keep the project's own name (what `pip install <name>` has always meant); every
# other backend adds its name, like foo-engine / foo-engine-rocm / foo-engine-cpu.
BARE_NAME_BACKEND = "cuda"
# Backend names as CMake projects often spell them.
_CMAKE_SPELLINGS = {"rocm": ("rocm", "hip", "amd"), "cuda": ("cuda", "nvidia"), "musa": ("musa",)}
_LOADER_GLOBS = ("ld-linux*.so*", "ld64.so*")
_NOT_PACKAGES = {"test", "tests", "docs", "doc", "examples", "benchmarks", "build", "scripts", "tools"}
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


@dataclass(frozen=True, kw_only=True)
class Project:
    """What `pyproject.toml` and the project tree say."""

    path: Path
    name: str
    version: str | None
    description: str | None
    build_backend: str
    requires_python: str | None
    console_scripts: tuple[str, ...]
    import_name: str
    cmake: bool
    cmake_backend_variable: str | None = None
    cmake_backend_values: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class WheelFacts:
    """What built wheels of the project carry."""

    names: tuple[str, ...] = ()
    needed: tuple[str, ...] = ()
    provided: tuple[str, ...] = ()
    scripts: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Plan:
    """Everything the generated matrix holds."""

    project: Project
    source: str
    variants: Mapping[str, Backend]
    pythons: tuple[str, ...]
    scripts: tuple[str, ...]
    system_libraries: tuple[str, ...]
    wheels: tuple[str, ...] = ()
    schema_ref: str = field(default="release/matrix.schema.json")
    floor: str = DEFAULT_FLOOR


# --- pure parts ----------------------------------------------------------------------------------


def base_name(project_name: str, backends: Iterable[str]) -> str:
    """The project name without a trailing `-<backend>` (a project named `foo-rocm` gives `foo`)."""
    for backend in sorted(backends, key=len, reverse=True):
        for sep in ("-", "_", "."):
            suffix = f"{sep}{backend}"
            if project_name.lower().endswith(suffix) and len(project_name) > len(suffix):
                return project_name[: -len(suffix)]
    return project_name


def distribution_name(project_name: str, backend: str, backends: Iterable[str] = ()) -> str:
    """`foo` + rocm -> `foo-rocm`; cuda keeps `foo`; cpu -> `foo-cpu`."""
    base = base_name(project_name, {*backends, backend})
    return base if backend == BARE_NAME_BACKEND else f"{base}-{backend}"


def pythons_allowed(
    requires_python: str | None, supported: Sequence[str] = SUPPORTED_PYTHONS
) -> tuple[str, ...]:
    """The supported CPython versions that `requires-python` admits (any patch release counts)."""
    if not requires_python:
        return tuple(supported)
    try:
        spec = SpecifierSet(requires_python)
    except InvalidSpecifier:
        msg = f"requires-python {requires_python!r} is not a valid version specifier (PEP 440)"
        raise UsageError(msg) from None
    allowed = tuple(
        version for version in supported if any(spec.contains(f"{version}.{patch}") for patch in range(100))
    )
    if not allowed:
        msg = (
            f"requires-python {requires_python!r} admits none of the Pythons the toolkit builds "
            f"({', '.join(supported)})"
        )
        raise UsageError(msg)
    return allowed


def system_libraries(
    needed: Iterable[str],
    *,
    policy_libraries: Iterable[str],
    runtime_globs: Iterable[str],
    provided: Iterable[str],
) -> tuple[str, ...]:
    """NEEDED names that are neither in the manylinux policy, nor a GPU runtime, nor in the wheel."""
    policy = set(policy_libraries)
    globs = (*runtime_globs, *_LOADER_GLOBS)
    inside = set(provided)
    kept = {
        name
        for name in needed
        if name not in policy and name not in inside and not any(fnmatch.fnmatchcase(name, g) for g in globs)
    }
    return tuple(sorted(kept))


def cmake_value(backend: str, values: Sequence[str]) -> str:
    """The value a CMake backend switch takes for a toolkit backend (rocm -> hip when it says hip)."""
    if not values or backend in values:
        return backend
    for spelling in _CMAKE_SPELLINGS.get(backend, ()):
        if spelling in values:
            return spelling
    return backend


def parse_cmake_backend(text: str) -> tuple[str | None, tuple[str, ...]]:
    """A `<X>_BACKEND` cache variable of a CMakeLists.txt and the values its STRINGS property lists."""
    match = re.search(r"\bset\s*\(\s*([A-Za-z][A-Za-z0-9_]*_BACKEND)\b[^)]*\bCACHE\b", text)
    if match is None:
        match = re.search(r"\boption\s*\(\s*([A-Za-z][A-Za-z0-9_]*_BACKEND)\b", text)
    if match is None:
        return None, ()
    name = match.group(1)
    strings = re.search(
        rf"set_property\s*\(\s*CACHE\s+{re.escape(name)}\s+PROPERTY\s+STRINGS\s+([^)]*)\)", text
    )
    values = tuple(v.strip("\"'") for v in strings.group(1).replace(";", " ").split()) if strings else ()
    return name, values


def check_output(path: Path, *, force: bool) -> None:
    """Refuse to overwrite an existing file unless `force`."""
    if path.exists() and not force:
        msg = f"{path} already exists: pass --force to overwrite it (or --output another file)"
        raise UsageError(msg)


def parse_variants(text: str | None, known: Sequence[str]) -> tuple[str, ...]:
    """`cpu,rocm` -> ('cpu', 'rocm'); default: every known backend, cpu first."""
    if not text:
        return tuple(sorted(known, key=lambda b: (b != "cpu", b != BARE_NAME_BACKEND, b)))
    chosen: list[str] = []
    for raw in text.split(","):
        name = raw.strip()
        if not name:
            continue
        if name not in known:
            msg = (
                f"--variants: unknown backend {name!r}{suggest(name, list(known))} "
                f"(known: {', '.join(sorted(known))}; add packaging/backends/{name}.json to teach a new one)"
            )
            raise UsageError(msg)
        if name not in chosen:
            chosen.append(name)
    if not chosen:
        msg = "--variants: name at least one backend (e.g. cpu,rocm)"
        raise UsageError(msg)
    return tuple(chosen)


def _scalar(value: str) -> str:
    """A YAML scalar: plain when it cannot be misread, JSON-quoted (valid YAML) otherwise."""
    plain = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", value) is not None
    if plain and value.lower() not in _YAML_WORDS:
        return value
    return json.dumps(value)


def _flow(values: Iterable[str]) -> str:
    return "[" + ", ".join(_scalar(v) for v in values) + "]"


def render(plan: Plan) -> str:
    """The commented matrix text."""
    p = plan.project
    out: list[str] = []
    add = out.append
    upper = p.import_name.upper()
    from_wheels = f" and {', '.join(plan.wheels)}" if plan.wheels else ""
    add(f"# yaml-language-server: $schema={plan.schema_ref}")
    add("#")
    add(f"# The release matrix of {p.name}, started by `python -m release init` from")
    add(f"# {plan.source}/pyproject.toml{from_wheels}.")
    add("# The only file to edit to add a Python version, a variant, an image or a hardware tier;")
    add("# `python -m release plan` shows what it expands to. Lines marked `yours:` are for you to fill")
    add("# in: init cannot know them. Keys starting with `x-` are free for YAML anchors.")
    add("schema_version: 1")
    add("")
    add("engine:")
    add(f"  # The PEP 517 project ({_backend_label(p)}), relative to this file.")
    add(f"  source: {_scalar(plan.source)}")
    add("  # The import package every variant ships: one import name, one distribution per variant.")
    add(f"  import_name: {_scalar(p.import_name)}")
    add("  # Version of local builds; a tag push (v1.2.3) sets the release version.")
    add(f"  version: {json.dumps(p.version or '0.0.0')}")
    add("  # Console commands every wheel must install ([project.scripts] and the wheel's scripts).")
    add(f"  scripts: {_flow(plan.scripts)}")
    add("  # Globs of the engine's own shared libraries: no runtime exclude may ever match them.")
    add(f"  own_libraries: {_flow([f'lib{p.import_name}*'])}")
    if p.cmake:
        add("  # yours (optional): compile the C++ core once per variant instead of once per Python; the")
        add("  # wheel build finds it through `prefix_define`. Without a prebuild, ccache speeds rebuilds.")
        add("  # prebuild:")
        add("  #   cmake_source: .")
        add(f'  #   cmake_args: ["-D{upper}_BUILD_PYTHON=OFF"]')
        add(f"  #   prefix_define: {upper}_CORE_PREFIX")
    add("  # Written into every variant's staged pyproject.toml; a variant's own `metadata` overrides it.")
    add("  metadata:")
    if p.description:
        add(f"    description: {json.dumps(p.description)}")
    else:
        add("    description: null  # yours: a one-line summary")
    add("    # keywords: [kv-cache, transfer-engine]  # yours")
    add("  smoke:")
    add(f"    # Run in a fresh venv after `import {p.import_name}`; `{{python}}` is that venv's interpreter.")
    add("    # A command printing a JSON object with `ok` must report `ok: true`. yours: a self-test, e.g.")
    for script in plan.scripts:
        add(f"    #   - [{_scalar(script)}, --version]")
    add(f'    #   - ["{{python}}", "-m", {_scalar(p.import_name)}, selftest]')
    add("    commands: []")
    add("")
    requires = f"requires-python {p.requires_python!r}" if p.requires_python else "no requires-python"
    add(f"# CPython versions to build for: those of 3.10-3.13 that {requires} admits.")
    add(f"python: {_flow(plan.pythons)}")
    add("")
    add("platform:")
    add("  # Oldest platform tag of the release wheels (the manylinux_2_28 containers build them);")
    add("  # a host build says which tag that host can honestly claim.")
    add(f"  floor: {plan.floor}")
    add("  # Libraries outside the manylinux policy that the wheels NEED from the user's system: kept")
    if plan.wheels:
        add("  # as NEEDED, never vendored. Found in the wheels given to init.")
    else:
        add("  # as NEEDED, never vendored. Run init with --wheel to find them.")
    add(f"  system_libraries: {_flow(plan.system_libraries)}")
    add("")
    add("# One wheel family per accelerator runtime. distribution: its name on the index (cuda keeps")
    add("# the project's name, the others add -<backend>); backend: a file in packaging/backends/;")
    add("# exclude: the runtime libraries repair keeps as NEEDED (bound at load time, never vendored).")
    if p.cmake and p.cmake_backend_variable:
        add(f"# cmake_defines: CMake cache variables ({p.cmake_backend_variable}, read from CMakeLists.txt).")
    elif p.cmake:
        add("# cmake_defines: yours: the CMake switch that selects the runtime in your CMakeLists.txt.")
    add('# yours, per GPU variant: toolkit (the version release builds use, e.g. "6.4"), architectures,')
    add("# device_code, images and hardware (names defined below), metadata.")
    add("variants:")
    for name, backend in plan.variants.items():
        add(f"  {name}:")
        add(f"    distribution: {_scalar(distribution_name(p.name, name, plan.variants))}")
        add(f"    backend: {_scalar(backend.name)}")
        if p.cmake:
            variable = p.cmake_backend_variable or f"{upper}_BACKEND"
            value = cmake_value(name, p.cmake_backend_values)
            add(f"    cmake_defines: {{{_scalar(variable)}: {_scalar(value)}}}")
        if backend.exclude:
            add(f"    exclude: {_flow(backend.exclude)}")
    add("")
    add("# yours: serving images the wheels must work in, e.g.")
    add("#   vllm-rocm:")
    add('#     container: "docker.io/rocm/vllm:<tag>"')
    add("#     simulate: {runtime: prefix, prefix: /opt/rocm/lib, via: LD_LIBRARY_PATH}")
    add("images: {}")
    add("")
    add("# yours: self-hosted GPU runner tiers, e.g.")
    add('#   mi300x: {gpu: "AMD Instinct MI300X", architecture: gfx942, runner: [self-hosted, mi300x]}')
    add("hardware: {}")
    add("")
    defaults = Publish()
    add("# Where a tag push publishes (the defaults: PyPI; pre-releases to TestPyPI).")
    add("publish:")
    add(f"  tag_pattern: {json.dumps(defaults.tag_pattern)}")
    add(f"  repository: {json.dumps(defaults.repository)}")
    add(f"  prerelease: {defaults.prerelease}")
    if defaults.prerelease_repository is not None:
        add(f"  prerelease_repository: {json.dumps(defaults.prerelease_repository)}")
    add(f"  github_release: {'true' if defaults.github_release else 'false'}")
    return "\n".join(out) + "\n"


def _backend_label(project: Project) -> str:
    label = project.build_backend.split(".")[0].split(":")[0].replace("_", "-")
    return f"{label}, CMake" if project.cmake and "cmake" not in label and "scikit" not in label else label


# --- reading the project and its wheels ----------------------------------------------------------


def _table(data: Mapping[str, Any], *keys: str) -> Mapping[str, Any]:
    current: Any = data
    for key in keys:
        current = current.get(key, {}) if isinstance(current, Mapping) else {}
    return current if isinstance(current, Mapping) else {}


def find_import_name(project_dir: Path, pyproject: Mapping[str, Any], name: str) -> str:
    """The top-level package: from the backend's package settings, else the tree, else the name."""
    wanted = re.sub(r"[-.]+", "_", name).lower()
    skbuild = _table(pyproject, "tool", "scikit-build", "wheel").get("packages")
    if isinstance(skbuild, list) and skbuild:
        return posixpath.basename(str(skbuild[0]).rstrip("/"))
    packages = _table(pyproject, "tool", "setuptools").get("packages")
    if isinstance(packages, list):
        tops = [str(p) for p in packages if "." not in str(p)]
        if tops:
            return tops[0]
    found: list[str] = []
    for where in (project_dir, project_dir / "src", project_dir / "python"):
        if where.is_dir():
            found += sorted(
                p.parent.name
                for p in where.glob("*/__init__.py")
                if p.parent.name.isidentifier() and p.parent.name not in _NOT_PACKAGES
            )
    for candidate in found:
        if wanted.startswith(candidate.lower()) or candidate.lower().startswith(wanted):
            return candidate
    return found[0] if found else wanted


def read_project(project_dir: Path) -> Project:
    file = project_dir / "pyproject.toml"
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        msg = f"{file}: cannot read ({exc.strerror}); init needs a PEP 517 project with a pyproject.toml"
        raise UsageError(msg) from None
    try:
        data: dict[str, Any] = tomlkit.parse(text).unwrap()
    except TOMLKitError as exc:
        msg = f"{file}: invalid TOML ({exc})"
        raise UsageError(msg) from None
    project = _table(data, "project")
    name = project.get("name")
    if not isinstance(name, str) or not name:
        msg = f"{file}: no [project] name (PEP 621): the toolkit names every variant from it"
        raise UsageError(msg)
    backend = str(_table(data, "build-system").get("build-backend") or "setuptools.build_meta:__legacy__")
    skbuild = backend.startswith(SKBUILD)
    cmake_dir = project_dir / str(_table(data, "tool", "scikit-build", "cmake").get("source-dir", "."))
    cmake_lists = cmake_dir / "CMakeLists.txt"
    cmake = skbuild and cmake_lists.is_file()
    variable, values = parse_cmake_backend(_cmake_text(cmake_dir)) if cmake else (None, ())
    scripts = _table(data, "project", "scripts")
    version = project.get("version")
    description = project.get("description")
    requires = project.get("requires-python")
    return Project(
        path=project_dir,
        name=name,
        version=str(version) if isinstance(version, str) else None,
        description=str(description) if isinstance(description, str) else None,
        build_backend=backend,
        requires_python=str(requires) if isinstance(requires, str) else None,
        console_scripts=tuple(str(s) for s in scripts),
        import_name=find_import_name(project_dir, data, name),
        cmake=cmake,
        cmake_backend_variable=variable,
        cmake_backend_values=values,
    )


def _cmake_text(directory: Path) -> str:
    files = [directory / "CMakeLists.txt", *sorted((directory / "cmake").glob("*.cmake"))]
    return "\n".join(f.read_text(encoding="utf-8", errors="replace") for f in files if f.is_file())


def read_wheels(wheels: Sequence[Path]) -> WheelFacts:
    """NEEDED names, names the wheels provide, scripts and top-level packages of built wheels."""
    needed: set[str] = set()
    provided: set[str] = set()
    scripts: set[str] = set()
    packages: set[str] = set()
    for wheel in wheels:
        try:
            archive = zipfile.ZipFile(wheel)
        except (OSError, zipfile.BadZipFile) as exc:
            msg = f"--wheel {wheel}: not a readable wheel ({exc})"
            raise UsageError(msg) from None
        with archive:
            for info in archive.infolist():
                member = info.filename
                top = member.split("/", 1)[0]
                if member.endswith("/__init__.py") and member.count("/") == 1:
                    packages.add(top)
                if re.match(r"^[^/]+\.data/scripts/[^/]+$", member):
                    scripts.add(posixpath.basename(member))
                if re.match(r"^[^/]+\.dist-info/entry_points\.txt$", member):
                    scripts.update(_console_scripts(archive.read(info).decode("utf-8", "replace")))
                if info.is_dir() or info.file_size < 64:
                    continue
                with archive.open(info) as stream:
                    if not is_elf(stream.read(4)):
                        continue
                try:
                    elf = inspect_elf(member, archive.read(info))
                except ElfReadError:
                    continue
                needed.update(elf.needed)
                provided.add(posixpath.basename(member))
                if elf.soname:
                    provided.add(elf.soname)
    return WheelFacts(
        names=tuple(w.name for w in wheels),
        needed=tuple(sorted(needed)),
        provided=tuple(sorted(provided)),
        scripts=tuple(sorted(scripts)),
        packages=tuple(sorted(packages)),
    )


def _console_scripts(text: str) -> list[str]:
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    return list(parser["console_scripts"]) if parser.has_section("console_scripts") else []


def policy_libraries(floor: str) -> frozenset[str]:
    """The libraries auditwheel's policy for the floor allows (e.g. manylinux_2_28)."""
    from release.verify import manylinux_policies  # noqa: PLC0415 (auditwheel's data, read on use)

    name = re.sub(r"_(x86_64|aarch64|i686|ppc64le|s390x|armv7l)$", "", floor)
    for policy in manylinux_policies():
        if policy.name == name:
            return policy.libraries
    msg = f"auditwheel has no {name} policy"
    raise UsageError(msg)


def make_plan(
    project: Project,
    *,
    output: Path,
    backends: Mapping[str, Backend],
    variants: Sequence[str],
    wheels: WheelFacts,
    import_name: str | None = None,
    floor: str = DEFAULT_FLOOR,
    policy: Iterable[str] = (),
) -> Plan:
    if import_name is None and wheels.packages and project.import_name not in wheels.packages:
        wanted = re.sub(r"[-.]+", "_", project.name).lower()
        import_name = next((p for p in wheels.packages if wanted.startswith(p.lower())), wheels.packages[0])
    if import_name is not None:
        project = Project(**{**vars(project), "import_name": import_name})
    runtime_globs = sorted({g for b in backends.values() for g in (*b.runtime_libraries, *b.exclude)})
    system = system_libraries(
        wheels.needed, policy_libraries=policy, runtime_globs=runtime_globs, provided=wheels.provided
    )
    out_dir = output.resolve().parent
    source = Path(os.path.relpath(project.path.resolve(), out_dir)).as_posix()
    schema_ref = Path(os.path.relpath(SCHEMA_FILE, out_dir)).as_posix()
    if schema_ref.startswith("../../"):
        schema_ref = SCHEMA_FILE.as_posix()
    return Plan(
        project=project,
        source=source,
        variants={name: backends[name] for name in variants},
        pythons=pythons_allowed(project.requires_python),
        scripts=tuple(dict.fromkeys((*project.console_scripts, *wheels.scripts))),
        system_libraries=system,
        wheels=wheels.names,
        schema_ref=schema_ref,
        floor=floor,
    )


# --- the command ---------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("path", nargs="?", type=Path, default=Path(), metavar="PATH", help="the project (default: .)")
    add("--variants", help="backends to make variants of, comma-separated (default: every known backend)")
    add(
        "--wheel",
        action="append",
        type=Path,
        default=[],
        help="a wheel built from the project, before repair: its scripts and system libraries are read "
        "(repeatable)",
    )
    add("--import-name", help="the top-level import package (default: found in the project)")
    add("--output", type=Path, default=Path("matrix.yaml"), help="file to write (default: %(default)s)")
    add("--force", action="store_true", help="overwrite the output file if it exists")


def run(args: argparse.Namespace, loaded: LoadedMatrix | None) -> int:
    output: Path = args.output
    check_output(output, force=args.force)
    project_dir: Path = args.path
    if not project_dir.is_dir():
        msg = f"{project_dir}: no such project directory"
        raise UsageError(msg)
    backends = load_backends(default_backends_dir(output))
    project = read_project(project_dir)
    variants = parse_variants(args.variants, list(backends))
    for wheel in args.wheel:
        if not wheel.is_file():
            msg = f"--wheel {wheel}: no such file"
            raise UsageError(msg)
    facts = read_wheels(args.wheel)
    plan = make_plan(
        project,
        output=output,
        backends=backends,
        variants=variants,
        wheels=facts,
        import_name=args.import_name,
        policy=policy_libraries(DEFAULT_FLOOR),
    )
    text = render(plan)
    try:
        loads(text, path=output.resolve())
    except MatrixError as exc:  # a bug of init, never the user's: say so plainly
        msg = f"init produced a matrix that does not load (please report this):\n{exc}"
        raise UsageError(msg) from None
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    print(f"wrote {output}: {_variants_text(plan.variants)} of {project.name} (import {project.import_name})")
    print(f"  python: {', '.join(plan.pythons)}; scripts: {', '.join(plan.scripts) or 'none'}")
    print(
        f"  system libraries: {', '.join(plan.system_libraries) or 'none'}"
        + ("" if facts.names else " (no --wheel given: none read)")
    )
    print(f"next: fill in the `yours:` lines, then `python -m release --matrix {output} plan`")
    return 0


def _variants_text(variants: Mapping[str, Backend]) -> str:
    return f"{len(variants)} variant(s) ({', '.join(variants)})"
