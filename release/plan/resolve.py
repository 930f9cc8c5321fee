"""Resolve once: each variant of the matrix becomes one frozen `ResolvedVariant`.

Every fact a later stage needs is decided here, in one place, and carried by the steps: what
repair excludes (and so what verify and smoke expect to be absent from the wheel), the runtime
the wheel must bind, the metadata, the build settings already translated for the engine's build
backend, the floor, the images and the hardware. No stage re-derives any of it from the matrix.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import tomlkit
from tomlkit.exceptions import TOMLKitError

from release.config.backends import Backend
from release.config.facts import ImageFacts
from release.config.globs import runtime_globs
from release.config.matrix import Hardware, Image, LoadedMatrix, Metadata, Prebuild, Variant
from release.config.pythons import supported_pythons
from release.config.sysdeps import SystemPackage, merged, packages_of, pkg_config_modules
from release.errors import UsageError
from release.plan.imagefacts import current
from release.plan.runtimes import debian_runtime_packages, runtime_requirements
from release.wheel.names import parse_platform_tag

BuildBackend = Literal["scikit-build-core", "setuptools", "meson-python", "other"]

# PEP 517 backends the toolkit knows how to hand CMake variables to.
_BACKENDS: Mapping[str, BuildBackend] = {
    "scikit_build_core.build": "scikit-build-core",
    "setuptools.build_meta": "setuptools",
    "setuptools.build_meta:__legacy__": "setuptools",
    "mesonpy": "meson-python",
}


@dataclass(frozen=True, kw_only=True)
class BuildSettings:
    """How one variant's build is configured, in the terms its build backend reads.

    scikit-build-core takes CMake variables as `cmake.define.NAME` config settings; meson-python
    as `setup-args=-DNAME=VALUE`; setuptools (and anything else driving CMake itself) through the
    `CMAKE_ARGS` environment variable. The host build and the cibuildwheel configuration both
    call `translate`, so they cannot disagree.
    """

    backend: BuildBackend
    cmake_defines: Mapping[str, str]
    config_settings: Mapping[str, str]
    env: Mapping[str, str]

    def translate(
        self, extra_defines: Mapping[str, str] | None = None
    ) -> tuple[tuple[tuple[str, str], ...], dict[str, str]]:
        """(config settings as ordered pairs, environment) with `extra_defines` added (the
        prebuilt core's prefix on the host)."""
        defines = {**self.cmake_defines, **(extra_defines or {})}
        pairs: list[tuple[str, str]] = []
        env = dict(self.env)
        if self.backend == "scikit-build-core":
            pairs += [(f"cmake.define.{k}", v) for k, v in defines.items()]
        elif self.backend == "meson-python":
            pairs += [("setup-args", f"-D{k}={v}") for k, v in defines.items()]
        elif defines:
            args = " ".join(shlex.quote(f"-D{k}={v}") for k, v in defines.items())
            env["CMAKE_ARGS"] = f"{env['CMAKE_ARGS']} {args}" if env.get("CMAKE_ARGS") else args
        pairs += list(self.config_settings.items())
        return tuple(pairs), env

    def limited_api(self, python_tag: str) -> tuple[tuple[str, str], ...]:
        """Config settings that ask the build backend for the limited API of `python_tag` (cp312)."""
        if self.backend == "scikit-build-core":
            return (("wheel.py-api", python_tag),)
        if self.backend == "setuptools":
            return (("--build-option", f"--py-limited-api={python_tag}"),)
        if self.backend == "meson-python":
            return (("setup-args", "-Dpython.allow_limited_api=true"),)
        msg = f"stable_abi: the {self.backend} build backend has no known limited-API setting"
        raise UsageError(msg)


RELEASE_IMAGE_GCC: Mapping[str, str] = {
    "manylinux_2_28": "14",
    "manylinux_2_34": "14",
}
"""The GCC major each release image compiles with (cibuildwheel's manylinux images: gcc-toolset-14),
which a local build image matches unless the matrix names another (`build_image.debian.gcc`)."""


def release_image_gcc(release: str) -> str | None:
    """The GCC major of a release image, named (`manylinux_2_28`) or by reference
    (`quay.io/pypa/manylinux_2_28_x86_64:2025.01.01-1`); None when it is not known."""
    name = release.rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]
    known = (gcc for image, gcc in RELEASE_IMAGE_GCC.items() if name == image or name.startswith(f"{image}_"))
    return next(known, None)


@dataclass(frozen=True, kw_only=True)
class LocalImage:
    """A container image the toolkit makes from Debian packages when it is absent."""

    tag: str
    suite: str
    packages: tuple[str, ...]
    pythons: tuple[str, ...]
    toolchain: bool
    """A build image (compilers, build, auditwheel) rather than a plain runtime image."""
    gcc: str | None = None
    """The GCC major a build image compiles with (gcc-N, g++-N as cc, c++); None: the suite's g++."""
    runtime_prefix: str | None = None
    runtime_via: str | None = None
    runtime_globs: tuple[str, ...] = ()
    runtime_links: str | None = None
    toolkit_install: str | None = None
    """A build image's toolkit install command (the backend's install command, the declared
    toolkit and the recipe's arguments), run in the image by make-image.sh."""


@dataclass(frozen=True, kw_only=True)
class ResolvedImage:
    """A declared serving image, with its name and, where it can be made here, its local image."""

    name: str
    image: Image
    facts: ImageFacts | None = None
    """What the image holds, as recorded for the digest it is declared with (None: unknown)."""
    local: LocalImage | None = None
    """Made here from the image's own `debian` recipe."""
    standin: LocalImage | None = None
    """Made here in place of the image's `container` reference (a registry image smoke runs
    without `--pull`): the declared toolkit's Debian runtime, laid out as `simulate` says."""

    @property
    def made_here(self) -> LocalImage | None:
        """The local image smoke runs this image in without `--pull`: its own, else its stand-in."""
        return self.local or self.standin


@dataclass(frozen=True, kw_only=True)
class ResolvedBuildImage:
    """The images `release build --container` uses for a variant."""

    release: str
    """cibuildwheel's image option: `manylinux_2_28` (its pinned image) or a full reference."""
    local: str
    local_recipe: LocalImage | None
    declared_at: str = ""
    """Where the matrix declares it: `matrix.yaml:50 (variants.cpu.build_image)`, or the variant's
    line when it declares none; what a missing image's one-line error names."""
    variant: str = ""


@dataclass(frozen=True, kw_only=True)
class ResolvedHardware:
    """A declared hardware tier, with its name."""

    name: str
    hardware: Hardware


@dataclass(frozen=True, kw_only=True)
class RequirementSource:
    """Where smoke legs install a wheel's runtime dependencies from (neither: nowhere)."""

    index_url: str | None = None
    find_links: Path | None = None
    """An absolute directory of wheels (the matrix names it relative to itself)."""
    skip: tuple[str, ...] = ()  # project names never installed (engine.smoke.requirements.skip)


@dataclass(frozen=True, kw_only=True)
class ResolvedVariant:
    """One variant with every fact a stage needs, decided once."""

    name: str
    distribution: str
    import_name: str
    backend: Backend
    toolkit: str | None
    """The toolkit version the matrix declares (e.g. '6.4'), or None."""
    toolkit_source: str
    """Where the declaration is: `matrix.yaml:55 (variants.rocm.toolkit)`."""
    runtime_sonames: tuple[str, ...]
    """The runtime sonames the declared toolkit provides (`libamdhip64.so.6` for ROCm 6.x): what
    the wheel must bind, says in METADATA `Requires-External`, and `runtime-abi` checks."""
    excludes: tuple[str, ...]
    """What repair passes to `auditwheel repair --exclude`: the backend's runtime excludes, the
    variant's own, and the declared system libraries. Verify and smoke check against this."""
    runtime_globs: tuple[str, ...]
    """Every library of the runtime (the backend's `runtime_libraries` and the runtime excludes)."""
    runtime_needed: tuple[str, ...]
    """Soname prefixes one of which the extension must NEED."""
    system_libraries: tuple[str, ...]
    floor: str
    floors: Mapping[str, str]
    """Each machine the variant is released for (in order) and its floor; `floor` is one of them."""
    metadata: Metadata
    build: BuildSettings
    build_requires: Mapping[str, str]
    """Entries of `[build-system].requires` the staged pyproject replaces, by project name ('' drops)."""
    engine_dir: Path
    stage_include: tuple[str, ...] = ()
    """Paths staging copies whatever the project's `.gitignore` says (`engine.stage_include`)."""
    prebuild: Prebuild | None
    system_packages: Mapping[str, SystemPackage]
    """The engine's system build dependencies with the variant's own (by name)."""
    before_all: str | None
    """The engine's own before-all command, run after the system packages and the toolkit."""
    architectures: tuple[str, ...]
    device_code: bool
    images: tuple[ResolvedImage, ...]
    hardware: tuple[ResolvedHardware, ...]
    build_image: ResolvedBuildImage
    smoke_commands: tuple[tuple[str, ...], ...]
    smoke_self_tests: tuple[tuple[str, ...], ...] = ()  # their last line must be a JSON verdict
    smoke_requirements: RequirementSource
    needs_gil: bool = False
    """The engine declares that it needs the GIL: smoke reports a free-threaded import that turns it
    back on instead of failing it."""
    pythons: tuple[str, ...]
    """The matrix's Python versions (a wheel for another is not one of this release's)."""
    stable_abi: str | None
    """Build one abi3 wheel for every Python from this version on (None: a wheel per Python)."""
    tag_pattern: str
    size_limit: int
    development_files: int | None = None  # bytes of headers etc. allowed (None: verify's allowance)
    """Bytes the index takes per file of this distribution (the variant's grant, else publish's)."""
    siblings: tuple[str, ...]
    """The distributions of every variant of the matrix, this one included, in matrix order."""
    sharing: tuple[str, ...]
    """The siblings that ship this variant's import package (all of them, unless variants name
    their own): what its import guard must keep apart."""
    matrix_root: Path
    """The matrix's directory: build work and the wheelhouse live below it by default."""

    @property
    def backend_name(self) -> str:
        return self.backend.name

    @property
    def device_code_sections(self) -> tuple[str, ...]:
        return self.backend.device_code_sections


def read_build_backend(engine_dir: Path) -> BuildBackend:
    """The engine's PEP 517 build backend, from its `pyproject.toml` ('other' when unknown)."""
    try:
        text = (engine_dir / "pyproject.toml").read_text(encoding="utf-8")
        data = tomlkit.parse(text).unwrap()
    except (OSError, UnicodeDecodeError, TOMLKitError):
        return "other"
    system = data.get("build-system", {}) if isinstance(data, dict) else {}
    name = system.get("build-backend") if isinstance(system, dict) else None
    return _BACKENDS.get(str(name), "other") if name else "setuptools"


def merged_metadata(base: Metadata, over: Metadata | None) -> Metadata:
    """The engine's common metadata with the variant's overlay on top (non-empty values win)."""
    over = over or Metadata()
    return Metadata(
        description=over.description or base.description,
        keywords=over.keywords or base.keywords,
        classifiers=tuple(dict.fromkeys(base.classifiers + over.classifiers)),
    )


def _unique(*groups: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(item for group in groups for item in group))


def resolve_variant(
    loaded: LoadedMatrix, name: str, *, build_backend: BuildBackend | None = None
) -> ResolvedVariant:
    """The one place a variant of the matrix becomes facts."""
    variant: Variant = loaded.variant(name)
    matrix = loaded.matrix
    backend = loaded.backends[variant.backend]
    runtime_excludes = _unique(backend.exclude, variant.exclude)
    globs = runtime_globs(backend, runtime_excludes)
    needed = variant.runtime_needed if variant.runtime_needed is not None else backend.requires_runtime_needed
    # `runtime_needed: []`: the wheel's own ELF files bind no runtime, so none is expected or guarded.
    sonames = backend.sonames_for(variant.toolkit) if needed else ()
    key = f"variants.{name}.toolkit"
    line = loaded.lines.get(key) or loaded.lines.get(f"variants.{name}")
    engine_dir = loaded.engine_dir
    own = matrix.engine.import_name
    imports = variant.import_name or own
    kind = build_backend if build_backend is not None else read_build_backend(engine_dir)
    floors = {m: matrix.platform.floor_of(m) for m in backend.machines_of(matrix.platform.machines)}
    return ResolvedVariant(
        name=name,
        distribution=variant.distribution,
        import_name=imports,
        backend=backend,
        toolkit=variant.toolkit,
        toolkit_source=f"{loaded.path.name}:{line} ({key})" if line else f"{loaded.path.name} ({key})",
        runtime_sonames=sonames,
        excludes=_unique(runtime_excludes, matrix.platform.system_libraries),
        runtime_globs=globs,
        runtime_needed=needed,
        system_libraries=matrix.platform.system_libraries,
        floor=next(iter(floors.values())),
        floors=floors,
        metadata=merged_metadata(matrix.engine.metadata, variant.metadata),
        build=BuildSettings(
            backend=kind,
            cmake_defines=dict(sorted(variant.cmake_defines.items())),
            config_settings=dict(variant.config_settings),
            env={**runtime_requirements(backend, sonames), **variant.env},
        ),
        build_requires=dict(variant.build_requires),
        engine_dir=engine_dir,
        stage_include=matrix.engine.stage_include,
        prebuild=matrix.engine.prebuild,
        system_packages=merged(matrix.engine.system_packages, variant.system_packages),
        before_all=matrix.engine.before_all,
        architectures=variant.architectures,
        device_code=variant.device_code,
        images=tuple(
            _image(loaded, i, variant, backend, globs)
            for i in variant.images
            if not matrix.images[i].awaiting_digest  # no job runs in a tag: Plan.awaiting
        ),
        hardware=tuple(ResolvedHardware(name=h, hardware=matrix.hardware[h]) for h in variant.hardware),
        build_image=_build_image(loaded, name, variant, backend),
        smoke_commands=matrix.engine.smoke.commands,
        smoke_self_tests=matrix.engine.smoke.self_tests,
        smoke_requirements=_requirement_source(loaded),
        needs_gil=matrix.engine.needs_gil,
        pythons=matrix.python,
        stable_abi=None
        if (variant.stable_abi or matrix.engine.stable_abi) == "off"
        else (variant.stable_abi or matrix.engine.stable_abi),
        tag_pattern=matrix.publish.tag_pattern,
        size_limit=variant.size_limit or matrix.publish.size_limit,
        development_files=variant.development_files,
        siblings=tuple(v.distribution for v in matrix.variants.values()),
        sharing=tuple(d.distribution for d in matrix.variants.values() if (d.import_name or own) == imports),
        matrix_root=loaded.root,
    )


def _requirement_source(loaded: LoadedMatrix) -> RequirementSource:
    declared = loaded.matrix.engine.smoke.requirements
    links = (loaded.root / declared.find_links).resolve() if declared.find_links else None
    return RequirementSource(index_url=declared.index_url, find_links=links, skip=declared.skip)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def _image(
    loaded: LoadedMatrix, name: str, variant: Variant, backend: Backend, globs: tuple[str, ...]
) -> ResolvedImage:
    image = loaded.matrix.images[name]
    facts = current(loaded, name, loaded.image_facts.get(name))
    recipe, sim = image.debian, image.simulate
    if recipe is not None:
        local = _runtime_image(
            loaded, "smoke", name, image, suite=recipe.suite, packages=recipe.packages,
            runtime_globs=globs,
        )  # fmt: skip
        return ResolvedImage(name=name, image=image, local=local)
    if image.container is None or sim is None:
        return ResolvedImage(name=name, image=image, facts=facts)
    # A registry image (unreachable here) without a local recipe: stood in for by the declared
    # toolkit's Debian runtime, from the suite the variant's local build image uses.
    build = variant.build_image.debian if variant.build_image else None
    suite = build.suite if build is not None else "sid"
    packages = debian_runtime_packages(backend, backend.sonames_for(variant.toolkit), suite)
    if sim.runtime != "absent" and not packages:
        return ResolvedImage(name=name, image=image, facts=facts)
    packages = packages if sim.runtime != "absent" else ()
    standin = _runtime_image(
        loaded, "standin", name, image, suite=suite, packages=packages,
        runtime_globs=globs, facts=facts,
    )  # fmt: skip
    return ResolvedImage(name=name, image=image, standin=standin, facts=facts)


def _runtime_image(
    loaded: LoadedMatrix,
    kind: str,
    name: str,
    image: Image,
    *,
    suite: str,
    packages: tuple[str, ...],
    runtime_globs: tuple[str, ...],
    facts: ImageFacts | None = None,
) -> LocalImage:
    """A plain runtime image (no toolchain) with the image's Pythons and `simulate` layout; a
    stand-in takes both from the image's recorded facts where they are known, so it holds the
    Pythons the real image holds, not the ones declared."""
    sim = image.simulate
    prefix = sim.prefix if sim is not None and sim.runtime == "prefix" else None
    via = sim.via if prefix and sim is not None else None
    pythons = image.python or loaded.matrix.python
    if facts is not None and facts.pythons is not None:
        pythons = tuple(v for v in facts.pythons if v in supported_pythons()) or pythons
    if facts is not None and facts.layout is not None and facts.layout.runtime == "prefix":
        prefix, via = facts.layout.prefix, facts.layout.via
    return LocalImage(
        tag=f"localhost/{_slug(loaded.matrix.engine.import_name)}-{kind}-{_slug(name)}",
        suite=suite,
        packages=packages,
        pythons=pythons,
        toolchain=False,
        runtime_prefix=prefix,
        runtime_via=via,
        runtime_globs=runtime_globs,
        runtime_links=sim.links if sim is not None and prefix == sim.prefix else None,
    )


def _build_image(loaded: LoadedMatrix, name: str, variant: Variant, backend: Backend) -> ResolvedBuildImage:
    declared = variant.build_image
    floor = parse_platform_tag(loaded.matrix.platform.floor_of(loaded.matrix.platform.machines[0]))
    release = (declared.release if declared else None) or floor.image_name
    recipe = declared.debian if declared else None
    local_tag = (declared.local if declared else None) or (
        f"localhost/{_slug(loaded.matrix.engine.import_name)}-build-{_slug(name)}" if recipe else release
    )
    local = (
        LocalImage(
            tag=local_tag,
            suite=recipe.suite,
            # The system build dependencies go in with the toolkit, in the same debootstrap.
            packages=_unique(recipe.packages, _apt_packages(loaded, variant)),
            pythons=loaded.matrix.python,
            toolchain=True,
            gcc=_gcc(recipe.gcc, release),
            toolkit_install=_toolkit_install(recipe.toolkit_install, variant, backend),
        )
        if recipe
        else None
    )
    key = f"variants.{name}.build_image" if declared else f"variants.{name}"
    line = loaded.lines.get(key) or loaded.lines.get(f"variants.{name}")
    at = f"{loaded.path.name}:{line} ({key})" if line else f"{loaded.path.name} ({key})"
    return ResolvedBuildImage(
        release=release, local=local_tag, local_recipe=local, declared_at=at, variant=name
    )


def _apt_packages(loaded: LoadedMatrix, variant: Variant) -> tuple[str, ...]:
    """The system packages' apt names, and pkgconf (the `pkg-config` program) where any declares
    `pkg_config` modules: the image holds their .pc files, and meson and CMake ask pkg-config."""
    packages = merged(loaded.matrix.engine.system_packages, variant.system_packages)
    extra = ("pkgconf",) if pkg_config_modules(packages) else ()
    return _unique(packages_of(packages, "apt"), extra)


def _toolkit_install(arguments: tuple[str, ...] | None, variant: Variant, backend: Backend) -> str | None:
    """The command a build image runs to install the variant's toolkit (checked in config:
    the backend has an install command and the variant a toolkit)."""
    if arguments is None or backend.toolkit is None or variant.toolkit is None:
        return None
    return shlex.join([*shlex.split(backend.toolkit.install), variant.toolkit, *arguments])


def _gcc(declared: str | None, release: str) -> str | None:
    if declared == "suite":
        return None
    return declared or release_image_gcc(release)


def variant_for_distribution(
    variants: Mapping[str, ResolvedVariant], distribution: str
) -> ResolvedVariant | None:
    """The variant whose distribution a wheel names (canonical comparison), if any."""
    from packaging.utils import canonicalize_name  # noqa: PLC0415 (verify start-up time)

    canon = canonicalize_name(distribution)
    return next((v for v in variants.values() if canonicalize_name(v.distribution) == canon), None)


def require_variant(variants: Mapping[str, ResolvedVariant], name: str, matrix_name: str) -> ResolvedVariant:
    """A resolved variant by name, or a usage error listing the known ones."""
    from release.config.dataschema import suggest  # noqa: PLC0415

    if name in variants:
        return variants[name]
    msg = (
        f"{matrix_name}: no variant {name!r}{suggest(name, list(variants))} (variants: {', '.join(variants)})"
    )
    raise UsageError(msg)
