"""`release toolchain`: install a backend's toolchain or a CPython, and check what a build needs.

`install rocm [VERSION]` runs the install script the toolkit ships (`scripts/install-rocm.sh` in
its source tree, `release/scripts_data/` once installed), so the command is the same in any
repository. `install python 3.12` gets an interpreter from uv, then pyenv, then the distribution's
packages, whichever answers. `check` prints what this machine has for the matrix: interpreters
with their headers, toolkits and build tools, each missing one with the command that installs it.
"""

from __future__ import annotations

import argparse
import shutil

from release import flags, table
from release.config.backends import load_backends
from release.config.checks import SUPPORTED_PYTHONS
from release.config.matrix import LoadedMatrix
from release.config.pythons import python
from release.config.resources import toolkit_backends, toolkit_scripts
from release.errors import ToolchainError, UsageError
from release.machine.install import install_backend, install_pythons, run_script, script_for
from release.machine.interpreters import interpreter
from release.machine.toolchain import find_toolchain, install_hint
from release.plan.steps import make_plan
from release.smoke.hostruntime import install_smoke_runtime

PYTHON = "python"


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
    flags.variant(
        install, "the toolchain of this matrix variant, at the toolkit version it declares (CI uses this)"
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
    flags.python(check, "only these Python versions (repeatable)", many=True)
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


def check(loaded: LoadedMatrix | None, pythons: list[str] | None, *, require: bool) -> int:
    versions = pythons or list(loaded.matrix.python if loaded else SUPPORTED_PYTHONS)
    backends = loaded.backends if loaded else load_backends(toolkit_backends())
    used = {v.backend for v in loaded.matrix.variants.values()} if loaded else set(backends)
    rows: list[tuple[str, str, str]] = []
    missing = 0
    for version in versions:
        found = interpreter(version)
        if not found.usable and python(version).free_threaded:  # never counted as missing
            rows.append((f"Python {version}", "github-only", "none here: GitHub builds it"))
            continue
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
