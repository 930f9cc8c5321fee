"""cibuildwheel configuration of a variant, derived from the matrix.

Release wheels are built in the matrix floor's image (`manylinux_2_28`) by cibuildwheel; this
module turns one variant of `matrix.yaml` into cibuildwheel's own settings, so that no workflow or
`pyproject.toml` repeats them. `cibuildwheel_options` returns them under cibuildwheel's TOML keys,
`cibuildwheel_env` as `CIBW_*` variables; `python -m release cibuildwheel-config` prints either.
Both are derived from the same resolved build steps as the host build.

cibuildwheel copies its working directory into the container as `/project` and runs the repair
command there, so it must be started from the matrix's directory (the staged package directory
lives below it); `before-build` installs the toolkit into the build environment for that command.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence

import tomlkit

from release.config.sysdeps import packages_of, pkg_config_modules
from release.errors import UsageError
from release.machine.toolchain import link_env
from release.plan.resolve import ResolvedVariant
from release.plan.steps import BuildStep
from release.wheel.names import parse_platform_tag

FORMATS = ("toml", "env", "json")
_SAFE = re.compile(r"[A-Za-z0-9_./:,+@%-]+")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RESERVED = frozenset(
    [
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "case",
        "esac",
        "for",
        "select",
        "while",
        "until",
        "do",
        "done",
        "in",
        "function",
        "time",
        "coproc",
    ]
)


def _variant_of(steps: tuple[BuildStep, ...]) -> ResolvedVariant:
    variants = {id(s.variant): s.variant for s in steps}
    if len(variants) != 1:
        names = {v.name for v in variants.values()}
        if len(names) == 1:  # one variant, several machines: cibuildwheel builds one `archs`
            floors = ", ".join(sorted({v.floor for v in variants.values()}))
            msg = (
                f"cibuildwheel builds one machine at a time: the steps of {names.pop()} are for {floors}; "
                "pass the steps of one machine (--arch)"
            )
        else:
            msg = "cibuildwheel runs one variant at a time: pass the steps of exactly one variant"
        raise UsageError(msg)
    return steps[0].variant


def repair_command(variant: ResolvedVariant, *, python: str = "python") -> str:
    """The repair step inside the container: the resolved floor and excludes, spelled out, so
    the container needs no matrix and repairs exactly as the host build does; `--toolkit` stops a
    build image whose toolkit is not the declared one with the same line a host build prints.
    `python`: the one the toolkit is installed for (the build's, or a local build's own environment)."""
    excludes = " ".join(f"--exclude {shlex.quote(pattern)}" for pattern in variant.excludes)
    parts = [
        f"{python} -m release repair",
        f"--plat {shlex.quote(variant.floor)}",
        excludes,
        f"--toolkit {shlex.quote(f'{variant.backend_name}={variant.toolkit}')}" if variant.toolkit else "",
        "-w {dest_dir} {wheel}",
    ]
    return " ".join(p for p in parts if p)


def before_all_command(variant: ResolvedVariant) -> str:
    """cibuildwheel's before-all: the system packages (dnf, where the image has it: the manylinux
    release image; a local Debian image has its apt packages built in), the toolkit (its install
    script takes the version the matrix releases with), then the engine's own command."""
    parts: list[str] = []
    dnf = packages_of(variant.system_packages, "dnf")
    if pkg_config_modules(variant.system_packages):
        # Declared pkg-config modules need the program (dnf does nothing where the base has it).
        dnf = tuple(dict.fromkeys([*dnf, "pkgconf-pkg-config"]))
    if dnf:
        # Repository packages (epel-release: AlmaLinux 8 has no glog or gflags without it) go
        # first, in their own transaction, so that the others can come from them.
        repos = [p for p in dnf if p.endswith("-release")]
        others = [p for p in dnf if not p.endswith("-release")]
        installs = [
            f"dnf install -y {' '.join(shlex.quote(p) for p in group)}" for group in (repos, others) if group
        ]
        parts.append(f"if command -v dnf >/dev/null 2>&1; then {' && '.join(installs)}; fi")
    probe = variant.backend.toolkit
    if probe is not None:
        parts.append(" ".join([probe.install, *([variant.toolkit] if variant.toolkit else [])]))
    if variant.before_all:
        parts.append(variant.before_all)
    return " && ".join(parts)


def test_command(variant: ResolvedVariant) -> str:
    """Import the engine package in cibuildwheel's test environment (the runtime is installed there).

    A build container has no GPU driver: where the backend has driver libraries (libcuda.so.1) and
    none loads there, the import passes only as the package's own refusal that names the absent
    library and says the driver is missing (a bare loader error still fails the build)."""
    name = variant.import_name
    drivers = list(variant.backend.driver_sonames)
    if not drivers:
        return f"python -c {shlex.quote(f'import {name}')}"
    script = "\n".join(
        [
            "import ctypes",
            "absent = []",
            f"for soname in {drivers!r}:",
            "    try:",
            "        ctypes.CDLL(soname)",
            "    except OSError:",
            "        absent.append(soname)",
            "try:",
            f"    import {name}",
            "except ImportError as exc:",
            "    said = str(exc)",
            "    if not absent or not any(s in said for s in absent) or 'driver' not in said.lower():",
            "        raise",
            f"    print('import {name} refused without the GPU driver, as it must: ' + said)",
        ]
    )
    return f"python -c {shlex.quote(f'exec({script!r})')}"


FIND_LINKS_MOUNT = "/release-find-links"
"""Where a container build sees the matrix's `find_links` directory (mounted read-only)."""
EXCLUDES_FILE = "release-test-excludes.txt"
"""The container project's list of the requirements the import test leaves out (`skip`)."""


def test_environment(variant: ResolvedVariant) -> dict[str, str]:
    """The import test's installer (uv, in cibuildwheel's test venv) takes the wheel's requirements
    from the smoke requirement source, never the index unless it is the one declared, and leaves
    out the skipped ones (`engine.smoke.requirements`): a torch in `Requires-Dist` costs no
    download where the smoke leaves it out."""
    source = variant.smoke_requirements
    env = {"UV_INDEX_URL": source.index_url} if source.index_url else {"UV_OFFLINE": "1"}
    if source.find_links is not None and not source.index_url:
        env["UV_FIND_LINKS"] = FIND_LINKS_MOUNT
    if source.skip:
        env["UV_EXCLUDE"] = f"/project/{EXCLUDES_FILE}"
    return env


def cibuildwheel_options(
    steps: tuple[BuildStep, ...], *, image: str | None = None, before_build: str | None = None
) -> dict[str, str]:
    """cibuildwheel settings for the build steps of one variant, under their TOML keys.

    `image` replaces the variant's release image (a local build image); `before_build` how the
    toolkit is installed in the container's build environment (for the repair command)."""
    variant = _variant_of(steps)
    if len({s.abi3 for s in steps}) != 1:
        msg = "one cibuildwheel run builds either abi3 steps or per-Python steps, not both"
        raise UsageError(msg)
    floor = parse_platform_tag(variant.floor)
    other = "musllinux" if floor.family == "manylinux" else "manylinux"
    options = {
        "build": " ".join(f"{s.python_tag}-{floor.family_arch}" for s in steps),
        "skip": f"*-{other}_*",
        "archs": floor.arch,
        f"{floor.family}-{floor.arch}-image": image or variant.build_image.release,
        # uv makes the isolated build environment and the test environment (manylinux images, and
        # the local build images, carry it): pip's venv and ensurepip cost seconds of CPU each.
        "build-frontend": "build[uv]",
    }
    probe = variant.backend.toolkit
    before_all = before_all_command(variant)
    if before_all:
        options["before-all"] = before_all
    # Timestamps of the repaired wheel come from the commit, inside the container too; the
    # install command's own variables (MUSA_INSTALLER) reach before-all there.
    passed = ("SOURCE_DATE_EPOCH", *(probe.install_env if probe is not None else ()))
    options["environment-pass"] = " ".join(passed)
    options["before-build"] = before_build or "python -m pip install --quiet {project}"
    settings, environment = variant.build.translate()
    environment = {**container_link_env(variant), **environment}
    if steps[0].abi3:
        settings += variant.build.limited_api(steps[0].python_tag)
    if environment:
        options["environment"] = " ".join(f"{_name(k)}={quote(v)}" for k, v in environment.items())
    if settings:
        # cibuildwheel splits config-settings with shlex, unlike `environment`.
        options["config-settings"] = " ".join(shlex.quote(f"{k}={v}") for k, v in settings)
    options["repair-wheel-command"] = repair_command(variant)
    options["test-command"] = test_command(variant)
    options["test-environment"] = " ".join(f"{k}={quote(v)}" for k, v in test_environment(variant).items())
    return options


def container_link_env(variant: ResolvedVariant) -> dict[str, str]:
    """The toolkit's link-only directories (CUDA's driver stub) on `LIBRARY_PATH` in the
    container, under the prefix the backend's install command uses for the declared toolkit; the
    variant's own `env` wins over it."""
    probe = variant.backend.toolkit
    if probe is None or not probe.install_prefix or not variant.toolkit:
        return {}
    return link_env(probe.install_prefix.replace("{version}", variant.toolkit), probe)


def env_name(option: str) -> str:
    """`manylinux-x86_64-image` -> `CIBW_MANYLINUX_X86_64_IMAGE`."""
    return "CIBW_" + option.upper().replace("-", "_")


def cibuildwheel_env(
    steps: tuple[BuildStep, ...], *, image: str | None = None, before_build: str | None = None
) -> dict[str, str]:
    """The same settings as `CIBW_*` environment variables."""
    options = cibuildwheel_options(steps, image=image, before_build=before_build)
    return {env_name(key): value for key, value in options.items()}


def stable_abi_override(steps: tuple[BuildStep, ...]) -> tuple[dict[str, str], list[dict[str, str]]]:
    """Options for a variant's steps where abi3 and per-Python steps mix (stable_abi with older
    Pythons below it): the per-Python options build every identifier, and an override selects the
    abi3 step's identifier to add the limited-API config settings."""
    per_python = tuple(s for s in steps if not s.abi3)
    abi3 = tuple(s for s in steps if s.abi3)
    if not per_python or not abi3:
        return cibuildwheel_options(steps), []
    options = cibuildwheel_options(per_python)
    limited = cibuildwheel_options(abi3)
    options["build"] = f"{options['build']} {limited['build']}"
    override = {"select": limited["build"], "config-settings": limited.get("config-settings", "")}
    return options, [override]


def one_run(per_python: Mapping[str, str], abi3: Mapping[str, str]) -> tuple[dict[str, str], str] | None:
    """One cibuildwheel run for a variant's per-Python steps and its abi3 step, from the `CIBW_*`
    values a run of each would take: (the per-Python values with both selected, a config file's
    TOML text for `--config-file` whose override gives the abi3 identifier its config settings).
    A variable would win over the override, so `config-settings` moves into the file. None when
    the two runs differ in more than what they build and its config settings (two runs then)."""
    differ = {k for k in per_python.keys() | abi3.keys() if per_python.get(k) != abi3.get(k)}
    if not differ <= {"CIBW_BUILD", "CIBW_CONFIG_SETTINGS"} or "CIBW_BUILD" not in abi3:
        return None
    env = dict(per_python)
    env["CIBW_BUILD"] = f"{per_python.get('CIBW_BUILD', '')} {abi3['CIBW_BUILD']}".strip()
    settings = env.pop("CIBW_CONFIG_SETTINGS", "")
    options = {"config-settings": settings} if settings else {}
    override = {"select": abi3["CIBW_BUILD"], "config-settings": abi3.get("CIBW_CONFIG_SETTINGS", "")}
    return env, render(options, "toml", [override])


def render(options: Mapping[str, str], fmt: str, overrides: Sequence[Mapping[str, str]] = ()) -> str:
    """Text for `--format`: a `[tool.cibuildwheel]` table, `CIBW_*=value` lines, or JSON; the
    `overrides` (cibuildwheel's `[[tool.cibuildwheel.overrides]]`) exist in TOML and JSON only."""
    if overrides and fmt == "env":
        msg = (
            "the abi3 step and the per-Python steps need different config-settings, which CIBW_* "
            "variables cannot say: use --format toml (or json), or give --python for each group"
        )
        raise UsageError(msg)
    if fmt == "toml":
        table = tomlkit.table()
        for key, value in options.items():
            table[key] = value
        if overrides:
            array = tomlkit.aot()
            for override in overrides:
                array.append(tomlkit.item(dict(override)))
            table["overrides"] = array
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
        data: dict[str, object] = dict(options)
        if overrides:
            data["overrides"] = [dict(o) for o in overrides]
        return json.dumps(data, indent=2) + "\n"
    msg = f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})"
    raise UsageError(msg)


def _name(key: str) -> str:
    """An environment variable name, checked again where it meets cibuildwheel's parser."""
    if not _IDENTIFIER.fullmatch(key):
        msg = f"{key!r} is not an environment variable name: cibuildwheel would evaluate it"
        raise UsageError(msg)
    return key


def quote(value: str) -> str:
    """Quote a literal for cibuildwheel's `environment` parser (bashlex), the same for bash.

    bashlex does not keep single-quoted text opaque (a backtick, `${` or `$(` inside quotes trips
    it, `<(` even inside double quotes), so every character outside a plainly safe set is
    escaped with a backslash instead, and a newline, which a backslash would join, is the only
    one put in double quotes; a bare reserved word (`if`) is escaped too. Names are never
    quoted: the matrix admits identifiers only.
    """
    if not value:
        return "''"
    if value in _RESERVED:  # `if` alone is a syntax error to bashlex, which parses each value
        return "\\" + value
    return "".join(ch if _SAFE.fullmatch(ch) else '"\n"' if ch == "\n" else "\\" + ch for ch in value)
