"""The checks of one variant, run for each variant in VARIANT_CHECKS' order by
`release.config.checks.variants`: each a small named function of (context, name, key, variant)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from packaging.utils import canonicalize_name

from release.config import globs
from release.config.backends import Backend
from release.config.checkbase import (
    _GCC,
    _IDENTIFIER,
    _IDENTIFIER_RULE,
    _LINE_BREAK,
    _PEP508_NAME,
    _SETTING_KEY,
    _TOOLKIT,
    _VARIANT_NAME,
    MAX_GLOB,
    Context,
    Variant,
    VariantCheck,
)
from release.config.dataschema import dotted, suggest
from release.errors import Problem


def variant_name(c: Context, name: str, key: str, _v: Variant) -> None:
    if not _VARIANT_NAME.match(name):
        c.add(key, f"variant name {name!r} must be lowercase letters and digits (it names sessions)")


def variant_backend(c: Context, _name: str, key: str, v: Variant) -> None:
    if v.backend not in c.backends:
        c.add(
            f"{key}.backend",
            f"unknown backend {v.backend!r}{suggest(v.backend, list(c.backends))} "
            f"(known: {', '.join(sorted(c.backends))}; "
            f"add packaging/backends/{v.backend}.json to teach a new one)",
        )


def variant_distribution(c: Context, name: str, key: str, v: Variant) -> None:
    if not _PEP508_NAME.match(v.distribution):
        c.add(f"{key}.distribution", f"{v.distribution!r} is not a valid distribution name (PEP 508)")
        return
    canon = canonicalize_name(v.distribution)
    if canon in c.owners:
        c.add(
            f"{key}.distribution",
            f"{v.distribution!r} is already the distribution of variant {c.owners[canon]!r}: "
            "each variant needs its own name",
        )
    c.owners[canon] = name


def variant_toolkit_version(c: Context, _name: str, key: str, v: Variant) -> None:
    if v.toolkit is not None and not _TOOLKIT.match(v.toolkit):
        c.add(f"{key}.toolkit", f"{v.toolkit!r} is not a toolkit version like '6.4' or '13.0'")


def variant_build_settings(c: Context, _name: str, key: str, v: Variant) -> None:
    c.names(f"{key}.env", v.env, _IDENTIFIER, f"an environment variable name {_IDENTIFIER_RULE}")
    for env_name, value in v.env.items():
        if _LINE_BREAK.search(value):
            c.add(
                dotted(f"{key}.env", env_name),
                "the value holds a line break or NUL: an environment value is one line "
                "(it reaches $GITHUB_ENV, cibuildwheel's environment and the build's own)",
            )
    c.names(f"{key}.cmake_defines", v.cmake_defines, _IDENTIFIER, f"a CMake variable name {_IDENTIFIER_RULE}")
    what = "a config-settings key (letters, digits, _ . and -, not starting with . or -)"
    c.names(f"{key}.config_settings", v.config_settings, _SETTING_KEY, what)


def variant_excludes(c: Context, _name: str, key: str, v: Variant) -> None:
    # The declared globs, and the import name's own `lib<name>*` in any case.
    declared = [o for o in c.m.engine.own_libraries if len(o) <= MAX_GLOB]
    own_libraries = tuple(dict.fromkeys([*declared, f"lib{c.m.engine.import_name}*"]))
    for i, pattern in enumerate(v.exclude):
        if len(pattern) > MAX_GLOB:
            c.add(f"{key}.exclude[{i}]", f"longer than {MAX_GLOB} characters: no soname is")
            continue
        matches = ((own, globs.common_match(pattern, own)) for own in own_libraries)
        overlap = next(((own, example) for own, example in matches if example is not None), None)
        if overlap is not None:
            c.add(
                f"{key}.exclude[{i}]",
                f"{pattern!r} would also exclude the engine's own library {overlap[0]!r} "
                f"(engine.own_libraries; both match {overlap[1]!r}): name the runtime's soname instead",
            )
        if pattern.startswith("libpython"):
            c.add(f"{key}.exclude[{i}]", f"{pattern!r} would exclude libpython, which no wheel may vendor")


def variant_runtime(c: Context, name: str, _key: str, v: Variant) -> None:
    _check_toolkit(name, v, c.backends, c.bound, c.add)


def variant_device_code(c: Context, _name: str, key: str, v: Variant) -> None:
    if v.device_code and not v.architectures:
        c.add(f"{key}.architectures", "device_code is true: list the architectures it carries")


def variant_images(c: Context, _name: str, key: str, v: Variant) -> None:
    for i, image in enumerate(v.images):
        if image not in c.m.images:
            c.add(
                f"{key}.images[{i}]",
                f"image {image!r} is not defined under images{suggest(image, list(c.m.images))}",
            )


def variant_build_image(c: Context, _name: str, key: str, v: Variant) -> None:
    recipe = v.build_image.debian if v.build_image is not None else None
    if recipe is None:
        return
    if recipe.gcc is not None and not _GCC.match(recipe.gcc):
        c.add(
            f"{key}.build_image.debian.gcc",
            f"{recipe.gcc!r} is not a GCC major like '14' (or 'suite' for the suite's own g++)",
        )
    if recipe.toolkit_install is None:
        return
    backend = c.backends.get(v.backend)
    if backend is not None and backend.toolkit is None:
        c.add(
            f"{key}.build_image.debian.toolkit_install",
            f"backend {v.backend!r} declares no toolkit (toolkit.install) to install: remove the key",
        )
    elif v.toolkit is None:
        c.add(
            f"{key}.build_image.debian.toolkit_install",
            "installs the variant's toolkit: declare its version (`toolkit:`)",
        )


def variant_hardware(c: Context, _name: str, key: str, v: Variant) -> None:
    for i, tier in enumerate(v.hardware):
        if tier not in c.m.hardware:
            known = suggest(tier, list(c.m.hardware))
            c.add(f"{key}.hardware[{i}]", f"hardware tier {tier!r} is not defined under hardware{known}")


def _check_toolkit(
    name: str,
    v: Variant,
    backends: Mapping[str, Backend],
    bound: dict[tuple[object, ...], str],
    add: Callable[[str, str], None],
) -> list[Problem]:
    """The declared toolkit's runtime must be known, and each runtime soname has one variant per
    build (ROCm 7.2 and 10.0 both bind libamdhip64.so.7: one wheel serves both). A variant built
    otherwise (a transport variant: EFA beside RDMA, another CMake switch) is another wheel."""
    backend = backends.get(v.backend)
    if v.toolkit is None or backend is None or not backend.runtime_sonames:
        return []
    key = f"variants.{name}.toolkit"
    sonames = backend.sonames_for(v.toolkit)
    if not sonames:
        known = ", ".join(sorted(backend.runtime_sonames, key=lambda k: (len(k), k)))
        add(
            key,
            f"{v.backend} {v.toolkit}: the backend data knows the runtime of majors {known} only "
            f"(runtime_sonames in packaging/backends/{v.backend}.json)",
        )
    build = (tuple(sorted(v.cmake_defines.items())), tuple(sorted(v.config_settings.items())))
    if sonames and (v.backend, sonames, build) in bound:
        other = bound[(v.backend, sonames, build)]
        releases = backend.releases_providing(sonames[0])
        add(
            key,
            f"variant {other!r} already binds {', '.join(sonames)} ({releases}): "
            f"one variant per runtime soname and build (another soname is another variant, e.g. "
            f"{v.backend}{v.toolkit.split('.', 1)[0]}; so is another build: other cmake_defines)",
        )
    bound.setdefault((v.backend, sonames, build), name)
    return []


VARIANT_CHECKS: tuple[VariantCheck, ...] = (
    variant_name, variant_backend, variant_distribution, variant_toolkit_version, variant_build_settings,
    variant_excludes, variant_runtime, variant_device_code, variant_images, variant_build_image,
    variant_hardware,
)  # fmt: skip
"""Run for each variant, in this order (a problem's place in the report follows it)."""
