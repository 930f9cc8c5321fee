"""`release toolchain`: install a backend's toolchain or a CPython, and check what a build needs.

`install rocm [VERSION]` runs the install script the toolkit ships (`scripts/install-rocm.sh` in
its source tree, `release/scripts_data/` once installed), so the command is the same in any
repository. `install python 3.12` gets an interpreter from uv, then pyenv, then the distribution's
packages, whichever answers. `check` prints what this machine has for the matrix: interpreters
with their headers, toolkits and build tools, each missing one with the command that installs it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from release import table
from release.build.images import usable as local_image_usable
from release.build.interpreters import find_interpreter
from release.build.toolchain import container_engine, find_toolchain, install_hint, toolkit_scripts
from release.config.backends import load_backends
from release.config.checks import SUPPORTED_PYTHONS
from release.config.matrix import LoadedMatrix
from release.config.resources import toolkit_backends
from release.errors import ReleaseError, ToolchainError, UsageError
from release.plan.resolve import ResolvedImage, ResolvedVariant
from release.plan.steps import make_plan
from release.smoke.hostruntime import find_host_runtime, needs_host_runtime

PYTHON = "python"
INSTALL_TIMEOUT = 1800  # seconds: a toolkit from a vendor repository is a large download


@dataclass(frozen=True)
class Interpreter:
    """One CPython version as a build needs it: found, with headers, or why not and how to fix it."""

    version: str
    path: Path | None
    problem: str | None
    fix: str | None

    @property
    def usable(self) -> bool:
        return self.problem is None


def python_headers(exe: Path, version: str) -> Path:
    """Where an interpreter's `Python.h` lives: `<prefix>/include/pythonX.Y`, the same layout for
    distribution packages (`/usr`), pyenv, uv and cibuildwheel's /opt/python builds."""
    return exe.resolve().parent.parent / "include" / f"python{version}" / "Python.h"


def interpreter(version: str) -> Interpreter:
    """Find one CPython version and check that an extension can be compiled against it."""
    exe = find_interpreter(version)
    if exe is None:
        return Interpreter(
            version,
            None,
            f"no Python {version} found (PATH, pyenv's versions, /usr/bin, /usr/local/bin)",
            f"release toolchain install python {version}",
        )
    headers = python_headers(exe, version)
    if not headers.is_file():
        prefix = headers.parents[2]
        fix = f"apt-get install python{version}-dev" if prefix == Path("/usr") else f"reinstall {prefix}"
        return Interpreter(version, exe, f"Python {version} at {exe} has no headers ({headers} missing)", fix)
    return Interpreter(version, exe, None, None)


def missing_table(missing: list[Interpreter]) -> str:
    """The end-of-run table of interpreters a local build skipped, and how to get each."""
    rows = [(i.version, i.problem or "", i.fix or "") for i in missing]
    return table.render(("python", "skipped because", "get it with"), rows)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser))
    sub.required = True
    install = sub.add_parser(
        "install",
        help="install a backend's toolchain (rocm, cuda, musa) or CPython versions (python 3.12 ...)",
        description="install a backend's toolchain with the script the toolkit ships, or CPython "
        "versions from uv, pyenv or the distribution's packages",
    )
    install.add_argument("what", nargs="?", metavar="BACKEND|python", help="a backend name, or `python`")
    install.add_argument(
        "versions", nargs="*", metavar="VERSION", help="toolkit version (e.g. 6.4), or Python versions"
    )
    install.add_argument(
        "--variant",
        help="the toolchain of this matrix variant, at the toolkit version it declares (CI uses this)",
    )
    install.add_argument(
        "--runtime-only",
        action="store_true",
        help="only the runtime a wheel binds (the backend data's soname: libamdhip64.so.7 for ROCm 7.x "
        "and 10.x), no compiler: what a smoke runner needs",
    )
    install.add_argument(
        "--smoke-runtime",
        action="store_true",
        help="with --variant: the runtime its simulated smoke images lay out from this machine, only if "
        "one of them needs it and the declared one is not here (a smoke job runs this)",
    )
    check = sub.add_parser("check", help="what this machine has for the matrix, and how to get the rest")
    check.add_argument("--python", action="append", help="only these Python versions (repeatable)")
    check.add_argument("--require", action="store_true", help="exit 4 when anything is missing")
    free = sub.add_parser(
        "free-disk",
        help="on a CI runner: remove preinstalled SDKs no release job uses; free space before and after",
        description="remove the big SDKs GitHub's ubuntu runners preinstall (.NET, Android, Haskell, CodeQL, "
        "...) before large image pulls or toolkit installs; only on a CI runner unless --force",
    )
    free.add_argument("--dry-run", action="store_true", help="list what would be removed")
    free.add_argument("--docker-images", action="store_true", help="also remove the preloaded docker images")
    free.add_argument("--force", action="store_true", help="run outside CI too (deletes system directories)")
    path = sub.add_parser("path", help="print the path of a backend's install script")
    path.add_argument("backend")


def needs_matrix(args: argparse.Namespace) -> bool:
    return getattr(args, "variant", None) is not None


def run(args: argparse.Namespace, loaded: LoadedMatrix | None) -> int:
    if args.action == "path":
        print(script_for(args.backend))
        return 0
    if args.action == "free-disk":
        chosen = {"--dry-run": args.dry_run, "--docker-images": args.docker_images, "--force": args.force}
        flags = [flag for flag, on in chosen.items() if on]
        return run_script(toolkit_scripts() / "free-disk.sh", flags)
    if args.action == "install":
        if args.variant is not None:
            return install_variant(args, loaded)
        if args.what is None:
            msg = "toolchain install: name a backend (rocm, cuda, musa), `python`, or --variant"
            raise UsageError(msg)
        if args.what == PYTHON:
            if args.runtime_only:
                msg = "toolchain install python: --runtime-only is for a backend's runtime"
                raise UsageError(msg)
            return install_pythons(args.versions)
        if len(args.versions) > 1:
            msg = f"toolchain install {args.what}: one version at most (got {' '.join(args.versions)})"
            raise UsageError(msg)
        version = args.versions[0] if args.versions else None
        return install_backend(args.what, version, runtime_only=args.runtime_only)
    return check(loaded, args.python, require=args.require)


def script_for(backend: str) -> Path:
    script = toolkit_scripts() / f"install-{backend}.sh"
    if not script.is_file():
        known = sorted(p.name[len("install-") : -len(".sh")] for p in toolkit_scripts().glob("install-*.sh"))
        msg = f"no install script for {backend!r}: the toolkit ships {', '.join(known)} (and `python`)"
        raise UsageError(msg)
    return script


def install_variant(args: argparse.Namespace, loaded: LoadedMatrix | None) -> int:
    if args.what is not None or loaded is None:
        msg = "toolchain install --variant V takes no backend or version: the matrix declares both"
        raise UsageError(msg)
    variant = make_plan(loaded, variants=(args.variant,), include_held_back=True).variant(args.variant)
    backend = variant.backend
    if backend.toolkit is None:
        print(f"{args.variant}: the {backend.name} backend needs no toolkit")
        return 0
    if args.smoke_runtime:
        return install_smoke_runtime(variant)
    return install_backend(backend.name, variant.toolkit, runtime_only=args.runtime_only)


def install_smoke_runtime(variant: ResolvedVariant) -> int:
    """The declared runtime, where the variant's image simulations will need it from this host."""
    engine = container_engine() if any(i.made_here is not None for i in variant.images) else None

    def in_container(image: ResolvedImage) -> bool:
        """Smoke runs an image with a local recipe (or a stand-in for a registry image) in a real
        container, which brings its own runtime, where an engine answers and the image exists or
        root can make it."""
        local = image.made_here
        return engine is not None and local is not None and local_image_usable(engine, local)

    needing = ", ".join(i.name for i in variant.images if needs_host_runtime(i.image) and not in_container(i))
    if not needing:
        boxed = [i.name for i in variant.images if in_container(i)]
        where = f" ({', '.join(boxed)} run in {engine} containers)" if boxed else ""
        print(f"{variant.name}: no simulated image lays out the runtime from this machine{where}: "
              "nothing to do")  # fmt: skip
        return 0
    found = find_host_runtime(variant)
    if found.usable:
        print(f"{variant.name}: {', '.join(found.files)} already in {found.libdir} (for {needing})")
        return 0
    print(f"{variant.name}: {needing} lay out the {variant.backend.title} runtime from this machine")
    return install_backend(variant.backend_name, variant.toolkit, runtime_only=True)


def install_backend(backend: str, version: str | None, *, runtime_only: bool = False) -> int:
    flags = [*([version] if version else []), *(["--runtime-only"] if runtime_only else [])]
    return run_script(script_for(backend), flags)


def run_script(script: Path, args: list[str]) -> int:
    """Run one of the toolkit's bash scripts; its own error line is the message on failure."""
    bash = shutil.which("bash")
    if bash is None:
        msg = "bash not found on PATH: the toolchain install scripts are bash scripts"
        raise ToolchainError(msg)
    argv = [bash, str(script), *args]
    print(f"$ {' '.join(argv)}", flush=True)
    proc = subprocess.run(argv, check=False, timeout=INSTALL_TIMEOUT)
    if proc.returncode != 0:
        msg = f"{script.name} failed (exit {proc.returncode}); its own error is printed above"
        raise ToolchainError(msg)
    return 0


def _attempt(argv: list[str], timeout: float = INSTALL_TIMEOUT) -> str | None:
    """Run one installer; None on success, else its last line of output."""
    print(f"$ {' '.join(argv)}", flush=True)
    env = dict(os.environ)
    if os.access("/usr/local/bin", os.W_OK):
        env.setdefault("UV_PYTHON_BIN_DIR", "/usr/local/bin")  # where the toolkit finds interpreters
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if proc.returncode == 0:
        return None
    lines = [line.strip() for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else f"exit {proc.returncode}"


def _uv() -> str | None:
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.is_file() else shutil.which("uv")


def _apt_has(package: str) -> bool:
    if shutil.which("apt-cache") is None:
        return False
    proc = subprocess.run(["apt-cache", "show", package], capture_output=True, check=False)
    return proc.returncode == 0 and bool(proc.stdout.strip())


def _as_root(argv: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return argv
    sudo = shutil.which("sudo")
    return [sudo, *argv] if sudo else argv


def _pyenv() -> str | None:
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    exe = root / "bin" / "pyenv"
    return str(exe) if exe.is_file() else shutil.which("pyenv")


def _installers(version: str) -> list[tuple[str, list[str] | str]]:
    """(name, argv) of each way to get CPython `version` here, or (name, why it is not available)."""
    ways: list[tuple[str, list[str] | str]] = []
    uv = _uv()
    ways.append(("uv", [uv, "python", "install", version] if uv else "not installed (`pip install uv`)"))
    pyenv = _pyenv()
    ways.append(("pyenv", [pyenv, "install", "--skip-existing", version] if pyenv else "not installed"))
    packages = [f"python{version}-dev", f"python{version}-venv"]
    apt = _as_root(["apt-get", "install", "-y", "-q", *packages]) if _apt_has(f"python{version}") else None
    ways.append(("apt", apt or f"no python{version} package in this distribution's archive"))
    return ways


def install_python(version: str) -> Path:
    """Make CPython `version` findable: uv, then pyenv, then apt; one line naming every attempt.

    uv and pyenv download (uv from github.com, pyenv from python.org); where neither is reachable
    the distribution's packages are the last resort (Debian 12 carries 3.11 only)."""
    if not re.fullmatch(r"3\.\d+", version):
        msg = f"toolchain install python {version}: give a version like 3.12"
        raise UsageError(msg)
    tried: list[str] = []
    for name, way in _installers(version):
        if isinstance(way, str):
            tried.append(f"{name}: {way}")
            continue
        failed = _attempt(way)
        found = find_interpreter(version)
        if found is not None:
            return found
        tried.append(f"{name}: {failed or 'installed, but not where the toolkit looks'}")
    msg = f"no Python {version} could be installed: " + "; ".join(tried)
    raise ToolchainError(msg)


def install_pythons(versions: list[str]) -> int:
    if not versions:
        msg = "toolchain install python: name the versions, e.g. `release toolchain install python 3.12`"
        raise UsageError(msg)
    failures: list[str] = []
    for version in versions:
        found = find_interpreter(version)
        if found is not None:
            print(f"Python {version}: already at {found}")
            continue
        try:
            print(f"Python {version}: installed at {install_python(version)}")
        except ReleaseError as exc:
            failures.append(str(exc))
    if failures:
        raise ToolchainError("\n".join(failures))
    return 0


def check(loaded: LoadedMatrix | None, pythons: list[str] | None, *, require: bool) -> int:
    versions = pythons or list(loaded.matrix.python if loaded else SUPPORTED_PYTHONS)
    backends = loaded.backends if loaded else load_backends(toolkit_backends())
    used = {v.backend for v in loaded.matrix.variants.values()} if loaded else set(backends)
    rows: list[tuple[str, str, str]] = []
    missing = 0
    for version in versions:
        found = interpreter(version)
        missing += not found.usable
        where = str(found.path) if found.usable else f"{found.problem}: `{found.fix}`"
        rows.append((f"Python {version}", "ok" if found.usable else "MISSING", where))
    for name in sorted(used):
        backend = backends[name]
        if backend.toolkit is None:
            continue
        try:
            rows.append((f"{name} toolkit", "ok", find_toolchain(backend).describe()))
        except ToolchainError:
            missing += 1
            rows.append((f"{name} toolkit", "MISSING", f"`{install_hint(backend)}`"))
    for tool, fix, required in (
        ("git", "apt-get install git", False),
        ("cc", "apt-get install build-essential", True),
        ("cmake", "apt-get install cmake (or pip install cmake)", True),
        ("ninja", "apt-get install ninja-build (optional: faster builds)", False),
        ("ccache", "apt-get install ccache (optional: faster rebuilds)", False),
    ):
        path = shutil.which(tool)
        missing += required and path is None
        status = "ok" if path else ("MISSING" if required else "absent")
        rows.append((tool, status, path or f"`{fix}`"))
    print(table.render(("what", "status", "where, or how to get it"), rows))
    if missing and require:
        msg = f"{missing} thing(s) missing for this matrix (listed above)"
        raise ToolchainError(msg)
    return 0
