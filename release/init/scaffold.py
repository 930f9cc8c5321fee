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

import fnmatch
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from release.config.backends import Backend
from release.config.checks import SUPPORTED_PYTHONS
from release.config.dataschema import suggest
from release.config.globs import known_runtime_globs
from release.config.matrix import Publish
from release.config.pythons import python, supported_range
from release.errors import UsageError
from release.init.repository import SCHEMA_PATH
from release.init.scan import LOADER_GLOBS, Project, Spellings, WheelFacts, cmake_value, option_backend
from release.init.sysdeps import Proposal, propose

DEFAULT_FLOOR = "manylinux_2_28_x86_64"


# CUDA wheels keep the project's own name (what `pip install <name>` has always meant); every
# other backend adds its name, like foo-engine / foo-engine-rocm / foo-engine-cpu.


_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


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
    spellings: Spellings = field(default_factory=dict)
    """Every known backend's CMake spellings (`Backend.spellings`)."""
    schema_ref: str = field(default=SCHEMA_PATH)
    floor: str = DEFAULT_FLOOR
    system_packages: Proposal | None = None
    """What the CMake files ask for from the system (`find_package`, `pkg_check_modules`)."""


def base_name(project_name: str, backends: Iterable[str]) -> str:
    """The project name without a trailing `-<backend>` (a project named `foo-rocm` gives `foo`)."""
    for backend in sorted(backends, key=len, reverse=True):
        for sep in ("-", "_", "."):
            suffix = f"{sep}{backend}"
            if project_name.lower().endswith(suffix) and len(project_name) > len(suffix):
                return project_name[: -len(suffix)]
    return project_name


_CUDA_SUFFIX = re.compile(r"[-_.](?:cu|cuda)\d*$", re.I | re.ASCII)


def family_name(project: Project) -> str:
    """The name every variant's distribution starts from: the per-variant import packages' common
    name (`mylib` of `mylib_cpu`), else the project's name without a CUDA suffix (`mylib-cu12`)."""
    if project.variant_package is not None:
        return project.variant_package.family.replace("_", "-")
    stripped = _CUDA_SUFFIX.sub("", project.name)
    return stripped or project.name


def distribution_name(project_name: str, backend: str, backends: Mapping[str, Backend]) -> str:
    """`foo` + rocm -> `foo-rocm`; cpu -> `foo-cpu`; a backend whose data says `bare_distribution`
    (cuda) keeps `foo`."""
    base = base_name(project_name, {*backends, backend})
    known = backends.get(backend)
    return base if known is not None and known.bare_distribution else f"{base}-{backend}"


def pythons_allowed(
    requires_python: str | None, supported: Sequence[str] = SUPPORTED_PYTHONS
) -> tuple[str, ...]:
    """The supported CPython versions that `requires-python` admits (any patch release counts): GIL
    builds; a free-threaded one ("3.14t") is one line the maintainer adds once the engine keeps the
    GIL off (docs/free-threading.md)."""
    supported = [v for v in supported if not python(v).free_threaded]
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
    globs = (*runtime_globs, *LOADER_GLOBS)
    inside = set(provided)
    kept = {
        name
        for name in needed
        if name not in policy and name not in inside and not any(fnmatch.fnmatchcase(name, g) for g in globs)
    }
    return tuple(sorted(kept))


def check_output(path: Path, *, force: bool) -> None:
    """Refuse to overwrite an existing file unless `force`."""
    if path.exists() and not force:
        msg = f"{path} already exists: pass --force to overwrite it (or --output another file)"
        raise UsageError(msg)


def parse_variants(text: str | None, backends: Mapping[str, Backend]) -> tuple[str, ...]:
    """`cpu,rocm` -> ('cpu', 'rocm'); default: every known backend, those without a toolkit (cpu)
    first, then the one keeping the bare name (cuda), then by name."""
    known = list(backends)
    if not text:
        order = {n: (b.toolkit is not None, not b.bare_distribution, n) for n, b in backends.items()}
        return tuple(sorted(known, key=order.__getitem__))
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
    parts = [_header(plan), _engine(plan), _python_and_platform(plan), _variants(plan)]
    return "\n".join(line for part in [*parts, _placeholders(), _publish()] for line in part) + "\n"


def _header(plan: Plan) -> list[str]:
    """The schema line and the comment that says where the file came from."""
    out: list[str] = []
    add = out.append
    p = plan.project
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
    return out


def _engine(plan: Plan) -> list[str]:
    """The `engine` mapping: source, import name, scripts, libraries, metadata, smoke."""
    out: list[str] = []
    add = out.append
    p = plan.project
    upper = p.import_name.upper()
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
    if p.own_libraries:
        add("  # (read from the CMake files' add_library(... SHARED) and OUTPUT_NAME)")
    add(f"  own_libraries: {_flow(p.own_libraries or [f'lib{p.import_name}*'])}")
    if plan.system_packages is not None:
        out.extend(render_system_packages(plan.system_packages))
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
    return out


def _python_and_platform(plan: Plan) -> list[str]:
    """The `python` list and the `platform` mapping."""
    out: list[str] = []
    add = out.append
    p = plan.project
    requires = f"requires-python {p.requires_python!r}" if p.requires_python else "no requires-python"
    add(f"# CPython versions to build for: those of {supported_range()} that {requires} admits.")
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
    return out


def _variants(plan: Plan) -> list[str]:
    """The `variants` mapping, with the comments on the project's CMake switches."""
    out: list[str] = []
    add = out.append
    p = plan.project
    add("# One wheel family per accelerator runtime. distribution: its name on the index (cuda keeps")
    add("# the project's name, the others add -<backend>); backend: a file in packaging/backends/;")
    add("# exclude: the runtime libraries repair keeps as NEEDED (bound at load time, never vendored).")
    switches = backend_switches(p, plan.spellings)
    if p.cmake and p.cmake_backend_variable:
        add(f"# cmake_defines: CMake cache variables ({p.cmake_backend_variable}, read from CMakeLists.txt).")
    elif switches:
        add(f"# cmake_defines: the project's CMake options that select a runtime ({', '.join(switches)}),")
        add("# each variant's ON and the others OFF.")
    elif p.cmake:
        add("# cmake_defines: yours: the CMake switch that selects the runtime in your CMakeLists.txt.")
    others = [o for o in p.cmake_options if o.name not in switches]
    if others:
        add("# The project's other CMake options (add them to a variant's cmake_defines to set them):")
        for option in others:
            add(f"#   {option.name} (default {option.default}): {option.help}".rstrip(": "))
    add('# yours, per GPU variant: toolkit (the version release builds use, e.g. "6.4"), architectures,')
    add("# device_code, images and hardware (names defined below), metadata.")
    out.extend(_meson_comments(p))
    add("variants:")
    for name, backend in plan.variants.items():
        add(f"  {name}:")
        add(f"    distribution: {_scalar(distribution_name(family_name(p), name, plan.variants))}")
        add(f"    backend: {_scalar(backend.name)}")
        per_variant = p.variant_package
        if per_variant is not None:
            value = cmake_value(backend.name, per_variant.choices, plan.spellings)
            add(f"    import_name: {_scalar(per_variant.import_name(value))}  # its own import package")
            setup = f"setup-args=-D{per_variant.option}={value}"
            add(f"    cmake_defines: {_flow_map({per_variant.option: value})}  # meson-python: {setup}")
        elif p.cmake:
            defines = _flow_map(cmake_defines(p, backend.name, plan.spellings))
            if backend_switches(p, plan.spellings) or p.cmake_backend_variable:
                add(f"    cmake_defines: {defines}")
            else:
                add(
                    f"    cmake_defines: {defines}  # yours: placeholder: init found no CMake switch that "
                    "selects the runtime; name yours, then delete this comment"
                )
        if backend.exclude:
            add(f"    exclude: {_flow(backend.exclude)}")
        out.extend(_build_image(backend))
    add("")
    return out


LOCAL_SUITE = "trixie"
"""The Debian suite of the local build images init writes: glibc within the manylinux policies."""


def _build_image(backend: Backend) -> list[str]:
    """The variant's toolkit and local build image recipe, from the backend data
    (`local_build_image`): the release image is the floor's manylinux one plus the install script."""
    recipe = backend.local_build_image
    if recipe is None:  # no toolkit (cpu): the base suite, the system packages' apt lines added
        return [
            "    # local builds (--container): Debian, made when absent",
            f"    build_image: {{debian: {{suite: {LOCAL_SUITE}}}}}",
        ]
    parts = [f"suite: {LOCAL_SUITE}"]
    if recipe.packages:
        parts.append(f"packages: {_flow(recipe.packages)}")
    if recipe.toolkit_install is not None:
        parts.append(f"toolkit_install: {_flow(recipe.toolkit_install)}")
    return [
        f"    toolkit: {json.dumps(recipe.toolkit)}  # yours: the version release builds use (the image's)",
        "    # local builds (--container): Debian with the toolkit, made when absent",
        f"    build_image: {{debian: {{{', '.join(parts)}}}}}",
    ]


def _meson_comments(project: Project) -> list[str]:
    """The meson options, which a variant's cmake_defines set (meson-python: setup-args=-DNAME=value)."""
    if not project.meson:
        return []
    out = ["# The project's meson options (meson.options), which a variant's cmake_defines set"]
    out.append("# (meson-python: --config-settings setup-args=-DNAME=value):")
    for option in project.meson_options:
        about = f": {option.description}" if option.description else ""
        default = option.value or "''"
        out.append(f"#   {option.name} ({option.type}, default {default}){about}")
    if project.variant_package is not None:
        vp = project.variant_package
        out.append(f"# `{vp.option}` names each variant's own import package ({vp.prefix}<value>): no guard.")
    return out


def _placeholders() -> list[str]:
    """The empty `images` and `hardware` mappings with examples of what goes in them."""
    out: list[str] = []
    add = out.append
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
    return out


def _publish() -> list[str]:
    """The `publish` mapping with its defaults spelled out."""
    out: list[str] = []
    add = out.append
    defaults = Publish()
    add("# Where a tag push publishes (the defaults: PyPI; pre-releases to TestPyPI).")
    add("publish:")
    add(f"  tag_pattern: {json.dumps(defaults.tag_pattern)}")
    add(f"  repository: {json.dumps(defaults.repository)}")
    add(f"  prerelease: {defaults.prerelease}")
    if defaults.prerelease_repository is not None:
        add(f"  prerelease_repository: {json.dumps(defaults.prerelease_repository)}")
    add(f"  github_release: {'true' if defaults.github_release else 'false'}")
    return out


def render_system_packages(proposal: Proposal) -> list[str]:
    """The `engine.system_packages` lines: the known requests as entries, the others as comments."""
    if not proposal.known and not proposal.unknown:
        return []
    out = [
        "  # System build dependencies the build files ask for: installed in the release image's",
        "  # before-all (dnf) and in local build images (apt); a host build checks them before compiling.",
    ]
    for request in proposal.unknown:
        out.append(
            f"  # yours: {request.name}: {{dnf: [...], apt: [...], pkg_config: [...]}}"
            f"  # {request.kind}({request.name}) at {request.where}: no known packages"
        )
    if not proposal.known:
        out.append("  system_packages: {}")
        return out
    out.append("  system_packages:")
    for name, (entry, request) in proposal.known.items():
        fields = {k: getattr(entry, k) for k in ("dnf", "apt", "pkg_config", "headers", "libraries")}
        body = ", ".join(f"{k}: {_flow(v)}" for k, v in fields.items() if v)
        out.append(f"    {_scalar(name)}: {{{body}}}  # {request.kind}({request.name}) at {request.where}")
    return out


def backend_switches(project: Project, spellings: Spellings) -> dict[str, str]:
    """The project's CMake `option()`s that select a runtime, by name: {option: backend}."""
    if project.cmake_backend_variable:
        return {}
    found = {o.name: option_backend(o.name, spellings) for o in project.cmake_options}
    return {name: backend for name, backend in found.items() if backend is not None}


def cmake_defines(project: Project, backend: str, spellings: Spellings) -> dict[str, str]:
    """A variant's CMake variables: the `<X>_BACKEND` cache variable set to the backend, else every
    runtime option OFF but the backend's own, else a `<IMPORT>_BACKEND` placeholder to rename."""
    switches = backend_switches(project, spellings)
    if switches:
        return {name: "ON" if owner == backend else "OFF" for name, owner in switches.items()}
    variable = project.cmake_backend_variable or f"{project.import_name.upper()}_BACKEND"
    return {variable: cmake_value(backend, project.cmake_backend_values, spellings)}


def _flow_map(values: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{_scalar(k)}: {_scalar(v)}" for k, v in values.items()) + "}"


def _backend_label(project: Project) -> str:
    label = project.build_backend.split(".")[0].split(":")[0].replace("_", "-")
    return f"{label}, CMake" if project.cmake and "cmake" not in label and "scikit" not in label else label


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
    system = system_libraries(
        wheels.needed,
        policy_libraries=policy,
        runtime_globs=known_runtime_globs(backends.values()),
        provided=wheels.provided,
    )
    out_dir = output.resolve().parent
    source = Path(os.path.relpath(project.path.resolve(), out_dir)).as_posix()
    return Plan(
        project=project,
        source=source,
        variants={name: backends[name] for name in variants},
        pythons=pythons_allowed(project.requires_python),
        scripts=tuple(dict.fromkeys((*project.console_scripts, *wheels.scripts))),
        system_libraries=system,
        wheels=wheels.names,
        spellings={name: b.spellings for name, b in backends.items()},
        floor=floor,
        system_packages=(
            propose(project.path, own=(project.name, project.import_name))
            if project.cmake or project.meson
            else None
        ),
    )
