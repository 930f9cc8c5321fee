"""The release matrix: the model of `matrix.yaml`, loading, and the checks across keys.

The frozen dataclasses below are the single source of truth: `release/config/matrix.schema.json` is
generated from them (`python -m release schema`), and a test fails when the two drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from release.config import globs
from release.config.backends import Backend, load_backends
from release.config.dataschema import (
    DocumentReader,
    compose,
    dotted,
    json_schema,
    printable,
    read_file,
    spec,
    suggest,
)
from release.config.resources import toolkit_backends
from release.errors import MatrixError, Problem, UsageError
from release.wheel.names import FLOOR

SCHEMA_FILE = Path(__file__).with_name("matrix.schema.json")
SCHEMA_ID = "https://example.invalid/gpu-wheel-release/config/matrix.schema.json"
SUPPORTED_PYTHONS = ("3.10", "3.11", "3.12", "3.13")
SCHEMA_VERSION = 1
_IDENTIFIER_RULE = "(letters, digits and _, not starting with a digit)"

MAX_MATRIX_BYTES = 1 << 20
"""A matrix file larger than this is refused before it is read (the real one is a few KiB)."""
MAX_GLOB = 255
"""The longest soname glob: a file name is at most 255 bytes."""

_PEP508_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
# Names that reach a shell-like parser (cibuildwheel's bashlex `environment`, shlex-split
# config-settings, `-DNAME=VALUE`, a workflow's word splitting) are held to these; values are
# quoted where they are rendered.
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SETTING_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_SCRIPT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")
_TOOLKIT = re.compile(r"^[0-9]+(\.[0-9A-Za-z]+)*$")
_URL = re.compile(r"^https?://[^\s\x00-\x1f\x7f]+$")


@dataclass(frozen=True, kw_only=True)
class Prebuild:
    """Compile the engine's core once per variant with CMake and install it to a prefix that
    every per-Python wheel build of that variant then links against."""

    cmake_source: str = spec("CMake source directory, relative to `engine.source`.", default=".")
    cmake_args: tuple[str, ...] = spec(
        "Extra CMake arguments for the core build; `{version}` is replaced by the release version.",
        default=(),
    )
    prefix_define: str = spec(
        "CMake variable that tells the wheel build where the prebuilt core is installed."
    )


@dataclass(frozen=True, kw_only=True)
class Metadata:
    """Project metadata written into the staged `pyproject.toml` of a variant."""

    description: str | None = spec("One-line summary (`project.description`).", default=None)
    keywords: tuple[str, ...] = spec("`project.keywords`.", default=())
    classifiers: tuple[str, ...] = spec("`project.classifiers` (trove classifiers).", default=())


@dataclass(frozen=True, kw_only=True)
class Smoke:
    """How a fresh environment proves that an installed wheel works."""

    commands: tuple[tuple[str, ...], ...] = spec(
        "Commands run in the fresh environment after `import <import_name>`; `{python}` is its "
        "interpreter. A command whose output is JSON with an `ok` key must report `ok: true`.",
        default=(),
    )


@dataclass(frozen=True, kw_only=True)
class Engine:
    """The project being released: any PEP 517 project."""

    source: str = spec("Directory of the engine's PEP 517 project, relative to this file.")
    import_name: str = spec("The top-level import package every variant ships.")
    version: str = spec(
        "Version for local builds without a release tag (a tag push sets the real one).",
        default="0.0.0",
    )
    scripts: tuple[str, ...] = spec("Console commands every wheel must install.", default=())
    own_libraries: tuple[str, ...] = spec(
        "Glob patterns of the engine's own shared libraries; no exclude may match them.",
        default=(),
    )
    prebuild: Prebuild | None = spec("Optional core prebuild, once per variant.", default=None)
    stable_abi: str | None = spec(
        "Build one abi3 wheel per variant for every CPython from this version on (e.g. '3.12': "
        "Python's limited API); older Pythons of the matrix keep a wheel each.",
        default=None,
    )
    metadata: Metadata = spec("Metadata common to every variant.", default_factory=Metadata)
    smoke: Smoke = spec("The smoke test run against every wheel.", default_factory=Smoke)


@dataclass(frozen=True, kw_only=True)
class DebianRecipe:
    """How the toolkit makes a local image from Debian packages when it is absent
    (debootstrap, then `podman import`; no registry needed)."""

    suite: str = spec("Debian suite (sid carries HIP 6.4).", default="sid")
    packages: tuple[str, ...] = spec("Extra Debian packages: the toolkit, or its runtime.", default=())


@dataclass(frozen=True, kw_only=True)
class BuildImage:
    """Where `release build --container` compiles a variant (cibuildwheel's manylinux image)."""

    release: str | None = spec(
        "Image for release builds (GitHub Actions, `--release-image`); default: the floor's manylinux "
        "image. The backend's install script puts the declared toolkit in (cibuildwheel before-all).",
        default=None,
    )
    local: str | None = spec(
        "Image for container builds elsewhere, e.g. a `localhost/` tag made from `debian`; "
        "default: the release image.",
        default=None,
    )
    debian: DebianRecipe | None = spec("How to make `local` when it is absent.", default=None)


@dataclass(frozen=True, kw_only=True)
class Variant:
    """One wheel family: a distribution name bound to one accelerator runtime."""

    distribution: str = spec("The distribution name on the index (PEP 508).")
    backend: str = spec("Accelerator backend: a file name in `packaging/backends/` (cpu, cuda, rocm, musa).")
    toolkit: str | None = spec(
        "Toolkit version the release is built with (e.g. '6.4', '13.0').", default=None
    )
    cmake_defines: Mapping[str, str] = spec(
        "CMake cache variables for this variant (prebuild and wheel build).", default_factory=dict
    )
    config_settings: Mapping[str, str] = spec(
        "Extra PEP 517 config settings for the wheel build.", default_factory=dict
    )
    env: Mapping[str, str] = spec("Extra environment variables for the build.", default_factory=dict)
    exclude: tuple[str, ...] = spec(
        "Runtime libraries (sonames or globs) kept as NEEDED and never vendored by repair.",
        default=(),
    )
    runtime_needed: tuple[str, ...] | None = spec(
        "Soname prefixes one of which the extension must NEED (default: the backend's).",
        default=None,
    )
    architectures: tuple[str, ...] = spec("GPU architectures the variant serves (e.g. gfx942).", default=())
    device_code: bool = spec("Whether the wheel carries GPU code objects for `architectures`.", default=False)
    metadata: Metadata | None = spec("Metadata overriding `engine.metadata`.", default=None)
    images: tuple[str, ...] = spec("Names from `images` the wheels must work in.", default=())
    hardware: tuple[str, ...] = spec("Names from `hardware` the wheels are tested on.", default=())
    build_image: BuildImage | None = spec("The container image `build --container` uses.", default=None)
    stable_abi: str | None = spec(
        "Overrides `engine.stable_abi` for this variant ('off': a wheel per Python).", default=None
    )


@dataclass(frozen=True, kw_only=True)
class Simulation:
    """How an image is simulated with a mount namespace where no container engine exists."""

    runtime: Literal["system", "prefix", "absent"] = spec(
        "Where the image provides the GPU runtime: the distribution's place, another prefix, or not at all."
    )
    prefix: str | None = spec("Library directory of the runtime when `runtime: prefix`.", default=None)
    via: Literal["ld.so.conf.d", "LD_LIBRARY_PATH"] = spec(
        "How the loader finds a `prefix` runtime.", default="ld.so.conf.d"
    )
    rootfs: Literal["host", "debootstrap-minbase"] = spec(
        "The root file system: the host's, or a minimal Debian built with debootstrap.",
        default="host",
    )


@dataclass(frozen=True, kw_only=True)
class Image:
    """A serving image the wheels must work in."""

    description: str = spec("What this image stands for.", default="")
    container: str | None = spec("Container reference used in CI and on hardware.", default=None)
    python: tuple[str, ...] = spec("The image's own Python versions (default: the matrix's).", default=())
    simulate: Simulation | None = spec("Simulation on hosts without a container engine.", default=None)
    debian: DebianRecipe | None = spec(
        "Made locally as a container image from Debian packages, with the `simulate` layout, where "
        "podman or docker runs (the smoke test then runs in a real container).",
        default=None,
    )
    expect: Literal["pass", "runtime-missing"] = spec(
        "What the smoke test must see in this image.", default="pass"
    )


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """A tier of self-hosted GPU runners."""

    gpu: str = spec("The accelerator model (e.g. 'AMD Instinct MI300X').")
    architecture: str = spec("Its GPU architecture (e.g. gfx942).")
    runner: tuple[str, ...] = spec("GitHub Actions `runs-on` labels of the self-hosted runners.")
    nodes: int = spec("Runners one job needs: 2 runs prefill on one and decode on the other.", default=1)


@dataclass(frozen=True, kw_only=True)
class Platform:
    """The release platform."""

    floor: str = spec("Oldest platform tag the release wheels must support (e.g. manylinux_2_28_x86_64).")
    system_libraries: tuple[str, ...] = spec(
        "Libraries outside the manylinux policy that wheels may NEED from the system.", default=()
    )


@dataclass(frozen=True, kw_only=True)
class Publish:
    """Where and when wheels are published."""

    tag_pattern: str = spec("Git tags that publish (fnmatch pattern, e.g. 'v*').", default="v*")
    repository: str = spec("Upload URL of the index.", default="https://upload.pypi.org/legacy/")
    prerelease: Literal["publish", "separate-index", "skip"] = spec(
        "Pre-releases: publish like releases, upload to `prerelease_repository`, or skip.",
        default="separate-index",
    )
    prerelease_repository: str | None = spec(
        "Upload URL for pre-releases.", default="https://test.pypi.org/legacy/"
    )
    github_release: bool = spec("Attach the wheels to a GitHub Release.", default=True)


@dataclass(frozen=True, kw_only=True)
class Matrix:
    """The release matrix: one file that drives build, repair, verify, smoke and publish."""

    schema_version: Literal[1] = spec("Version of this file's format.")
    engine: Engine = spec("The engine project being released.")
    python: tuple[str, ...] = spec("CPython versions to build for ('3.10' … '3.13').")
    platform: Platform = spec("The release platform floor and declared system libraries.")
    variants: Mapping[str, Variant] = spec("Wheel families by name (cpu, cuda, rocm, musa).")
    images: Mapping[str, Image] = spec("Serving images, referenced by variants.", default_factory=dict)
    hardware: Mapping[str, Hardware] = spec(
        "Self-hosted GPU runner tiers, referenced by variants.", default_factory=dict
    )
    publish: Publish = spec("Publishing settings.", default_factory=Publish)


@dataclass(frozen=True)
class LoadedMatrix:
    """A validated matrix with where it came from and the backend data it refers to."""

    matrix: Matrix
    path: Path
    backends: Mapping[str, Backend]
    lines: Mapping[str, int] = field(repr=False)

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def engine_dir(self) -> Path:
        return (self.root / self.matrix.engine.source).resolve()

    def variant(self, name: str) -> Variant:
        try:
            return self.matrix.variants[name]
        except KeyError:
            hint = suggest(name, list(self.matrix.variants))
            known = ", ".join(self.matrix.variants)
            msg = f"{self.path.name}: no variant {name!r}{hint} (variants: {known})"
            raise UsageError(msg) from None


def schema() -> dict[str, object]:
    """The JSON Schema of `matrix.yaml`, generated from the model."""
    return json_schema(Matrix, title="Release matrix (matrix.yaml)", schema_id=SCHEMA_ID)


def load(path: Path | str, *, backends_dir: Path | None = None) -> LoadedMatrix:
    """Read, convert and check a matrix file; raise `MatrixError` listing every problem."""
    path = Path(path)
    display = printable(str(path))
    data = read_file(path, display, MAX_MATRIX_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        problem = Problem(display, None, "", f"not UTF-8 text (byte {exc.start}): save it as UTF-8")
        raise MatrixError([problem]) from None
    return loads(text, path=path, display=display, backends_dir=backends_dir)


def loads(
    text: str, *, path: Path, display: str | None = None, backends_dir: Path | None = None
) -> LoadedMatrix:
    display = display or str(path)
    reader = DocumentReader(display)
    node = compose(text, display)
    matrix = reader.read(node, Matrix, "")
    if reader.problems:
        raise MatrixError(reader.problems)
    backends = load_backends(backends_dir or default_backends_dir(path))
    problems = _check(matrix, backends, reader.lines, display)
    if problems:
        raise MatrixError(problems)
    return LoadedMatrix(matrix=matrix, path=path.resolve(), backends=backends, lines=reader.lines)


def default_backends_dir(matrix_path: Path) -> Path:
    """`packaging/backends` beside the matrix, else the toolkit's own copy."""
    local = matrix_path.resolve().parent / "packaging" / "backends"
    if local.is_dir():
        return local
    return toolkit_backends()


def _check(m: Matrix, backends: Mapping[str, Backend], lines: Mapping[str, int], file: str) -> list[Problem]:
    problems: list[Problem] = []

    def add(key: str, message: str) -> None:
        line = lines.get(key)
        parent = key
        while line is None and "." in parent:
            parent = parent.rsplit(".", 1)[0]
            line = lines.get(parent)
        problems.append(Problem(file, line, printable(key), printable(message)))

    def names(key: str, mapping: Mapping[str, str], pattern: re.Pattern[str], what: str) -> None:
        for name in mapping:
            if not pattern.match(name):
                add(dotted(key, name), f"{name!r} is not {what}")

    if not m.python:
        add("python", "list at least one Python version")
    seen_py: set[str] = set()
    for i, py in enumerate(m.python):
        if py not in SUPPORTED_PYTHONS:
            add(f"python[{i}]", f"{py!r} is not supported (supported: {', '.join(SUPPORTED_PYTHONS)})")
        if py in seen_py:
            add(f"python[{i}]", f"{py!r} is listed twice")
        seen_py.add(py)

    if not FLOOR.match(m.platform.floor):
        add("platform.floor", f"{m.platform.floor!r} is not a platform tag like manylinux_2_28_x86_64")

    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", m.engine.import_name):
        add("engine.import_name", f"{m.engine.import_name!r} is not a Python identifier")
    try:
        Version(m.engine.version)
    except InvalidVersion:
        add("engine.version", f"{m.engine.version!r} is not a PEP 440 version")

    abi_keys = [("engine.stable_abi", m.engine.stable_abi)] + [
        (f"variants.{n}.stable_abi", v.stable_abi) for n, v in m.variants.items()
    ]
    for abi_key, abi in abi_keys:
        if abi is not None and abi != "off" and abi not in m.python:
            add(abi_key, f"{abi!r} must be one of the matrix's Pythons ({', '.join(m.python)}) or 'off'")
        if abi_key == "engine.stable_abi" and abi == "off":
            add(abi_key, "leave it out to build a wheel per Python ('off' is for variants)")
    if m.engine.prebuild is not None:
        source = Path(m.engine.source) / m.engine.prebuild.cmake_source
        if (
            Path(m.engine.prebuild.cmake_source).is_absolute()
            or ".." in Path(m.engine.prebuild.cmake_source).parts
        ):
            add(
                "engine.prebuild.cmake_source",
                f"{m.engine.prebuild.cmake_source!r} must be a directory inside "
                f"engine.source (it is staged with the project): got {source}",
            )
        if not _IDENTIFIER.match(m.engine.prebuild.prefix_define):
            add(
                "engine.prebuild.prefix_define",
                f"{m.engine.prebuild.prefix_define!r} is not a CMake variable name {_IDENTIFIER_RULE}",
            )
    for i, script in enumerate(m.engine.scripts):
        if not _SCRIPT_NAME.match(script):
            add(
                f"engine.scripts[{i}]",
                f"{script!r} is not a console script name (letters, digits, _ . + -, not first . + -)",
            )
    for i, command in enumerate(m.engine.smoke.commands):
        if not command or not command[0]:
            add(f"engine.smoke.commands[{i}]", "an empty command: give the program, then its arguments")
    for i, own in enumerate(m.engine.own_libraries):
        if len(own) > MAX_GLOB:
            add(f"engine.own_libraries[{i}]", f"longer than {MAX_GLOB} characters: no soname is")
    if not m.publish.tag_pattern.strip():
        add("publish.tag_pattern", "empty: no tag could ever publish (use e.g. 'v*')")
    for name in ("repository", "prerelease_repository"):
        url = getattr(m.publish, name)
        if url is not None and not _URL.match(url):
            add(f"publish.{name}", f"{url!r} is not an http(s) URL")

    if not m.variants:
        add("variants", "define at least one variant")
    owners: dict[str, str] = {}
    majors: dict[tuple[str, str], str] = {}
    # The declared globs, and the import name's own `lib<name>*` in any case.
    declared = [o for o in m.engine.own_libraries if len(o) <= MAX_GLOB]
    own_libraries = tuple(dict.fromkeys([*declared, f"lib{m.engine.import_name}*"]))
    for name, v in m.variants.items():
        key = dotted("variants", name)
        if not re.match(r"^[a-z][a-z0-9]*$", name):
            add(key, f"variant name {name!r} must be lowercase letters and digits (it names sessions)")
        if v.backend not in backends:
            add(
                f"{key}.backend",
                f"unknown backend {v.backend!r}{suggest(v.backend, list(backends))} "
                f"(known: {', '.join(sorted(backends))}; "
                f"add packaging/backends/{v.backend}.json to teach a new one)",
            )
        if not _PEP508_NAME.match(v.distribution):
            add(f"{key}.distribution", f"{v.distribution!r} is not a valid distribution name (PEP 508)")
        else:
            canon = canonicalize_name(v.distribution)
            if canon in owners:
                add(
                    f"{key}.distribution",
                    f"{v.distribution!r} is already the distribution of variant "
                    f"{owners[canon]!r}: each variant needs its own name",
                )
            owners[canon] = name
        if v.toolkit is not None and not _TOOLKIT.match(v.toolkit):
            add(f"{key}.toolkit", f"{v.toolkit!r} is not a toolkit version like '6.4' or '13.0'")
        names(f"{key}.env", v.env, _IDENTIFIER, f"an environment variable name {_IDENTIFIER_RULE}")
        cmake_name = f"a CMake variable name {_IDENTIFIER_RULE}"
        names(f"{key}.cmake_defines", v.cmake_defines, _IDENTIFIER, cmake_name)
        names(
            f"{key}.config_settings",
            v.config_settings,
            _SETTING_KEY,
            "a config-settings key (letters, digits, _ . and -, not starting with . or -)",
        )
        for i, pattern in enumerate(v.exclude):
            if len(pattern) > MAX_GLOB:
                add(f"{key}.exclude[{i}]", f"longer than {MAX_GLOB} characters: no soname is")
                continue
            overlaps = ((own, globs.common_match(pattern, own)) for own in own_libraries)
            for own, example in overlaps:
                if example is None:
                    continue
                add(
                    f"{key}.exclude[{i}]",
                    f"{pattern!r} would also exclude the engine's own library {own!r} "
                    f"(engine.own_libraries; both match {example!r}): name the runtime's soname instead",
                )
                break
            if pattern.startswith("libpython"):
                add(f"{key}.exclude[{i}]", f"{pattern!r} would exclude libpython, which no wheel may vendor")
        problems.extend(_check_toolkit(name, v, backends, majors, add))
        if v.device_code and not v.architectures:
            add(f"{key}.architectures", "device_code is true: list the architectures it carries")
        for i, image in enumerate(v.images):
            if image not in m.images:
                add(
                    f"{key}.images[{i}]",
                    f"image {image!r} is not defined under images{suggest(image, list(m.images))}",
                )
        for i, tier in enumerate(v.hardware):
            if tier not in m.hardware:
                add(
                    f"{key}.hardware[{i}]",
                    f"hardware tier {tier!r} is not defined under hardware{suggest(tier, list(m.hardware))}",
                )

    for name, img in m.images.items():
        key = dotted("images", name)
        if img.container is None and img.simulate is None:
            add(key, "give a container reference, a simulation, or both")
        sim = img.simulate
        if sim is not None and sim.runtime == "prefix" and not sim.prefix:
            add(
                f"{key}.simulate.prefix",
                "runtime: prefix needs the library directory (e.g. /opt/rocm-6.4.1/lib)",
            )
        if sim is not None and sim.prefix and not sim.prefix.startswith("/"):
            add(f"{key}.simulate.prefix", f"{sim.prefix!r} must be an absolute path")
        for i, py in enumerate(img.python):
            if py not in SUPPORTED_PYTHONS:
                add(
                    f"{key}.python[{i}]",
                    f"{py!r} is not supported (supported: {', '.join(SUPPORTED_PYTHONS)})",
                )

    for name, hw in m.hardware.items():
        key = dotted("hardware", name)
        if not hw.runner:
            add(f"{key}.runner", "list the runner labels (e.g. [self-hosted, linux, mi300x])")
        if hw.nodes not in (1, 2):
            add(f"{key}.nodes", "1 (one runner) or 2 (prefill and decode on two runners)")

    p = m.publish
    if p.prerelease == "separate-index" and not p.prerelease_repository:
        add("publish.prerelease_repository", "prerelease: separate-index needs a repository URL")
    return problems


def _check_toolkit(
    name: str,
    v: Variant,
    backends: Mapping[str, Backend],
    majors: dict[tuple[str, str], str],
    add: Callable[[str, str], None],
) -> list[Problem]:
    """The declared toolkit's runtime must be known, and each runtime major has one variant."""
    known = backends[v.backend].runtime_sonames if v.backend in backends else {}
    if v.toolkit is None or not known:
        return []
    key = f"variants.{name}.toolkit"
    major = v.toolkit.split(".", 1)[0]
    if major not in known:
        majors_known = ", ".join(sorted(known, key=lambda k: (len(k), k)))
        add(
            key,
            f"{v.backend} {v.toolkit}: the backend data knows the runtime of majors {majors_known} only "
            f"(runtime_sonames in packaging/backends/{v.backend}.json)",
        )
    elif (v.backend, major) in majors:
        add(
            key,
            f"variant {majors[(v.backend, major)]!r} already binds {v.backend} {major}: one variant per "
            f"runtime major (a second major is a second variant, e.g. {v.backend}{major})",
        )
    majors.setdefault((v.backend, major), name)
    return []


def _globs_overlap(a: str, b: str) -> bool:
    """Whether some name is matched by both soname globs (`libfoo*` and `*.so*` are: libfoo.so)."""
    return globs.common_match(a, b) is not None
