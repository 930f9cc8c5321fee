"""The checks across keys of a matrix that its types cannot express, each located by file, line
and dotted key."""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from release.config import globs
from release.config.backends import Backend
from release.config.dataschema import (
    dotted,
    printable,
    suggest,
)
from release.config.imageref import parse_image_reference, unpinned_message
from release.config.pythons import supported_pythons
from release.errors import Problem
from release.wheel.names import FLOOR

# The model's types (release.config.matrix imports this module, so they are not imported here).
Matrix = Any
Variant = Any

SUPPORTED_PYTHONS = supported_pythons()
"""The CPython versions a matrix may name: `release/config/pythons.json`."""
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
_GCC = re.compile(r"^([1-9][0-9]?|suite)$")
_LINE_BREAK = re.compile(r"[\n\r\x00\x0b\x0c\x85\u2028\u2029]")
HTTP_URL = re.compile(r"^https?://[^\s\x00-\x1f\x7f]+$")


def collector(problems: list[Problem], lines: Mapping[str, int], file: str) -> Callable[[str, str], None]:
    """`add(dotted key, message)`: a problem at the key's line, else its nearest parent's."""

    def add(key: str, message: str) -> None:
        line = lines.get(key)
        parent = key
        while line is None and "." in parent:
            parent = parent.rsplit(".", 1)[0]
            line = lines.get(parent)
        problems.append(Problem(file, line, printable(key), printable(message)))

    return add


def check(m: Matrix, backends: Mapping[str, Backend], lines: Mapping[str, int], file: str) -> list[Problem]:
    problems: list[Problem] = []
    add = collector(problems, lines, file)

    def names(key: str, mapping: Mapping[str, str], pattern: re.Pattern[str], what: str) -> None:
        for name in mapping:
            if not pattern.match(name):
                add(dotted(key, name), f"{name!r} is not {what}")

    if not m.python:
        add("python", "list at least one Python version")
    seen_py: set[str] = set()
    for i, py in enumerate(m.python):
        if py not in supported_pythons():
            add(f"python[{i}]", f"{py!r} is not supported (supported: {', '.join(supported_pythons())})")
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

    limits = [("publish.size_limit", m.publish.size_limit)] + [
        (f"variants.{n}.size_limit", v.size_limit) for n, v in m.variants.items() if v.size_limit is not None
    ]
    for limit_key, limit in limits:
        if limit <= 0:
            add(limit_key, f"{limit} is not a size: give the bytes the index takes a file (PyPI: 104857600)")
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
        if url is not None and not HTTP_URL.match(url):
            add(f"publish.{name}", f"{url!r} is not an http(s) URL")

    if not m.variants:
        add("variants", "define at least one variant")
    owners: dict[str, str] = {}
    bound: dict[tuple[object, ...], str] = {}
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
        for env_name, value in v.env.items():
            if _LINE_BREAK.search(value):
                add(
                    dotted(f"{key}.env", env_name),
                    "the value holds a line break or NUL: an environment value is one line "
                    "(it reaches $GITHUB_ENV, cibuildwheel's environment and the build's own)",
                )
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
        problems.extend(_check_toolkit(name, v, backends, bound, add))
        if v.device_code and not v.architectures:
            add(f"{key}.architectures", "device_code is true: list the architectures it carries")
        for i, image in enumerate(v.images):
            if image not in m.images:
                add(
                    f"{key}.images[{i}]",
                    f"image {image!r} is not defined under images{suggest(image, list(m.images))}",
                )
        recipe = v.build_image.debian if v.build_image is not None else None
        if recipe is not None and recipe.gcc is not None and not _GCC.match(recipe.gcc):
            add(
                f"{key}.build_image.debian.gcc",
                f"{recipe.gcc!r} is not a GCC major like '14' (or 'suite' for the suite's own g++)",
            )
        if recipe is not None and recipe.toolkit_install is not None:
            backend = backends.get(v.backend)
            if backend is not None and backend.toolkit is None:
                add(
                    f"{key}.build_image.debian.toolkit_install",
                    f"backend {v.backend!r} declares no toolkit (toolkit.install) to install: remove the key",
                )
            elif v.toolkit is None:
                add(
                    f"{key}.build_image.debian.toolkit_install",
                    "installs the variant's toolkit: declare its version (`toolkit:`)",
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
        if img.container is not None:
            try:
                parse_image_reference(img.container)
            except ValueError as exc:
                add(f"{key}.container", f"{img.container!r}: {exc}")
        sim = img.simulate
        if sim is not None and sim.runtime == "prefix" and not sim.prefix:
            add(
                f"{key}.simulate.prefix",
                "runtime: prefix needs the library directory (e.g. /opt/rocm-6.4.1/lib)",
            )
        if sim is not None and sim.prefix and not sim.prefix.startswith("/"):
            add(f"{key}.simulate.prefix", f"{sim.prefix!r} must be an absolute path")
        if img.debian is not None and img.debian.gcc is not None:
            add(f"{key}.debian.gcc", "serving images compile nothing: gcc belongs to a variant's build_image")
        for i, py in enumerate(img.python):
            if py not in supported_pythons():
                add(
                    f"{key}.python[{i}]",
                    f"{py!r} is not supported (supported: {', '.join(supported_pythons())})",
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


def _globs_overlap(a: str, b: str) -> bool:
    """Whether some name is matched by both soname globs (`libfoo*` and `*.so*` are: libfoo.so)."""
    return globs.common_match(a, b) is not None


def unpinned_serving_images(
    m: Matrix, lines: Mapping[str, int], file: str, variants: Iterable[str] | None = None
) -> list[Problem]:
    """Serving images that `variants` (default: all) run in containers and name by tag only.

    A warning for plans; `release plan --github release` refuses them (a release is tested in the
    image it names, and a tag can be moved after the test)."""
    chosen = list(m.variants) if variants is None else list(variants)
    used = dict.fromkeys(image for name in chosen for image in m.variants[name].images)
    problems = []
    for name in used:
        img = m.images.get(name)
        if img is None or img.container is None or parse_image_reference(img.container).pinned:
            continue
        key = dotted(dotted("images", name), "container")
        line = lines.get(key, lines.get(dotted("images", name)))
        problems.append(Problem(file, line, printable(key), printable(unpinned_message(img.container))))
    return problems


PROJECT_FILES = ("pyproject.toml", "setup.py")
"""A directory holding one of these is a PEP 517 project (setup.py alone: the legacy backend)."""


def engine_source(m: Matrix, root: Path, lines: Mapping[str, int], file: str) -> list[Problem]:
    """`engine.source` must be a directory holding a PEP 517 project. It may lie outside the
    matrix's directory (a Mooncake checkout beside ours) only when it is one; checked when a
    plan is made, so a matrix can be read (and verify run) where the engine is not checked out."""
    source = m.engine.source
    resolved = (root / source).resolve()
    outside = not resolved.is_relative_to(root.resolve())
    name = Path(file).name
    where = f" ({resolved}{', outside the directory of ' + name if outside else ''})"
    if not resolved.exists():
        message = f"{source!r} does not exist{where}: give the engine's project directory, relative to {name}"
    elif not resolved.is_dir():
        message = f"{source!r} is not a directory{where}: give the engine's project directory"
    elif not any((resolved / name).is_file() for name in PROJECT_FILES):
        message = (
            f"{source!r} holds no PEP 517 project (no {' or '.join(PROJECT_FILES)}){where}: "
            "give the engine's project directory"
        )
    else:
        return []
    return [Problem(file, lines.get("engine.source"), "engine.source", printable(message))]


ONE_LINE_RULE = (
    "a matrix value is one line of text: it reaches shell command lines, $GITHUB_ENV and "
    "$GITHUB_OUTPUT, cibuildwheel's environment and config-settings (CIBW_* lines), CMake -D options"
)


def _unsafe_character(text: str) -> str | None:
    """The first character an env-file line or a shell word cannot carry as itself: line breaks
    (any str.splitlines() splits at), NUL and the other control characters (a tab is kept)."""
    return next((ch for ch in text if ch != "\t" and unicodedata.category(ch) in {"Cc", "Zl", "Zp"}), None)


def _strings(node: object, key: str) -> Iterable[tuple[str, str, bool]]:
    """(dotted key, text, is-a-key) for every string of the model, mapping keys included."""
    if isinstance(node, str):
        yield key, node, False
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            yield from _strings(getattr(node, f.name), dotted(key, f.name))
    elif isinstance(node, Mapping):
        for name, value in node.items():
            yield dotted(key, str(name)), str(name), True
            yield from _strings(value, dotted(key, str(name)))
    elif isinstance(node, tuple | list):
        for i, value in enumerate(node):
            yield from _strings(value, f"{key}[{i}]")


def one_line_values(
    m: Matrix, lines: Mapping[str, int], file: str, reported: Iterable[str] = ()
) -> list[Problem]:
    """Every string of the matrix, and every key, is one line without control characters: the
    class of `env` values with a newline, now for cmake_defines, config_settings, excludes,
    images, runner labels and all the rest (a key another check already reported is skipped)."""
    seen = {*reported}
    problems = []
    for key, text, is_key in _strings(m, ""):
        ch = _unsafe_character(text)
        if ch is None or key in seen:
            continue
        seen.add(key)
        what = "the key" if is_key else "the value"
        message = f"{what} holds {ch!r} ({unicodedata.name(ch, 'a control character')}): {ONE_LINE_RULE}"
        problems.append(Problem(file, _line(lines, key), printable(key), printable(message)))
    return problems


def _line(lines: Mapping[str, int], key: str) -> int | None:
    """The line of `key`, else of the nearest enclosing key (`a.b[2]` -> `a.b` -> `a`)."""
    while key:
        if key in lines:
            return lines[key]
        key = re.sub(r"(\[\d+\]|\.?[^.\[]*)$", "", key, count=1)
    return None
