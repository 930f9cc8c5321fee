"""cibuildwheel configuration of a variant, derived from the matrix.

Release wheels are built in the matrix floor's image (`manylinux_2_28`) by cibuildwheel; this
module turns one variant of `matrix.yaml` into cibuildwheel's own settings, so that no workflow or
`pyproject.toml` repeats them. `cibuildwheel_options` returns them under cibuildwheel's TOML keys,
`cibuildwheel_env` as `CIBW_*` variables; `python -m release cibuildwheel-config` prints either.

cibuildwheel copies its working directory into the container as `/project` and runs the repair
command there, so it must be started from the matrix's directory (the staged package directory
lives below it); `before-build` installs the toolkit into the build environment for that command.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from collections.abc import Mapping

import tomlkit

from release.errors import UsageError
from release.matrix import LoadedMatrix
from release.plan import platform_family, python_tag

FORMATS = ("toml", "env", "json")
_SAFE = re.compile(r"[A-Za-z0-9_./:,+@%-]+")


def image_option(floor: str) -> tuple[str, str, str]:
    """`manylinux_2_28_x86_64` -> (`manylinux-x86_64-image`, `manylinux_2_28`, `x86_64`)."""
    family, major, minor, arch = floor.split("_", 3)
    return f"{family}-{arch}-image", f"{family}_{major}_{minor}", arch


def build_selectors(loaded: LoadedMatrix, pythons: tuple[str, ...]) -> tuple[str, ...]:
    """cibuildwheel identifiers of the selected Pythons, e.g. `cp312-manylinux_x86_64`."""
    family = platform_family(loaded.matrix.platform.floor)
    return tuple(f"{python_tag(py)}-{family}" for py in _pythons(loaded, pythons))


def cmake_defines(loaded: LoadedMatrix, variant_name: str) -> dict[str, str]:
    return dict(loaded.variant(variant_name).cmake_defines)


def config_settings(loaded: LoadedMatrix, variant_name: str) -> dict[str, str]:
    """PEP 517 config settings: scikit-build-core's `cmake.define.*`, then the variant's own."""
    variant = loaded.variant(variant_name)
    settings = {f"cmake.define.{key}": value for key, value in variant.cmake_defines.items()}
    settings.update(variant.config_settings)
    return settings


def build_environment(loaded: LoadedMatrix, variant_name: str) -> dict[str, str]:
    """The variant's `env`, plus its CMake defines in scikit-build-core's `SKBUILD_CMAKE_DEFINE`."""
    variant = loaded.variant(variant_name)
    env = dict(variant.env)
    if variant.cmake_defines and "SKBUILD_CMAKE_DEFINE" not in env:
        env["SKBUILD_CMAKE_DEFINE"] = ";".join(f"{k}={v}" for k, v in variant.cmake_defines.items())
    return env


def repair_command(variant_name: str) -> str:
    return f"python -m release repair --variant {shlex.quote(variant_name)} --dest-dir {{dest_dir}} {{wheel}}"


def test_command(loaded: LoadedMatrix) -> str:
    """Import the engine package in cibuildwheel's test environment (the runtime is installed there)."""
    statement = f"import {loaded.matrix.engine.import_name}"
    return f"python -c {shlex.quote(statement)}"


def cibuildwheel_options(loaded: LoadedMatrix, variant_name: str, pythons: tuple[str, ...]) -> dict[str, str]:
    """cibuildwheel settings for one variant under their TOML keys (`[tool.cibuildwheel]`).

    `pythons` selects from the matrix's Python versions; empty means all of them.
    """
    variant = loaded.variant(variant_name)
    backend = loaded.backend(variant)
    image_key, image, arch = image_option(loaded.matrix.platform.floor)
    family = image_key.split("-", 1)[0]
    other = "musllinux" if family == "manylinux" else "manylinux"
    options = {
        "build": " ".join(build_selectors(loaded, pythons)),
        "skip": f"*-{other}_*",
        "archs": arch,
        image_key: image,
        "build-frontend": "build",
    }
    if backend.toolkit is not None:
        # The install scripts take the toolkit version the matrix releases with.
        options["before-all"] = " ".join(
            [backend.toolkit.install, *([variant.toolkit] if variant.toolkit else [])]
        )
    # Timestamps of the repaired wheel come from the commit, inside the container too.
    options["environment-pass"] = "SOURCE_DATE_EPOCH"
    options["before-build"] = "python -m pip install --quiet {project}"
    environment = build_environment(loaded, variant_name)
    if environment:
        options["environment"] = " ".join(f"{k}={quote(v)}" for k, v in environment.items())
    settings = config_settings(loaded, variant_name)
    if settings:
        # cibuildwheel splits config-settings with shlex, unlike `environment`.
        options["config-settings"] = " ".join(shlex.quote(f"{k}={v}") for k, v in settings.items())
    options["repair-wheel-command"] = repair_command(variant_name)
    options["test-command"] = test_command(loaded)
    return options


def env_name(option: str) -> str:
    """`manylinux-x86_64-image` -> `CIBW_MANYLINUX_X86_64_IMAGE`."""
    return "CIBW_" + option.upper().replace("-", "_")


def cibuildwheel_env(loaded: LoadedMatrix, variant_name: str, pythons: tuple[str, ...]) -> dict[str, str]:
    """The same settings as `CIBW_*` environment variables."""
    options = cibuildwheel_options(loaded, variant_name, pythons)
    return {env_name(key): value for key, value in options.items()}


def render(options: Mapping[str, str], fmt: str) -> str:
    """Text for `--format`: a `[tool.cibuildwheel]` table, `CIBW_*=value` lines, or JSON."""
    if fmt == "toml":
        table = tomlkit.table()
        for key, value in options.items():
            table[key] = value
        doc = tomlkit.document()
        tool = tomlkit.table(is_super_table=True)
        tool["cibuildwheel"] = table
        doc["tool"] = tool
        return tomlkit.dumps(doc)
    if fmt == "env":
        lines = []
        for key, value in options.items():
            if "\n" in value:
                msg = f"cibuildwheel option {key!r} spans lines and cannot be one environment line"
                raise UsageError(msg)
            lines.append(f"{env_name(key)}={value}")
        return "\n".join(lines) + "\n"
    if fmt == "json":
        return json.dumps(dict(options), indent=2) + "\n"
    msg = f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})"
    raise UsageError(msg)


def quote(value: str) -> str:
    """Quote a literal for cibuildwheel's `environment`/`config-settings` parser (bashlex based).

    Its evaluator rejects a bare `A=B` value and does not join adjacent quoted pieces, so a value
    is left bare only when plainly safe, else wrapped whole in single or escaped double quotes.
    """
    if _SAFE.fullmatch(value):
        return value
    if "'" not in value:
        return f"'{value}'"
    escaped = re.sub(r'([\\"$`])', r"\\\1", value)
    return f'"{escaped}"'


def _pythons(loaded: LoadedMatrix, pythons: tuple[str, ...]) -> tuple[str, ...]:
    known = loaded.matrix.python
    for py in pythons:
        if py not in known:
            msg = f"{loaded.path.name}: Python {py} is not in the matrix (python: {', '.join(known)})"
            raise UsageError(msg)
    return tuple(py for py in known if py in pythons) if pythons else known


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variant", required=True, help="the variant to configure")
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        help="a Python version from the matrix (repeatable; default: all of them)",
    )
    parser.add_argument(
        "--format", choices=FORMATS, default="toml", help="output format (default: %(default)s)"
    )


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    options = cibuildwheel_options(loaded, args.variant, tuple(args.python))
    print(render(options, args.format), end="")
    return 0
