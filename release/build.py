"""Build: stage the variant, compile its core once, build one wheel per Python, repair, verify.

`python -m release build --variant rocm [--python 3.12 ...]` writes repaired wheels to
`wheelhouse/<variant>/`, each with `<wheel>.verify.json` beside it, and ends with a summary
table. Work files live under `build/<variant>/`; builder environments under `build/venvs/`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from packaging.utils import parse_wheel_filename

from release import table
from release.errors import BuildError, ReleaseError, ToolchainError, UsageError, VerifyError
from release.interpreters import require_interpreter
from release.matrix import LoadedMatrix
from release.plan import BuildStep, build_steps, select
from release.repair import RepairResult, repair_wheel
from release.stage import check_wheel_identity, stage_project
from release.toolchain import Toolchain, container_engine, find_toolchain, require_tool
from release.verify import verify_wheel, write_report
from release.version import build_version

SKBUILD_BACKEND = "scikit_build_core.build"
_print_lock = threading.Lock()


def say(message: str) -> None:
    with _print_lock:
        print(message, flush=True)


@dataclass(frozen=True)
class WheelResult:
    """One built, repaired and verified wheel."""

    step: BuildStep
    wheel: Path
    size: int
    platform: str
    floor_met: bool
    runtime_bound: tuple[str, ...]
    verify_ok: bool
    verify_summary: str
    seconds: float


@dataclass(frozen=True)
class BuildContext:
    loaded: LoadedMatrix
    variant: str
    version: str
    staged: Path
    work: Path
    env: Mapping[str, str]
    prefix: Path | None
    toolchain: Toolchain
    scikit_build: bool
    """The project builds with scikit-build-core (read once from the staged pyproject.toml)."""


def source_date_epoch(root: Path) -> str:
    """`SOURCE_DATE_EPOCH` as set, else the last commit's time, so rebuilds are byte-identical."""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return os.environ["SOURCE_DATE_EPOCH"]
    proc = subprocess.run(
        ["git", "-C", str(root), "log", "-1", "--format=%ct"], capture_output=True, text=True, check=False
    )
    stamp = proc.stdout.strip()
    return stamp if proc.returncode == 0 and stamp.isdigit() else "315532800"  # 1980-01-01


def _run_logged(cmd: list[str], *, log: Path, env: Mapping[str, str], cwd: Path | None = None) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=dict(env), cwd=cwd, check=False)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-25:])
        msg = f"`{' '.join(cmd[:4])} …` failed (exit {proc.returncode}); last lines of {log}:\n{tail}"
        raise BuildError(msg)


def _build_env(
    ctx_env: Mapping[str, str], toolchain: Toolchain, extra: Mapping[str, str], epoch: str
) -> dict[str, str]:
    env = {**os.environ, **toolchain.env, **extra, "SOURCE_DATE_EPOCH": epoch}
    env.pop("PYTHONPATH", None)
    if shutil.which("ccache"):
        env.setdefault("CMAKE_C_COMPILER_LAUNCHER", "ccache")
        env.setdefault("CMAKE_CXX_COMPILER_LAUNCHER", "ccache")
        env.setdefault("CC", "ccache cc")
        env.setdefault("CXX", "ccache c++")
    env.update(ctx_env)
    return env


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


# Environment variables that change what a compiler produces.
_COMPILER_ENV = (
    "CC",
    "CXX",
    "CFLAGS",
    "CXXFLAGS",
    "LDFLAGS",
    "CPPFLAGS",
    "CMAKE_ARGS",
    "CMAKE_GENERATOR",
    "CMAKE_C_COMPILER_LAUNCHER",
    "CMAKE_CXX_COMPILER_LAUNCHER",
)


def configuration_key(
    loaded: LoadedMatrix, variant_name: str, toolchain: Toolchain, env: Mapping[str, str]
) -> str:
    """What every compilation of a variant depends on besides its sources: the toolkit found,
    the CMake variables and the compiler environment. A change invalidates cached builds."""
    variant = loaded.variant(variant_name)
    cmake = subprocess.run(["cmake", "--version"], capture_output=True, text=True, check=False).stdout
    parts = {
        "toolchain": [str(toolchain.prefix), toolchain.version, sorted(toolchain.env.items())],
        "defines": sorted(variant.cmake_defines.items()),
        "config_settings": sorted(variant.config_settings.items()),
        "env": [(k, env.get(k, "")) for k in _COMPILER_ENV],
        "generator": bool(shutil.which("ninja")),
        "cmake": cmake.splitlines()[:1],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def forget_stale_builds(work: Path, key: str) -> None:
    """Drop CMake build trees made under another configuration: a CMake cache keeps a removed
    define or an old toolkit's library paths."""
    stamp = work / ".release-configuration"
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == key:
        return
    for tree in [work / "core-build", work / "core-prefix", *work.glob("build-cp*")]:
        shutil.rmtree(tree, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    stamp.write_text(key, encoding="utf-8")


def prebuild_core(
    loaded: LoadedMatrix,
    variant_name: str,
    *,
    staged: Path,
    work: Path,
    version: str,
    env: Mapping[str, str],
    configuration: str = "",
) -> Path | None:
    """Compile and install the engine core once for this variant (cached by its inputs)."""
    prebuild = loaded.matrix.engine.prebuild
    if prebuild is None:
        return None
    require_tool("cmake", "install CMake >= 3.18 (apt install cmake, or pip install cmake)")
    variant = loaded.variant(variant_name)
    source = staged / prebuild.cmake_source
    args = [a.replace("{version}", version) for a in prebuild.cmake_args]
    defines = [f"-D{k}={v}" for k, v in sorted(variant.cmake_defines.items())]
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    prefix = work / "core-prefix"
    key = hashlib.sha256(
        json.dumps([_tree_digest(source), args, defines, configuration]).encode()
    ).hexdigest()
    stamp = prefix / ".release-prebuild"
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == key:
        say(f"[{variant_name}] core: up to date in {prefix}")
        return prefix
    started = time.monotonic()
    say(f"[{variant_name}] core: compiling once for every Python ({' '.join(defines)})")
    core = work / "core-build"
    log = work / "logs" / "core.log"
    log.unlink(missing_ok=True)
    shutil.rmtree(prefix, ignore_errors=True)
    shutil.rmtree(core, ignore_errors=True)  # a CMake cache would keep what the key says changed
    _run_logged(
        [
            "cmake",
            "-S",
            str(source),
            "-B",
            str(core),
            *generator,
            "-DCMAKE_BUILD_TYPE=Release",
            *defines,
            *args,
        ],
        log=log,
        env=env,
    )
    _run_logged(["cmake", "--build", str(core), "--parallel", str(os.cpu_count() or 1)], log=log, env=env)
    _run_logged(["cmake", "--install", str(core), "--prefix", str(prefix)], log=log, env=env)
    stamp.write_text(key, encoding="utf-8")
    say(f"[{variant_name}] core: installed to {prefix} ({time.monotonic() - started:.1f} s)")
    return prefix


def _pyproject(project: Path) -> dict[str, Any]:
    data: dict[str, Any] = tomlkit.parse((project / "pyproject.toml").read_text(encoding="utf-8")).unwrap()
    return data


def builder_python(python: str, staged: Path, venvs: Path, env: Mapping[str, str]) -> Path:
    """A cached venv for one Python with `build` and the project's build requirements."""
    interpreter = require_interpreter(python)
    pyproject = _pyproject(staged)
    requires = sorted(pyproject.get("build-system", {}).get("requires", ["setuptools", "wheel"]))
    wanted = ["build>=1.2.1", *requires]
    # A different interpreter (a new patch release, another install) needs a new environment.
    identity = [str(interpreter.resolve()), *wanted]
    venv = venvs / f"cp{python.replace('.', '')}"
    stamp = venv / ".release-requirements"
    exe = venv / "bin" / "python"
    if exe.exists() and stamp.is_file() and stamp.read_text(encoding="utf-8") == json.dumps(identity):
        return exe
    shutil.rmtree(venv, ignore_errors=True)
    log = venvs / f"cp{python.replace('.', '')}.log"
    log.unlink(missing_ok=True)
    _run_logged([str(interpreter), "-m", "venv", str(venv)], log=log, env=env)
    _run_logged(
        [str(exe), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *wanted],
        log=log,
        env=env,
    )
    stamp.write_text(json.dumps(identity), encoding="utf-8")
    return exe


def cmake_defines(ctx: BuildContext) -> dict[str, str]:
    """The variant's CMake cache variables, plus where the prebuilt core is installed."""
    defines = dict(sorted(ctx.loaded.variant(ctx.variant).cmake_defines.items()))
    prebuild = ctx.loaded.matrix.engine.prebuild
    if ctx.prefix is not None and prebuild is not None:
        defines[prebuild.prefix_define] = str(ctx.prefix)
    return defines


def uses_scikit_build(project: Path) -> bool:
    return bool(_pyproject(project).get("build-system", {}).get("build-backend") == SKBUILD_BACKEND)


def config_settings(ctx: BuildContext, step: BuildStep) -> list[str]:
    """PEP 517 config settings; CMake variables travel as scikit-build-core's `cmake.define.*`."""
    settings: dict[str, str] = {}
    if ctx.scikit_build:
        settings["build-dir"] = str(ctx.work / f"build-{step.python_tag}")
        settings.update({f"cmake.define.{k}": v for k, v in cmake_defines(ctx).items()})
    settings.update(ctx.loaded.variant(ctx.variant).config_settings)
    return [f"-C{key}={value}" for key, value in settings.items()]


def cmake_args_env(ctx: BuildContext, env: Mapping[str, str]) -> dict[str, str]:
    """For other backends (setuptools or meson driving CMake), the CMake variables go in
    `CMAKE_ARGS`, the variable such builds conventionally read."""
    defines = cmake_defines(ctx)
    if ctx.scikit_build or not defines:
        return {}
    args = " ".join(shlex.quote(f"-D{k}={v}") for k, v in defines.items())
    return {"CMAKE_ARGS": f"{env.get('CMAKE_ARGS', '')} {args}".strip()}


def project_for(ctx: BuildContext, step: BuildStep) -> Path:
    """The tree one Python builds from. scikit-build-core keeps its output in a per-Python
    `build-dir`; other backends (setuptools' build/ and *.egg-info) write into the project, so
    each Python gets its own copy and parallel builds cannot trample each other."""
    if ctx.scikit_build:
        return ctx.staged
    private = ctx.work / f"src-{step.python_tag}"
    shutil.rmtree(private, ignore_errors=True)
    shutil.copytree(ctx.staged, private, symlinks=True)
    return private


def build_one(ctx: BuildContext, step: BuildStep, wheelhouse: Path, index: str) -> WheelResult:
    started = time.monotonic()
    variant = ctx.loaded.variant(ctx.variant)
    exe = builder_python(step.python, ctx.staged, ctx.work.parent / "venvs", ctx.env)
    dist = ctx.work / "dist" / step.python_tag
    shutil.rmtree(dist, ignore_errors=True)
    log = ctx.work / "logs" / f"{step.identifier}.log"
    log.unlink(missing_ok=True)
    env = dict(ctx.env)
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = env.get("CMAKE_BUILD_PARALLEL_LEVEL", "1")
    env.update(cmake_args_env(ctx, env))
    say(f"{index} {step.identifier}: building {variant.distribution} {ctx.version} for Python {step.python}")
    _run_logged(
        [
            str(exe),
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(dist),
            *config_settings(ctx, step),
            str(project_for(ctx, step)),
        ],
        log=log,
        env=env,
    )
    built = sorted(dist.glob("*.whl"))
    if len(built) != 1:
        msg = f"{step.identifier}: the build produced {len(built)} wheels in {dist}, expected one"
        raise BuildError(msg)
    check_wheel_identity(built[0], distribution=variant.distribution, version=ctx.version)
    say(f"{index} {step.identifier}: repairing (runtime excluded: {', '.join(variant.exclude) or 'none'})")
    repaired = repair_wheel(
        built[0],
        loaded=ctx.loaded,
        variant_name=ctx.variant,
        dest_dir=wheelhouse,
        source_date_epoch=ctx.env["SOURCE_DATE_EPOCH"],
    )
    check_wheel_identity(repaired.wheel, distribution=variant.distribution, version=ctx.version)
    return _verify(ctx, step, repaired, started, index)


def _verify(
    ctx: BuildContext, step: BuildStep, repaired: RepairResult, started: float, index: str
) -> WheelResult:
    report = verify_wheel(repaired.wheel, loaded=ctx.loaded, variant=ctx.variant, release=False)
    write_report(report, repaired.wheel.with_name(repaired.wheel.name + ".verify.json"))
    failed = [r.id for r in report.rules if r.status == "fail"]
    warned = [r.id for r in report.rules if r.status == "warn"]
    summary = (
        "FAIL " + ",".join(failed)
        if failed
        else ("pass" + (f" (warn: {','.join(warned)})" if warned else ""))
    )
    seconds = time.monotonic() - started
    say(f"{index} {step.identifier}: {repaired.wheel.name} verify {summary} ({seconds:.1f} s)")
    return WheelResult(
        step=step,
        wheel=repaired.wheel,
        size=repaired.wheel.stat().st_size,
        platform=repaired.platform,
        floor_met=repaired.floor_met,
        runtime_bound=tuple(report.runtime_bound),
        verify_ok=report.ok,
        verify_summary=summary,
        seconds=seconds,
    )


def build_variant(
    loaded: LoadedMatrix,
    variant_name: str,
    steps: tuple[BuildStep, ...],
    *,
    wheelhouse: Path,
    version: str,
    jobs: int,
    work_root: Path | None = None,
    on_done: Callable[[WheelResult], None] | None = None,
) -> list[WheelResult]:
    variant = loaded.variant(variant_name)
    toolchain = find_toolchain(loaded.backend(variant))
    say(f"[{variant_name}] {toolchain.describe()}")
    if variant.toolkit and toolchain.version and not toolchain.version.startswith(variant.toolkit):
        say(
            f"[{variant_name}] note: the matrix builds releases with toolkit {variant.toolkit}; "
            f"this host has {toolchain.version}, so this local wheel binds that runtime's sonames"
        )
    work = (work_root or loaded.root / "build") / variant_name
    epoch = source_date_epoch(loaded.root)
    env = _build_env(variant.env, toolchain, {}, epoch)
    staged = stage_project(loaded, variant_name, version, work / "src")
    say(
        f"[{variant_name}] staged {loaded.matrix.engine.source}/ as "
        f"{variant.distribution} {version} in {staged}"
    )
    configuration = configuration_key(loaded, variant_name, toolchain, env)
    forget_stale_builds(work, configuration)
    prefix = prebuild_core(
        loaded, variant_name, staged=staged, work=work, version=version, env=env, configuration=configuration
    )
    ctx = BuildContext(
        loaded=loaded,
        variant=variant_name,
        version=version,
        staged=staged,
        work=work,
        env=env,
        prefix=prefix,
        toolchain=toolchain,
        scikit_build=uses_scikit_build(staged),
    )
    wheelhouse.mkdir(parents=True, exist_ok=True)
    remove_previous_wheels(wheelhouse, {s.python_tag for s in steps})
    # Build the per-Python wheels once each Python's builder env exists; CPU-bound, so
    # at most `jobs` at a time.
    results: list[WheelResult] = []
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(steps)))) as pool:
        futures = [
            pool.submit(build_one, ctx, step, wheelhouse, f"[{i}/{len(steps)}]")
            for i, step in enumerate(steps, 1)
        ]
        errors: list[ReleaseError] = []
        for future in futures:
            try:
                result = future.result()
            except ReleaseError as exc:
                errors.append(exc)
                continue
            except (OSError, subprocess.SubprocessError) as exc:
                errors.append(BuildError(f"{type(exc).__name__}: {exc}"))
                continue
            results.append(result)
            if on_done:
                on_done(result)
        if errors:
            raise BuildError("\n".join(str(e) for e in errors))
    return results


def remove_previous_wheels(wheelhouse: Path, python_tags: set[str]) -> None:
    """Remove earlier wheels (and reports) for the Pythons about to be built; other files stay."""
    for old in wheelhouse.glob("*.whl"):
        try:
            _name, _version, _build, tags = parse_wheel_filename(old.name)
        except ValueError:
            continue
        if {t.interpreter for t in tags} & python_tags:
            old.unlink()
            Path(f"{old}.verify.json").unlink(missing_ok=True)


def _size(size: int) -> str:
    return f"{size / 1e6:.2f} MB" if size >= 1e6 else f"{size / 1e3:.1f} KB"


def summary(results: list[WheelResult]) -> str:
    rows = [
        (
            r.wheel.name,
            _size(r.size),
            r.platform,
            ", ".join(r.runtime_bound) or "-",
            r.verify_summary,
            f"{r.seconds:.1f}",
        )
        for r in results
    ]
    return table.render(("wheel", "size", "tag", "runtime bound", "verify", "seconds"), rows)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variant", required=True, help="variant from the matrix (cpu, cuda, rocm, musa)")
    parser.add_argument(
        "--python",
        action="append",
        default=None,
        help="Python version to build for (repeatable; default: all in the matrix)",
    )
    parser.add_argument("--select", help="identifier patterns, e.g. 'cp31{2,3}-rocm-*'")
    parser.add_argument(
        "--wheelhouse", type=Path, help="output root (default: wheelhouse/ beside the matrix)"
    )
    parser.add_argument("--tag", help="release tag (e.g. v0.3.13); sets the version of every wheel")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="wheels built at once")
    parser.add_argument(
        "--container",
        action="store_true",
        help="build through cibuildwheel in the manylinux_2_28 image (needs docker or podman)",
    )


def run(args: argparse.Namespace, loaded: LoadedMatrix | None) -> int:
    if loaded is None:
        msg = "build needs a matrix file (--matrix)"
        raise UsageError(msg)
    variant = loaded.variant(args.variant)
    steps = tuple(s for s in build_steps(loaded.matrix) if s.variant == args.variant)
    if args.python:
        unknown = [p for p in args.python if p not in loaded.matrix.python]
        if unknown:
            known = ", ".join(loaded.matrix.python)
            msg = f"Python {', '.join(unknown)} is not in the matrix (python: {known})"
            raise UsageError(msg)
        steps = tuple(s for s in steps if s.python in args.python)
    steps = select(steps, args.select)
    version = build_version(loaded, args.tag)
    wheelhouse = (args.wheelhouse or loaded.root / "wheelhouse") / args.variant
    if args.container:
        engine = container_engine()
        if engine is None:
            msg = (
                "--container needs a running docker or podman; none answers here. Without it, drop "
                "--container to build on the host (the summary says which tag the host allows)"
            )
            raise ToolchainError(msg)
        from release.container import run_cibuildwheel  # noqa: PLC0415 (imports this module)

        return run_cibuildwheel(
            loaded, args.variant, steps, wheelhouse=wheelhouse, version=version, engine=engine
        )
    find_toolchain(loaded.backend(variant))  # a missing toolkit stops here, in one line
    say(
        f"building {len(steps)} wheel(s) of {variant.distribution} {version} on the host "
        f"(no container: the platform tag is the best this host allows)"
    )
    started = time.monotonic()
    results = build_variant(
        loaded, args.variant, steps, wheelhouse=wheelhouse, version=version, jobs=args.jobs
    )
    results.sort(key=lambda r: r.step.identifier)
    print()
    print(summary(results))
    floor_missed = [r for r in results if not r.floor_met]
    if floor_missed:
        print(
            f"\nnote: this host allows {floor_missed[0].platform}, not the matrix floor "
            f"{loaded.matrix.platform.floor}: valid local wheels, not release wheels"
        )
    print(f"\n{len(results)} wheel(s) in {wheelhouse} ({time.monotonic() - started:.1f} s)")
    bad = [r for r in results if not r.verify_ok]
    if bad:
        msg = f"{len(bad)} wheel(s) failed verification: " + ", ".join(r.wheel.name for r in bad)
        raise VerifyError(msg)
    return 0
