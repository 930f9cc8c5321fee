"""The checks across keys of a matrix that its types cannot express, each located by file, line
and dotted key."""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path

from packaging.version import InvalidVersion, Version

from release.config import globs
from release.config.backends import Backend
from release.config.checkbase import (
    _IDENTIFIER,
    _IDENTIFIER_RULE,
    _NAME,
    _SCRIPT_NAME,
    HTTP_URL,
    MAX_GLOB,
    Context,
    Matrix,
    MatrixCheck,
    collector,
)
from release.config.dataschema import dotted, printable, suggest
from release.config.imageref import parse_image_reference, unpinned_message
from release.config.machines import MACHINES, POLICY, machine_of_tag
from release.config.names import NAME_RULE
from release.config.pythons import python, supported_pythons
from release.config.variantchecks import VARIANT_CHECKS
from release.errors import Problem
from release.wheel.names import FLOOR

__all__ = ["HTTP_URL", "MAX_GLOB", "MAX_MATRIX_BYTES", "SUPPORTED_PYTHONS", "check", "collector"]

SUPPORTED_PYTHONS = supported_pythons()
"""The CPython versions a matrix may name: `release/config/pythons.json`."""
MAX_MATRIX_BYTES = 1 << 20
"""A matrix file larger than this is refused before it is read (the real one is a few KiB)."""


def check(m: Matrix, backends: Mapping[str, Backend], lines: Mapping[str, int], file: str) -> list[Problem]:
    """Every named check of MATRIX_CHECKS, in order (VARIANT_CHECKS run per variant among them)."""
    problems: list[Problem] = []
    context = Context(m, backends, collector(problems, lines, file))
    for one in MATRIX_CHECKS:
        one(context)
    return problems


def python_list(c: Context) -> None:
    if not c.m.python:
        c.add("python", "list at least one Python version")
    seen: set[str] = set()
    for i, py in enumerate(c.m.python):
        if py not in supported_pythons():
            c.add(f"python[{i}]", f"{py!r} is not supported (supported: {', '.join(supported_pythons())})")
        if py in seen:
            c.add(f"python[{i}]", f"{py!r} is listed twice")
        seen.add(py)


def platform_floor(c: Context) -> None:
    platform = c.m.platform
    if not FLOOR.match(platform.floor) and not POLICY.match(platform.floor):
        c.add(
            "platform.floor",
            f"{platform.floor!r} is not a platform tag like manylinux_2_28_x86_64 (or a policy like "
            "manylinux_2_28 for every architecture)",
        )
        return
    seen: set[str] = set()
    for index, machine in enumerate(platform.architectures):
        if machine not in MACHINES:
            c.add(
                f"platform.architectures[{index}]",
                f"{machine!r} is no machine architecture{suggest(machine, list(MACHINES))} "
                f"(known: {', '.join(MACHINES)})",
            )
        elif machine in seen:
            c.add(f"platform.architectures[{index}]", f"{machine!r} is listed twice")
        seen.add(machine)
    pinned = machine_of_tag(platform.floor) if FLOOR.match(platform.floor) else None
    others = [m for m in platform.machines if m != pinned and m not in platform.floors]
    if pinned is not None and others:
        policy = platform.floor.removesuffix(f"_{pinned}")
        c.add(
            "platform.floor",
            f"{platform.floor} is the floor of {pinned} alone, but platform.architectures lists "
            f"{', '.join(others)}: write `floor: {policy}` (each architecture gets its own tag) or "
            f"give platform.floors.{others[0]}",
        )
    for machine, floor in platform.floors.items():
        key = dotted("platform.floors", machine)
        if machine not in platform.machines:
            c.add(key, f"{machine!r} is not in platform.architectures ({', '.join(platform.machines)})")
        elif not FLOOR.match(floor) or machine_of_tag(floor) != machine:
            c.add(key, f"{floor!r} is not a platform tag of {machine} like manylinux_2_28_{machine}")


def variant_machines(c: Context) -> None:
    """Every variant is built for at least one machine (the matrix's that its backend has), and
    its hardware tiers are of those machines."""
    for name, variant in c.m.variants.items():
        backend = c.backends.get(variant.backend)
        if backend is None:
            continue
        machines = backend.machines_of(c.m.platform.machines)
        if not machines:
            c.add(
                f"variants.{name}.backend",
                f"the {backend.name} backend has no machine of platform.architectures "
                f"({', '.join(c.m.platform.machines)}; it has {', '.join(backend.machines)}): "
                f"add one of its machines to platform.architectures, or drop variant {name!r}",
            )
        for index, tier in enumerate(variant.hardware):
            machine = c.m.hardware[tier].machine if tier in c.m.hardware else None
            if machine is not None and machine not in machines:
                c.add(
                    f"variants.{name}.hardware[{index}]",
                    f"hardware {tier!r} runs {machine} machines, but variant {name!r} is built for "
                    f"{', '.join(machines) or 'none'} (platform.architectures, the backend's machines)",
                )


def engine_identity(c: Context) -> None:
    if not _IDENTIFIER.match(c.m.engine.import_name):
        c.add("engine.import_name", f"{c.m.engine.import_name!r} is not a Python identifier")
    try:
        Version(c.m.engine.version)
    except InvalidVersion:
        c.add("engine.version", f"{c.m.engine.version!r} is not a PEP 440 version")


def size_limits(c: Context) -> None:
    limits = [("publish.size_limit", c.m.publish.size_limit)] + [
        (f"variants.{n}.size_limit", v.size_limit)
        for n, v in c.m.variants.items()
        if v.size_limit is not None
    ]
    for key, limit in limits:
        if limit <= 0:
            c.add(key, f"{limit} is not a size: give the bytes the index takes a file (PyPI: 104857600)")


def stable_abi(c: Context) -> None:
    keys = [("engine.stable_abi", c.m.engine.stable_abi)] + [
        (f"variants.{n}.stable_abi", v.stable_abi) for n, v in c.m.variants.items()
    ]
    for key, abi in keys:
        if abi is not None and abi != "off" and abi not in c.m.python:
            c.add(key, f"{abi!r} must be one of the matrix's Pythons ({', '.join(c.m.python)}) or 'off'")
        elif abi is not None and abi != "off" and python(abi).free_threaded:
            msg = f"{abi!r} is a free-threaded build, which never loads abi3: name a GIL build like '3.12'"
            c.add(key, msg)
        if key == "engine.stable_abi" and abi == "off":
            c.add(key, "leave it out to build a wheel per Python ('off' is for variants)")


def prebuild(c: Context) -> None:
    step = c.m.engine.prebuild
    if step is None:
        return
    inside = Path(step.cmake_source)
    if inside.is_absolute() or ".." in inside.parts:
        c.add(
            "engine.prebuild.cmake_source",
            f"{step.cmake_source!r} must be a directory inside engine.source (it is staged with the "
            f"project): got {Path(c.m.engine.source) / step.cmake_source}",
        )
    if not _IDENTIFIER.match(step.prefix_define):
        c.add(
            "engine.prebuild.prefix_define",
            f"{step.prefix_define!r} is not a CMake variable name {_IDENTIFIER_RULE}",
        )


def engine_lists(c: Context) -> None:
    for i, script in enumerate(c.m.engine.scripts):
        if not _SCRIPT_NAME.match(script):
            what = "a console script name (letters, digits, _ . + -, not first . + -)"
            c.add(f"engine.scripts[{i}]", f"{script!r} is not {what}")
    for key in ("commands", "self_tests"):
        for i, command in enumerate(getattr(c.m.engine.smoke, key)):
            if not command or not command[0]:
                c.add(f"engine.smoke.{key}[{i}]", "an empty command: give the program, then its arguments")
    for i, own in enumerate(c.m.engine.own_libraries):
        if len(own) > MAX_GLOB:
            c.add(f"engine.own_libraries[{i}]", f"longer than {MAX_GLOB} characters: no soname is")


def publish_targets(c: Context) -> None:
    if not c.m.publish.tag_pattern.strip():
        c.add("publish.tag_pattern", "empty: no tag could ever publish (use e.g. 'v*')")
    for name in ("repository", "prerelease_repository"):
        url = getattr(c.m.publish, name)
        if url is not None and not HTTP_URL.match(url):
            c.add(f"publish.{name}", f"{url!r} is not an http(s) URL")


def variants(c: Context) -> None:
    """Each variant through VARIANT_CHECKS, in the matrix's order."""
    if not c.m.variants:
        c.add("variants", "define at least one variant")
    for name, v in c.m.variants.items():
        for one in VARIANT_CHECKS:
            one(c, name, dotted("variants", name), v)


def images(c: Context) -> None:
    c.names("images", c.m.images, _NAME, f"an image name {NAME_RULE}")
    for name, img in c.m.images.items():
        key = dotted("images", name)
        if img.container is None and img.simulate is None:
            c.add(key, "give a container reference, a simulation, or both")
        if img.container is not None:
            try:
                parse_image_reference(img.container)
            except ValueError as exc:
                c.add(f"{key}.container", f"{img.container!r}: {exc}")
        if img.pin == "probe" and (img.container is None or "@" in img.container):
            c.add(
                f"{key}.pin",
                "`probe` pins a tag by the digest a probe records: write `container` as name:tag "
                "(without @sha256:...), or leave `pin` out for a reference pinned by digest",
            )
        sim = img.simulate
        if sim is not None and sim.runtime == "prefix" and not sim.prefix:
            c.add(
                f"{key}.simulate.prefix",
                "runtime: prefix needs the library directory (e.g. /opt/rocm-6.4.1/lib)",
            )
        if sim is not None and sim.prefix and not sim.prefix.startswith("/"):
            c.add(f"{key}.simulate.prefix", f"{sim.prefix!r} must be an absolute path")
        if img.debian is not None and img.debian.gcc is not None:
            c.add(
                f"{key}.debian.gcc", "serving images compile nothing: gcc belongs to a variant's build_image"
            )
        tiers = sorted({hw.architecture for hw in c.m.hardware.values()})
        for i, arch in enumerate(img.gpu_architectures):
            if arch not in tiers:
                c.add(
                    f"{key}.gpu_architectures[{i}]",
                    f"{arch!r} is no hardware tier's architecture (declared: {', '.join(tiers) or 'none'}): "
                    "the image would run on no tier; name one of them, or leave the key out for all",
                )
        for i, py in enumerate(img.python):
            if py not in supported_pythons():
                c.add(
                    f"{key}.python[{i}]",
                    f"{py!r} is not supported (supported: {', '.join(supported_pythons())})",
                )


def hardware(c: Context) -> None:
    c.names("hardware", c.m.hardware, _NAME, f"a hardware name {NAME_RULE}")
    for name, hw in c.m.hardware.items():
        key = dotted("hardware", name)
        if not hw.runner:
            c.add(f"{key}.runner", "list the runner labels (e.g. [self-hosted, linux, mi300x])")
        if hw.nodes not in (1, 2):
            c.add(f"{key}.nodes", "1 (one runner) or 2 (prefill and decode on two runners)")
        if hw.machine not in MACHINES:
            known = ", ".join(MACHINES)
            c.add(f"{key}.machine", f"{hw.machine!r} is no machine architecture (known: {known})")


def prerelease(c: Context) -> None:
    if c.m.publish.prerelease == "separate-index" and not c.m.publish.prerelease_repository:
        c.add("publish.prerelease_repository", "prerelease: separate-index needs a repository URL")


MATRIX_CHECKS: tuple[MatrixCheck, ...] = (
    python_list, platform_floor, variant_machines, engine_identity, size_limits, stable_abi, prebuild,
    engine_lists, publish_targets, variants, images, hardware, prerelease,
)  # fmt: skip
"""The matrix's checks across keys, in the order their problems are reported."""


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
        if img is None or img.container is None or img.pin == "probe":
            continue  # `pin: probe`: pinned by its recorded digest, or awaiting it (plan.awaiting)
        if parse_image_reference(img.container).pinned:
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
        key = re.sub(r"(?a)(\[\d+\]|\.?[^.\[]*)$", "", key, count=1)
    return None
