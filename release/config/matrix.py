"""The release matrix: the model of `matrix.yaml`, loading, and the checks across keys.

The frozen dataclasses below are the single source of truth: `release/config/matrix.schema.json` is
generated from them (`python -m release schema`), and a test fails when the two drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from release.config.backends import Backend, load_backends
from release.config.checks import MAX_MATRIX_BYTES, check, one_line_values
from release.config.dataschema import (
    DocumentReader,
    compose,
    json_schema,
    printable,
    read_file,
    spec,
    suggest,
)
from release.config.facts import ImageFacts, facts_path, load_facts, probe_pins
from release.config.machines import DEFAULT_MACHINE, floor_for, machine_of_tag
from release.config.resources import default_backends_dir
from release.config.shapes import held_back_problems, shape_problems, system_package_shape_problems
from release.config.sysdeps import SystemPackage
from release.errors import MatrixError, Problem, UsageError

SCHEMA_FILE = Path(__file__).with_name("matrix.schema.json")
SCHEMA_ID = "https://example.invalid/gpu-wheel-release/config/matrix.schema.json"
SCHEMA_VERSION = 1


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
class SmokeRequirements:
    """Where smoke legs install the wheel's runtime dependencies (its `Requires-Dist`, e.g. numpy)
    from. Without either key, a wheel that requires anything fails its install step in one line."""

    index_url: str | None = spec(
        "A package index (PEP 503 simple URL, e.g. https://pypi.org/simple) the requirements come from.",
        default=None,
    )
    find_links: str | None = spec(
        "A local directory of wheels, relative to this file, the requirements come from (no index "
        "is asked; the directory is mounted read-only into container legs).",
        default=None,
    )
    skip: tuple[str, ...] = spec(
        "Requirements (project names) a smoke leg leaves out: a heavy one the smoke commands never "
        "import (`[torch]`); the wheel goes in without its dependencies, the others from the source "
        "above, and the summary names what was left out.",
        default=(),
    )


@dataclass(frozen=True, kw_only=True)
class Smoke:
    """How a fresh environment proves that an installed wheel works."""

    requirements: SmokeRequirements = spec(
        "Where the wheel's runtime dependencies (`Requires-Dist`) are installed from.",
        default_factory=SmokeRequirements,
    )
    commands: tuple[tuple[str, ...], ...] = spec(
        "Commands run in the fresh environment after `import <import_name>`; `{python}` is its "
        "interpreter, `{import_name}` the variant's import package. A command whose output ends "
        "with a JSON object with an `ok` key (its last line; earlier lines may be logs) must report "
        "`ok: true`.",
        default=(),
    )
    self_tests: tuple[tuple[str, ...], ...] = spec(
        "Self-tests, run after `commands` and written the same way, whose verdict is the JSON object "
        'on the last line of their output (`{"ok": true, ...}`): one that prints none fails.',
        default=(),
    )


@dataclass(frozen=True, kw_only=True)
class Engine:
    """The project being released: any PEP 517 project."""

    source: str = spec("Directory of the engine's PEP 517 project, relative to this file.")
    import_name: str = spec(
        "The top-level import package every variant ships (a variant may name its own: `import_name`)."
    )
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
    needs_gil: bool = spec("The extension needs the GIL: smoke reports it on t, not fails.", default=False)
    system_packages: Mapping[str, SystemPackage] = spec(
        "System build dependencies by name (`yaml-cpp: {dnf: [yaml-cpp-devel], apt: [libyaml-cpp-dev], "
        "pkg_config: [yaml-cpp]}`): installed in the release image's before-all and in local build "
        "images, checked by a host build before it compiles.",
        default_factory=dict,
    )
    before_all: str | None = spec(
        "A shell command of the engine's own that cibuildwheel's before-all runs after the system "
        "packages and the toolkit (e.g. `bash scripts/deps.sh`, from the matrix's directory).",
        default=None,
    )
    stage_include: tuple[str, ...] = spec("Paths staged even where .gitignore ignores them.", default=())
    metadata: Metadata = spec("Metadata common to every variant.", default_factory=Metadata)
    smoke: Smoke = spec("The smoke test run against every wheel.", default_factory=Smoke)


@dataclass(frozen=True, kw_only=True)
class DebianRecipe:
    """How the toolkit makes a local image from Debian packages when it is absent
    (debootstrap, then `podman import`; no registry needed)."""

    suite: str = spec("Debian suite (sid carries HIP 6.4).", default="sid")
    packages: tuple[str, ...] = spec("Extra Debian packages: the toolkit, or its runtime.", default=())
    gcc: str | None = spec(
        "Build images only: the GCC major the image compiles with (gcc-N and g++-N from the suite "
        "become cc, c++, gcc and g++), or 'suite' for the suite's own g++; default: the release "
        "image's major (14 for manylinux_2_28), else the suite's.",
        default=None,
    )
    toolkit_install: tuple[str, ...] | None = spec(
        "Build images only: install the variant's toolkit in the image with the backend's own "
        "install command (`toolkit.install` in its backend file) for the declared `toolkit`, plus "
        "these arguments, e.g. [--from-pypi] for CUDA from NVIDIA's PyPI wheels; for a toolkit "
        "Debian does not package.",
        default=None,
    )


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
    import_name: str | None = spec(
        "This variant's own top-level import package, where the project names one per variant "
        "(mypkg_cu13, mypkg_rocm); default: `engine.import_name`.",
        default=None,
    )
    toolkit: str | None = spec(
        "Toolkit version the release is built with (e.g. '6.4', '13.0').", default=None
    )
    cmake_defines: Mapping[str, str] = spec(
        "The variant's build options (prebuild and wheel build), in the build backend's spelling: "
        "scikit-build-core `cmake.define.NAME`, meson-python `setup-args=-DNAME=value` (a meson "
        "option), other backends `CMAKE_ARGS=-DNAME=value`.",
        default_factory=dict,
    )
    config_settings: Mapping[str, str] = spec(
        "Extra PEP 517 config settings for the wheel build.", default_factory=dict
    )
    env: Mapping[str, str] = spec("Extra environment variables for the build.", default_factory=dict)
    build_requires: Mapping[str, str] = spec(
        "Entries of the engine's `[build-system].requires` this variant replaces, by project name "
        "(`torch: ''` drops a heavy pin the variant does not use; `torch: 'torch==2.9.0+cpu'` puts "
        "another requirement in its place); the staged pyproject.toml is rewritten, never the source.",
        default_factory=dict,
    )
    system_packages: Mapping[str, SystemPackage] = spec(
        "System build dependencies of this variant only (e.g. libfabric for an EFA transport), "
        "added to `engine.system_packages`; an entry of the same name replaces the engine's.",
        default_factory=dict,
    )
    exclude: tuple[str, ...] = spec(
        "Runtime libraries (sonames or globs) kept as NEEDED and never vendored by repair.",
        default=(),
    )
    runtime_needed: tuple[str, ...] | None = spec(
        "Soname prefixes one of which the extension must NEED (default: the backend's); `[]` for a "
        "GPU variant whose own ELF files bind no GPU runtime (its GPU work goes through a library "
        "the wheel does not ship): verify then expects no runtime NEEDED and the guard checks none.",
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
    size_limit: int | None = spec(
        "Bytes the index takes per file for this distribution, where it was granted more than "
        "`publish.size_limit`.",
        default=None,
    )
    development_files: int | None = spec(
        "Bytes of development files (headers, .pc files, static archives, CMake config) this "
        "variant's wheels ship on purpose: verify's `development-files` warns beyond 64 KiB "
        "without it, and with it `--release` fails beyond it.",
        default=None,
    )
    held_back: str | None = spec(
        "Not released this time, and why (e.g. 'no MUSA installer is available to CI'): the plan, "
        "the release notes and the GitHub Release say so, and every release check expects the "
        "plan without it. Local builds of it still work.",
        default=None,
    )


@dataclass(frozen=True, kw_only=True)
class Simulation:
    """How an image is simulated with a mount namespace where no container engine exists."""

    runtime: Literal["system", "prefix", "absent"] = spec(
        "Where the image provides the GPU runtime: the distribution's place, another prefix, or not at all."
    )
    prefix: str | None = spec("Library directory of the runtime when `runtime: prefix`.", default=None)
    via: Literal["ld.so.conf.d", "LD_LIBRARY_PATH", "none", "rocm_sdk"] = spec(
        "How a `prefix` runtime is found: by the loader (`ld.so.conf.d`, `LD_LIBRARY_PATH`), or only by "
        "the import's own runtime places (`none`: TheRock's /opt/rocm/core-X/lib; `rocm_sdk`: `prefix` is "
        "a venv holding TheRock's pip packages, stand-ins made from the image's runtime, found through "
        "`rocm_sdk`, with a torch that preloads through it). The last two need a container engine.",
        default="ld.so.conf.d",
    )
    links: str | None = spec(
        "A directory of symbolic links to the `prefix` runtime's files (TheRock's /opt/rocm/lib "
        "compatibility links into /opt/rocm/core-X/lib).",
        default=None,
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
        "podman or docker runs (the smoke test then runs in a real container).", default=None
    )  # fmt: skip
    companions: tuple[str, ...] = spec(
        "Modules of the image's own stack that import the runtime too (the torch of TheRock images): smoke "
        "imports them before the engine and again after it; each process must hold one copy.", default=()
    )  # fmt: skip
    expect: Literal["pass", "runtime-missing"] = spec("What smoke must see in this image.", default="pass")
    gpu_architectures: tuple[str, ...] = spec(
        "The GPU architectures its kernels are built for (SGLang's `-mi30x` images: gfx942, `-mi35x`: "
        "gfx950): its hardware legs run on those tiers only. Default: every tier.", default=()
    )  # fmt: skip
    pin: Literal["digest", "probe"] = spec(
        "How `container` is pinned: `digest`, written in it (`name:tag@sha256:...`); or `probe`, a "
        "tag whose digest the ci.yml probe records in images.facts.json (`release images probe --pull "
        "--write` where the registry is reachable). Until a digest is recorded the image awaits it: "
        "no release or hardware job runs in it, and `release plan` and `release ready` say so.",
        default="digest",
    )

    @property
    def awaiting_digest(self) -> bool:
        """A `pin: probe` tag whose digest no probe has recorded yet."""
        return self.pin == "probe" and self.container is not None and "@" not in self.container


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """A tier of self-hosted GPU runners."""

    gpu: str = spec("The accelerator model (e.g. 'AMD Instinct MI300X').")
    architecture: str = spec("Its GPU architecture (e.g. gfx942).")
    runner: tuple[str, ...] = spec("GitHub Actions `runs-on` labels of the self-hosted runners.")
    nodes: int = spec("Runners one job needs: 2 runs prefill on one and decode on the other.", default=1)
    machine: str = spec(
        "The runners' machine architecture (aarch64 for Grace: GH200, GB200): the wheels of that "
        "machine are tested there.",
        default="x86_64",
    )


@dataclass(frozen=True, kw_only=True)
class Platform:
    """The release platform."""

    floor: str = spec(
        "Oldest platform the release wheels must support: a policy (manylinux_2_28) that every "
        "machine of `architectures` gets with its own suffix, or one platform tag "
        "(manylinux_2_28_x86_64) for a matrix of that machine alone."
    )
    architectures: tuple[str, ...] = spec(
        "Machine architectures the wheels are built for (x86_64, aarch64), declared once; a "
        "backend's `machines` narrows them for its variants (ROCm: x86_64 only). Default: the "
        "floor's machine (x86_64 for a policy).",
        default=(),
    )
    floors: Mapping[str, str] = spec(
        "A floor per architecture where one differs from `floor` (aarch64: manylinux_2_34_aarch64).",
        default_factory=dict,
    )
    system_libraries: tuple[str, ...] = spec(
        "Libraries outside the manylinux policy that wheels may NEED from the system.", default=()
    )

    @property
    def machines(self) -> tuple[str, ...]:
        """The architectures, or the floor's machine where none are listed."""
        return self.architectures or (machine_of_tag(self.floor) or DEFAULT_MACHINE,)

    def floor_of(self, machine: str) -> str:
        """The platform tag wheels for `machine` must support."""
        return self.floors.get(machine) or floor_for(self.floor, machine)


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
    environment: str = spec(
        "GitHub environment of the upload job for releases (PyPI's trusted publisher names it).",
        default="pypi",
    )
    prerelease_environment: str = spec(
        "GitHub environment of the upload job for pre-releases sent to `prerelease_repository`.",
        default="testpypi",
    )
    size_limit: int = spec(
        "Bytes the index takes per file (PyPI: 100 MiB unless the project was granted more).",
        default=100 * 1024 * 1024,
    )


@dataclass(frozen=True, kw_only=True)
class VariantWheels:
    """Opt-in: PEP 825 variant wheels of one distribution, made from the per-variant wheels
    (`release variants`): the same files renamed, with a label and `variant.json`. PyPI does not
    take them yet; they are for an index that serves `{name}-{version}-variants.json`."""

    distribution: str = spec("The distribution the variant wheels share (e.g. the CUDA one's name).")
    variants: tuple[str, ...] = spec(
        "Names from `variants` to include (default: every variant whose backend has variant "
        "properties); a `cpu` backend variant becomes the null variant.",
        default=(),
    )


@dataclass(frozen=True, kw_only=True)
class Matrix:
    """The release matrix: one file that drives build, repair, verify, smoke and publish."""

    schema_version: Literal[1] = spec("Version of this file's format.")
    engine: Engine = spec("The engine project being released.")
    python: tuple[str, ...] = spec("CPython versions to build (release/config/pythons.json); 3.14t: no GIL.")
    platform: Platform = spec("The release platform floor and declared system libraries.")
    variants: Mapping[str, Variant] = spec("Wheel families by name (cpu, cuda, rocm, musa).")
    images: Mapping[str, Image] = spec("Serving images, referenced by variants.", default_factory=dict)
    hardware: Mapping[str, Hardware] = spec(
        "Self-hosted GPU runner tiers, referenced by variants.", default_factory=dict
    )
    publish: Publish = spec("Publishing settings.", default_factory=Publish)
    variant_wheels: VariantWheels | None = spec(
        "Also make PEP 825 variant wheels of one distribution from the same builds (opt-in).",
        default=None,
    )


@dataclass(frozen=True)
class LoadedMatrix:
    """A validated matrix with where it came from and the backend data it refers to."""

    matrix: Matrix
    path: Path
    backends: Mapping[str, Backend]
    lines: Mapping[str, int] = field(repr=False)
    image_facts: Mapping[str, ImageFacts] = field(default_factory=dict, repr=False)
    """What the serving images hold, as recorded beside the matrix (`images.facts.json`)."""

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
    problems = check(matrix, backends, reader.lines, display)
    problems += held_back_problems(matrix, reader.lines, display)
    problems += system_package_shape_problems(matrix, reader.lines, display)
    problems += shape_problems(matrix, reader.lines, display)
    problems += one_line_values(matrix, reader.lines, display, reported=[p.key for p in problems])
    if problems:
        raise MatrixError(problems)
    facts = load_facts(facts_path(path))
    pins = probe_pins(matrix.images, facts)
    if pins:  # a `pin: probe` tag is used by the digest a probe recorded for it
        images = {n: replace(i, container=pins.get(n, i.container)) for n, i in matrix.images.items()}
        matrix = replace(matrix, images=images)
    return LoadedMatrix(
        matrix=matrix, path=path.resolve(), backends=backends, lines=reader.lines, image_facts=facts
    )
