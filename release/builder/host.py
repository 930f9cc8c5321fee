"""Host builds: stage the variant, compile its core once, build one wheel per Python, repair, verify.

`release build --variant rocm [--python 3.12 ...]` writes repaired wheels to `wheelhouse/<variant>/`,
each with `<wheel>.verify.json` beside it. Work files live under `build/<variant>/`; builder
environments under `build/venvs/`. Every function takes build steps, which carry the resolved
variant: nothing here reads the matrix.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from release import table
from release.builder.prebuild import (
    build_env,
    builder_python,
    configuration_key,
    forget_stale_builds,
    prebuild_core,
    run_logged,
    say,
    source_date_epoch,
)
from release.builder.repair import RepairResult, repair_wheel
from release.builder.reuse import (
    build_waves,
    read_stats_log,
    remember,
    tree_digest,
    up_to_date,
    wheel_key,
)
from release.builder.stage import check_wheel_identity, stage_project
from release.builder.sysdeps import require_system_packages
from release.errors import BuildError, ReleaseError, os_error_line
from release.inspect.verify import verify_wheel, write_report
from release.machine.lock import DEFAULT_WAIT_S, build_lock
from release.machine.toolchain import Toolchain, find_toolchain
from release.plan.resolve import ResolvedVariant
from release.plan.steps import BuildStep
from release.wheel import files
from release.wheel.names import InvalidWheelName, parse_wheel_name, platform_field, report_path


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
    cache: str = "-"
    """ccache hits of this wheel's compiler calls ('3/40 (8%)'), or 'up to date' when reused."""
    built_in: str = "host"
    """Where the wheel was compiled: `host`, or the container image's reference."""
    compiler: str = "-"
    """The compilers its ELF files record (`GCC 14.4.0`), from the verify report."""
    glibc: str = "-"
    """The newest glibc its ELF files need (`2.39`), from the verify report."""


@dataclass(frozen=True)
class BuildContext:
    variant: ResolvedVariant
    version: str
    staged: Path
    work: Path
    env: dict[str, str]
    prefix: Path | None
    toolchain: Toolchain
    toolkit_override: str | None = None
    source_digest: str = ""
    configuration: str = ""
    """Set when the toolkit is not the declared one (--allow-toolkit-mismatch); verify records it."""


def one_variant(steps: tuple[BuildStep, ...]) -> ResolvedVariant:
    """The variant a set of build steps belongs to (one build runs one variant)."""
    if not steps:
        msg = "no build steps selected"
        raise BuildError(msg)
    variants = {s.variant.name for s in steps}
    if len(variants) != 1:
        msg = f"one variant per build, got {', '.join(sorted(variants))}"
        raise BuildError(msg)
    return steps[0].variant


def pep517_invocation(ctx: BuildContext, step: BuildStep) -> tuple[list[str], dict[str, str]]:
    """(`-C` config settings, environment additions) for one wheel: the variant's translated build
    settings, the prebuilt core's prefix, and scikit-build-core's per-Python build directory."""
    prebuild = ctx.variant.prebuild
    extra = {prebuild.prefix_define: str(ctx.prefix)} if ctx.prefix is not None and prebuild else {}
    pairs, env = ctx.variant.build.translate(extra)
    if step.abi3:
        pairs += ctx.variant.build.limited_api(step.python_tag)
    if "CMAKE_ARGS" in env and ctx.env.get("CMAKE_ARGS") and "CMAKE_ARGS" not in ctx.variant.build.env:
        env["CMAKE_ARGS"] = f"{ctx.env['CMAKE_ARGS']} {env['CMAKE_ARGS']}"
    settings = [f"-C{k}={v}" for k, v in pairs]
    if ctx.variant.build.backend == "scikit-build-core":
        settings.insert(0, f"-Cbuild-dir={ctx.work / f'build-{step.python_tag}'}")
    return settings, env


def project_for(ctx: BuildContext, step: BuildStep) -> Path:
    """The tree one Python builds from. scikit-build-core keeps its output in a per-Python
    `build-dir`; other backends (setuptools' build/ and *.egg-info) write into the project, so
    each Python gets its own copy and parallel builds cannot trample each other."""
    if ctx.variant.build.backend == "scikit-build-core":
        return ctx.staged
    private = ctx.work / f"src-{step.python_tag}"
    shutil.rmtree(private, ignore_errors=True)
    shutil.copytree(ctx.staged, private, symlinks=True)
    return private


def _key(ctx: BuildContext, step: BuildStep, exe: Path) -> str:
    """Everything one wheel depends on: sources, settings, interpreter, toolkit, repair inputs."""
    settings, env = pep517_invocation(ctx, step)
    return wheel_key(
        {
            "source": ctx.source_digest,
            "prefix": tree_digest(ctx.prefix) if ctx.prefix is not None else None,
            "settings": settings,
            "env": sorted(env.items()),
            "python": str(exe.resolve()),
            "version": ctx.version,
            "configuration": ctx.configuration,
            "repair": [step.variant.floor, *step.variant.excludes],
            "override": ctx.toolkit_override,
        }
    )


def reuse_or_build(
    ctx: BuildContext, step: BuildStep, wheelhouse: Path, index: str, parallel: int = 1
) -> WheelResult:
    """The wheel from the last build when nothing it depends on changed; else a new build with
    `parallel` compile jobs."""
    started = time.monotonic()
    exe = builder_python(step.python, ctx.staged, ctx.work.parent / "venvs", ctx.env)
    key = _key(ctx, step, exe)
    stamp = ctx.work / "stamps" / f"{step.identifier}.json"
    previous = up_to_date(stamp, key, wheelhouse)
    report = _previous_report(previous) if previous is not None else None
    if previous is not None and report is None:
        say(f"{index} {step.identifier}: the report beside {previous.name} is damaged: rebuilding")
    if previous is not None and report is not None:
        failed = [str(r.get("id")) for r in report.get("rules", []) if r.get("status") == "fail"]
        warned = [str(r.get("id")) for r in report.get("rules", []) if r.get("status") == "warn"]
        seconds = time.monotonic() - started
        say(f"{index} {step.identifier}: up to date, nothing changed ({previous.name}, {seconds:.1f} s)")
        return WheelResult(
            step=step,
            wheel=previous,
            size=previous.stat().st_size,
            platform=platform_field(previous),
            floor_met=platform_field(previous) == step.variant.floor,
            runtime_bound=tuple(str(r) for r in report.get("runtime_bound", ())),
            verify_ok=not failed,
            verify_summary=verify_summary(failed, warned),
            seconds=seconds,
            cache="up to date",
            compiler=compiler_summary(tuple(str(c) for c in report.get("compilers", ()))),
            glibc=str(report.get("glibc_needed") or "-"),
        )
    remove_previous_wheels(wheelhouse, {step.python_tag})
    result = build_one(ctx, step, wheelhouse, index=index, exe=exe, parallel=parallel)
    remember(stamp, key, result.wheel, wheelhouse)
    return result


REPORT_LIMIT = 16 << 20
"""The largest verify report read beside a wheel that is up to date."""


def _previous_report(wheel: Path) -> dict[str, Any] | None:
    """The verify report beside an up-to-date wheel, when it is a JSON object whose lists are
    lists; None when it is missing, damaged, not regular, too large or nested too deeply."""
    try:
        report = files.read_json(report_path(wheel), REPORT_LIMIT)
    except (OSError, ValueError):
        return None
    if not isinstance(report, dict):
        return None
    lists = ("rules", "runtime_bound", "compilers")
    if any(not isinstance(report.get(k, []), list) for k in lists):
        return None
    if not all(isinstance(r, dict) for r in report.get("rules", [])):
        return None
    return report


def build_one(
    ctx: BuildContext, step: BuildStep, wheelhouse: Path, *, index: str, exe: Path, parallel: int = 1
) -> WheelResult:
    """Build, repair and verify one wheel with the builder interpreter `exe`, `parallel` compile
    jobs at a time (CMAKE_BUILD_PARALLEL_LEVEL, unless the environment sets it)."""
    started = time.monotonic()
    variant = step.variant
    dist = ctx.work / "dist" / step.python_tag
    shutil.rmtree(dist, ignore_errors=True)
    log = ctx.work / "logs" / f"{step.identifier}.log"
    log.unlink(missing_ok=True)
    settings, extra_env = pep517_invocation(ctx, step)
    env = {**ctx.env, **extra_env}
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = env.get("CMAKE_BUILD_PARALLEL_LEVEL", str(parallel))
    env["PATH"] = venv_first_path(exe, env.get("PATH", ""))
    stats_log = ctx.work / "logs" / f"{step.identifier}.ccache"
    stats_log.unlink(missing_ok=True)
    env["CCACHE_STATSLOG"] = str(stats_log)
    say(f"{index} {step.identifier}: building {variant.distribution} {ctx.version} for Python {step.python}")
    cmd = [str(exe), "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), *settings]
    run_logged([*cmd, str(project_for(ctx, step))], log=log, env=env)
    built = sorted(dist.glob("*.whl"))
    if len(built) != 1:
        msg = f"{step.identifier}: the build produced {len(built)} wheels in {dist}, expected one"
        raise BuildError(msg)
    check_wheel_identity(built[0], distribution=variant.distribution, version=ctx.version)
    say(f"{index} {step.identifier}: repairing (excluded: {', '.join(variant.excludes) or 'none'})")
    repaired = repair_wheel(
        built[0],
        floor=variant.floor,
        excludes=variant.excludes,
        dest_dir=wheelhouse,
        source_date_epoch=ctx.env["SOURCE_DATE_EPOCH"],
    )
    check_wheel_identity(repaired.wheel, distribution=variant.distribution, version=ctx.version)
    stats = read_stats_log(stats_log)
    return _verify(ctx, step, repaired, started=started, index=index, cache=stats.text if stats else "-")


def venv_first_path(exe: Path, path: str) -> str:
    """`PATH` with the build venv's `bin/` first, as build isolation has it: the meson, ninja,
    cmake and pybind11-config its build requirements installed are the ones the build finds."""
    bindir = str(exe.parent)
    return os.pathsep.join([bindir, *(p for p in path.split(os.pathsep) if p and p != bindir)])


def compiler_summary(compilers: tuple[str, ...]) -> str:
    """The compilers a verify report found, short: `GCC: (Debian 14.4.0-3) 14.4.0` -> `GCC 14.4.0`."""
    short = []
    for text in compilers:
        match = re.match(r"^GCC: \([^)]*\) (\d+(?:\.\d+)*)", text, re.ASCII)
        name = f"GCC {match.group(1)}" if match else text
        if name not in short:
            short.append(name)
    return ", ".join(short) or "-"


def verify_summary(failed: list[str], warned: list[str]) -> str:
    if failed:
        return "FAIL " + ",".join(failed)
    return "pass" + (f" (warn: {','.join(warned)})" if warned else "")


def _verify(
    ctx: BuildContext, step: BuildStep, repaired: RepairResult, *, started: float, index: str, cache: str
) -> WheelResult:
    report = verify_wheel(
        repaired.wheel, variant=step.variant, release=False, toolkit_override=ctx.toolkit_override
    )
    write_report(report, report_path(repaired.wheel))
    failed = [r.id for r in report.rules if r.status == "fail"]
    warned = [r.id for r in report.rules if r.status == "warn"]
    summary_text = verify_summary(failed, warned)
    seconds = time.monotonic() - started
    say(f"{index} {step.identifier}: {repaired.wheel.name} verify {summary_text} ({seconds:.1f} s)")
    return WheelResult(
        step=step,
        wheel=repaired.wheel,
        size=repaired.wheel.stat().st_size,
        platform=repaired.platform,
        floor_met=repaired.floor_met,
        runtime_bound=tuple(report.runtime_bound),
        verify_ok=report.ok,
        verify_summary=summary_text,
        seconds=seconds,
        cache=cache,
        compiler=compiler_summary(report.compilers),
        glibc=report.glibc_needed or "-",
    )


def build_variant(
    steps: tuple[BuildStep, ...],
    *,
    wheelhouse: Path,
    version: str,
    jobs: int,
    work_root: Path | None = None,
    on_done: Callable[[WheelResult], None] | None = None,
    toolkit_override: str | None = None,
    lock_wait_s: float = DEFAULT_WAIT_S,
) -> list[WheelResult]:
    """Build, repair and verify the wheels of one variant's steps on this host, holding the
    variant's build lock (a second build waits up to `lock_wait_s` for it)."""
    variant = one_variant(steps)
    toolchain = find_toolchain(variant.backend)
    say(f"[{variant.name}] {toolchain.describe()}")
    require_system_packages(variant.name, variant.system_packages)
    work = (work_root or variant.matrix_root / "build") / variant.name
    with build_lock(work, what=f"the {variant.name} build", wait_s=lock_wait_s, say=say):
        return _build_locked(
            steps,
            variant,
            toolchain,
            work=work,
            wheelhouse=wheelhouse,
            version=version,
            jobs=jobs,
            on_done=on_done,
            toolkit_override=toolkit_override,
        )


def _build_locked(
    steps: tuple[BuildStep, ...],
    variant: ResolvedVariant,
    toolchain: Toolchain,
    *,
    work: Path,
    wheelhouse: Path,
    version: str,
    jobs: int,
    on_done: Callable[[WheelResult], None] | None,
    toolkit_override: str | None,
) -> list[WheelResult]:
    epoch = source_date_epoch(variant.matrix_root)
    env = build_env(variant, toolchain, epoch, work)
    staged = stage_project(variant, version, work / "src")
    say(f"[{variant.name}] staged {variant.engine_dir.name}/ as {variant.distribution} {version} in {staged}")
    configuration = configuration_key(variant, toolchain, env)
    forget_stale_builds(work, configuration)
    prefix = prebuild_core(
        variant, staged=staged, work=work, version=version, env=env, configuration=configuration
    )
    ctx = BuildContext(
        variant,
        version,
        staged,
        work,
        env,
        prefix,
        toolchain,
        toolkit_override,
        source_digest=tree_digest(staged),
        configuration=configuration,
    )
    wheelhouse.mkdir(parents=True, exist_ok=True)
    # CPU-bound: at most `jobs` wheels at a time. With ccache and no prebuilt core (which already
    # holds what the Pythons share), the first wheel alone: see build_waves.
    cached = bool(env.get("CMAKE_CXX_COMPILER_LAUNCHER")) and not env.get("CCACHE_DISABLE")
    shared_cache = cached and prefix is None
    waves = build_waves(len(steps), jobs=jobs, cores=os.cpu_count() or 1, shared_cache=shared_cache)
    results: list[WheelResult] = []
    errors: list[ReleaseError] = []
    for wave in waves:
        with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(wave.steps)))) as pool:
            futures = [
                pool.submit(
                    reuse_or_build, ctx, steps[i], wheelhouse, f"[{i + 1}/{len(steps)}]", wave.parallel
                )
                for i in wave.steps
            ]
            try:
                _collect(zip(wave.steps, futures, strict=True), steps, results, errors, on_done)
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)  # queued wheels never start
                raise
    if errors:
        raise BuildError("\n".join(str(e) for e in errors))
    return results


def _collect(
    done: Iterable[tuple[int, Future[WheelResult]]],
    steps: tuple[BuildStep, ...],
    results: list[WheelResult],
    errors: list[ReleaseError],
    on_done: Callable[[WheelResult], None] | None,
) -> None:
    """Wait for a wave's wheels in order; a failed wheel is recorded and the others go on."""
    for i, future in done:
        try:
            result = future.result()
        except ReleaseError as exc:
            errors.append(exc)
            continue
        except OSError as exc:
            errors.append(BuildError(f"{steps[i].identifier}: {os_error_line(exc)}"))
            continue
        except subprocess.SubprocessError as exc:
            errors.append(BuildError(f"{type(exc).__name__}: {exc}"))
            continue
        results.append(result)
        if on_done:
            on_done(result)


def remove_previous_wheels(wheelhouse: Path, python_tags: set[str], machine: str | None = None) -> None:
    """Remove earlier wheels (and reports) for the Pythons about to be built (of `machine` alone,
    when given: a cross build leaves this machine's wheels); other files stay."""
    for old in wheelhouse.glob(f"*_{machine}.whl" if machine else "*.whl"):
        try:
            name = parse_wheel_name(old)
        except InvalidWheelName:
            continue
        if set(name.interpreters) & python_tags:
            old.unlink()
            report_path(old).unlink(missing_ok=True)


def _size(size: int) -> str:
    return f"{size / 1e6:.2f} MB" if size >= 1e6 else f"{size / 1e3:.1f} KB"


def summary(results: list[WheelResult]) -> str:
    rows = [
        (
            r.wheel.name,
            _size(r.size),
            r.platform,
            r.glibc,
            ", ".join(r.runtime_bound) or "-",
            r.verify_summary,
            r.built_in,
            r.compiler,
            r.cache,
            f"{r.seconds:.1f}",
        )
        for r in results
    ]
    headers = (
        "wheel",
        "size",
        "tag",
        "glibc",
        "runtime bound",
        "verify",
        "built in",
        "compiler",
        "ccache hits",
        "seconds",
    )
    return table.render(headers, rows)
