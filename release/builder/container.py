"""Container builds: cibuildwheel in the variant's build image, under podman or docker.

The configuration is `release.builder.cibw`'s, derived from the same resolved steps as a host build.
cibuildwheel copies its working directory into the container, so it runs from a small project
made for the build (`build/<variant>/container/`): the staged engine (`src/`), the toolkit's own
sources or the wheel it was installed from, and its toolchain scripts, from the source tree or the
installed toolkit (`scripts/`, for `before-all`). `before-all` installs the toolkit once per
container into an environment of its own (`TOOLKIT_VENV`), which every Python's repair runs from:
nothing of the toolkit is installed per Python. Wheels land in a scratch directory first and reach
the wheelhouse only once they are all built and verified: a container that dies mid-build leaves
nothing half-made behind. `run_cibuildwheel` checks that the steps are one variant's; helpers take it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shutil
import sys
import time
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlsplit

from release import atomic, process, settings
from release.builder import compiler_cache, store
from release.builder.cibw import EXCLUDES_FILE, FIND_LINKS_MOUNT, cibuildwheel_env, one_run, repair_command
from release.builder.host import (
    WheelResult,
    compiler_summary,
    one_variant,
    remove_previous_wheels,
    verify_summary,
)
from release.builder.prebuild import say, source_date_epoch
from release.builder.reuse import remember, tree_digest, up_to_date, wheel_key
from release.builder.stage import check_wheel_identity, require_test_source, stage_project
from release.config.resources import missing_script_message, toolkit_scripts
from release.errors import BuildError, ToolchainError
from release.inspect.verify import verify_wheel, write_report
from release.machine import images
from release.machine.containers import ContainerEngine
from release.machine.lock import DEFAULT_WAIT_S, build_lock
from release.plan.build_image import missing_image
from release.plan.resolve import ResolvedVariant
from release.plan.steps import BuildStep
from release.wheel.names import parse_wheel_name, report_path

TOOLKIT_PARTS = ("pyproject.toml", "README.md", "release", "packaging", "scripts")
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
_SCRIPT = re.compile(r"(?:^|[\s/])scripts/([A-Za-z0-9_.-]+)")
"""A toolkit script a backend's install command runs from the project (`bash scripts/install-rocm.sh`)."""


def cibuildwheel_command(package_dir: str, output_dir: Path) -> list[str]:
    cibuildwheel = [sys.executable, "-m", "cibuildwheel", "--platform", "linux"]
    return [*cibuildwheel, "--output-dir", str(output_dir), package_dir]


def toolkit_source() -> Path | None:
    """The toolkit's source tree when it runs from one (a checkout or an editable install)."""
    root = Path(__file__).resolve().parents[2]
    return root if all((root / part).exists() for part in TOOLKIT_PARTS[:3]) else None


def toolkit_requirement() -> str:
    """What `before-all` installs in the container when there is no source tree to copy."""
    try:
        return f"gpu-wheel-release=={metadata.version('gpu-wheel-release')}"
    except metadata.PackageNotFoundError:
        return "gpu-wheel-release"


def toolkit_wheel() -> Path | None:
    """The wheel file this toolkit was installed from (`pip install ./gpu_wheel_release-....whl`,
    recorded in its direct_url.json, PEP 610) while it still exists: a toolkit the index does not
    hold (an adopter's rehearsal of a toolkit wheel) installs the same bytes in the container."""
    try:
        text = metadata.distribution("gpu-wheel-release").read_text("direct_url.json")
        url = str(json.loads(text or "{}").get("url", ""))
    except (metadata.PackageNotFoundError, ValueError, AttributeError):
        return None
    if not url.startswith("file://") or not url.endswith(".whl"):
        return None
    path = Path(unquote(urlsplit(url).path))
    return path if path.is_file() else None


def container_project(steps: tuple[BuildStep, ...], version: str, work: Path) -> tuple[Path, str]:
    """The directory cibuildwheel copies into the container, and how `before-all` installs the
    toolkit there (`toolkit_environment`): from the source tree, the wheel it was installed from,
    or the index."""
    variant = steps[0].variant
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    require_test_source(variant, stage_project(variant, version, work / "src"))
    if variant.smoke_requirements.skip:  # what the import test leaves out (cibw.test_environment)
        (work / EXCLUDES_FILE).write_text("\n".join(variant.smoke_requirements.skip) + "\n", encoding="utf-8")
    source = toolkit_source()
    args = ""
    constraint = settings.raw("PIP_CONSTRAINT")
    if constraint and Path(constraint).is_file():
        # The toolkit's dependencies in the container are the ones pinned outside it (a rehearsal
        # at the lowest allowed versions repairs with that auditwheel, as the host would).
        shutil.copy2(constraint, work / "pip-constraints.txt")
        args += " --constraint {project}/pip-constraints.txt"
    if source is None:
        # before-all runs the backend's `bash scripts/install-X.sh` in the container project: the
        # installed toolkit's own copy of its scripts (release/scripts_data/) goes there.
        if toolkit_scripts().is_dir():
            shutil.copytree(toolkit_scripts(), work / "scripts", ignore=_IGNORE)
        require_scripts(variant, work / "scripts")
        wheel = toolkit_wheel()
        if wheel is None:
            return work, toolkit_environment(install_command(f"{args} {toolkit_requirement()}"))
        shutil.copy2(wheel, work / wheel.name)
        return work, toolkit_environment(install_command(f"{args} {{project}}/{wheel.name}"))
    for part in TOOLKIT_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, work / part, ignore=_IGNORE)
        elif (source / part).is_file():
            shutil.copy2(source / part, work / part)
    require_scripts(variant, work / "scripts")
    return work, toolkit_environment(install_command(f"{args} {{project}}"))


def require_scripts(variant: ResolvedVariant, scripts: Path) -> None:
    """Every toolkit script the variant's before-all runs (`bash scripts/install-rocm.sh`, from the
    backend data) is in the container project, or one line naming the toolkit, the file and the fix."""
    probe = variant.backend.toolkit
    if probe is None:
        return
    for name in _SCRIPT.findall(probe.install):
        if not (scripts / name).is_file():
            command = " ".join([probe.install, *([variant.toolkit] if variant.toolkit else [])])
            needed_by = f"{variant.name}'s before-all (`{command}`)"
            raise ToolchainError(missing_script_message(name, needed_by))


TOOLKIT_VENV = "/opt/release-toolkit"
"""Where `before-all` installs the toolkit in the container, once for all the Pythons it builds."""
TOOLKIT_PYTHON = f"{TOOLKIT_VENV}/bin/python"
TOOLKIT_INTERPRETERS = ("312", "313", "311", "310")
"""The image's interpreter the toolkit's environment is made with: the first of these it has, so
that which Pythons a run builds does not change it (the image is part of every key)."""


def install_command(args: str, *, into: str = TOOLKIT_PYTHON) -> str:
    """An install into the environment of the python `into` (by default the toolkit's own in the
    container): with uv where the image has it (the local build images and manylinux do; about a
    second where pip takes 15 s of CPU), else pip; the same requirement and constraints either way."""
    return (
        "if command -v uv >/dev/null 2>&1; "
        f"then uv pip install --quiet --python {into}{args}; "
        f"else {into} -m pip install --quiet{args}; fi"
    )


def toolkit_environment(install: str) -> str:
    """`before-all`'s part that makes the toolkit's environment (`TOOLKIT_VENV`) with the image's
    interpreter and runs `install` (`install_command`) into it: once per container, where it was
    once per Python (4-8 s each on the reference engine, docs/benchmarks.md)."""
    choose = (
        f"for v in {' '.join(TOOLKIT_INTERPRETERS)}; do p=/opt/python/cp$v-cp$v/bin/python; "
        'if [ -x "$p" ]; then break; fi; done; '
        'if [ ! -x "$p" ]; then echo "the image has no /opt/python/cp310..cp313 interpreter to run '
        'the release toolkit with" >&2; exit 1; fi'
    )
    venv = (
        f'if command -v uv >/dev/null 2>&1; then uv venv --quiet --python "$p" {TOOLKIT_VENV}; '
        f'else "$p" -m venv {TOOLKIT_VENV}; fi'
    )
    return f"({choose}; {venv}) && ({install})"


def container_options(steps: tuple[BuildStep, ...], *, image: str, toolkit: str) -> dict[str, str]:
    """The `CIBW_*` values of a container build of `steps`: the matrix's, with the toolkit's
    environment made first in `before-all` (`toolkit`: `toolkit_environment`'s command) and the
    repair run from it; `before-build` installs nothing of the toolkit."""
    env = cibuildwheel_env(steps, image=image, before_build="true")
    env["CIBW_BEFORE_ALL"] = " && ".join(p for p in (toolkit, env.get("CIBW_BEFORE_ALL", "")) if p)
    env["CIBW_REPAIR_WHEEL_COMMAND"] = repair_command(steps[0].variant, python=TOOLKIT_PYTHON)
    # An abi3 wheel is audited once, by verify's stable-abi rule (abi3audit on the host), not also
    # by cibuildwheel's own audit, which makes a venv and installs abi3audit from the index per run.
    env["CIBW_AUDIT_COMMAND"] = ""
    return env


def _verified(
    wheels: list[Path], steps: tuple[BuildStep, ...], version: str, *, release: bool, where: str,
    seconds: float, cache: dict[str, str] | None = None,
) -> list[WheelResult]:  # fmt: skip
    """Verify the wheels cibuildwheel made, as a host build does, and describe each for the summary
    (`cache`: each Python's compiler-cache hits)."""
    variant = steps[0].variant
    by_python = {step.python: step for step in steps}
    results = []
    for wheel in wheels:
        check_wheel_identity(wheel, distribution=variant.distribution, version=version)
        report = verify_wheel(wheel, variant=variant, release=release)
        write_report(report, report_path(wheel))
        failed = [r.id for r in report.rules if r.status == "fail"]
        warned = [r.id for r in report.rules if r.status == "warn"]
        verdict = verify_summary(failed, warned)
        bound = ", ".join(report.runtime_bound) or "no runtime"
        say(f"  {wheel.name}: binds {bound}; verify {verdict}")
        name = parse_wheel_name(wheel.name)
        platform = name.platforms[-1] if name.platforms else "-"
        step = by_python.get(name.python_version() or "", steps[0])
        results.append(
            WheelResult(
                step=step,
                wheel=wheel,
                size=wheel.stat().st_size,
                platform=platform,
                floor_met=platform == variant.floor,
                runtime_bound=tuple(report.runtime_bound),
                verify_ok=report.ok,
                verify_summary=verdict,
                seconds=seconds / max(len(wheels), 1),
                built_in=where,
                cache=(cache or {}).get(step.python, "-"),
                compiler=compiler_summary(report.compilers),
                glibc=report.glibc_needed or "-",
            )
        )
    return results


def run_cibuildwheel(
    steps: tuple[BuildStep, ...],
    *,
    wheelhouse: Path,
    version: str,
    engine: ContainerEngine,
    image: str | None = None,
    release_image: bool = False,
    skip_absent_pythons: bool = False,
    lock_wait_s: float = DEFAULT_WAIT_S,
    reuse: bool = False,
) -> tuple[list[WheelResult], list[str]]:
    """Build the steps' wheels in the variant's build image: (the wheels, verified as a host build
    verifies them; the Pythons skipped because the image lacks them).

    With `reuse` (`release build`; never `reproduce`, which must compile again), a step whose
    inputs are all unchanged since its last container build takes that build's wheel (`container_key`).
    `image` overrides the matrix's image; `release_image` picks the release image (GitHub Actions').
    The matrix's local image absent, with no recipe: one line naming its matrix key (`missing_image`).
    An interpreter the image lacks fails the build, or with `skip_absent_pythons` skips its steps."""
    variant = one_variant(steps)
    chosen = image or (variant.build_image.release if release_image else variant.build_image.local)
    local = not release_image or image is not None
    if local and chosen == variant.build_image.local and variant.build_image.local_recipe is not None:
        images.ensure(engine, variant.build_image.local_recipe, log=say)
    lacking: list[str] = []
    if local:
        if not images.exists(engine, chosen) and (image is None or image == variant.build_image.local):
            raise ToolchainError(missing_image(variant.build_image, chosen, engine))
        wanted = tuple(s.python for s in steps)
        lacking = images.missing_interpreters(engine, chosen, wanted) if skip_absent_pythons else []
        steps = tuple(s for s in steps if s.python not in lacking)
        if not steps:
            msg = f"image {chosen} has none of the interpreters the build needs ({', '.join(wanted)})"
            raise ToolchainError(msg)
        images.require_interpreters(engine, chosen, tuple(s.python for s in steps))
    root = variant.matrix_root
    with build_lock(
        root / "build" / variant.name, what=f"the {variant.name} build", wait_s=lock_wait_s, say=say
    ):
        scratch = root / "build" / variant.name / "container-out"
        try:
            built = _run_locked(
                steps, wheelhouse=wheelhouse, version=version, engine=engine, chosen=chosen, local=local,
                reuse=reuse,
            )  # fmt: skip
            return built, lacking
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _run_locked(
    steps: tuple[BuildStep, ...],
    *,
    wheelhouse: Path,
    version: str,
    engine: ContainerEngine,
    chosen: str,
    local: bool,
    reuse: bool,
) -> list[WheelResult]:
    """cibuildwheel into scratch, verify there, move each wheel (report first) to the wheelhouse; with
    `reuse`, a step whose last build (here, or in the run's store) had its inputs takes that wheel."""
    variant = steps[0].variant
    root = variant.matrix_root
    work = root / "build" / variant.name / "container"
    scratch = root / "build" / variant.name / "container-out"
    shutil.rmtree(scratch, ignore_errors=True)
    project, toolkit = container_project(steps, version, work)
    started = time.monotonic()
    epoch = source_date_epoch(root)
    keys = container_keys(steps, project, engine=engine, image=chosen, toolkit=toolkit, epoch=epoch)
    shared = store.store_directory() if reuse and keys else None
    with store.holding(shared, list(keys.values()), wait_s=process.BUILD_S):
        stamps = root / "build" / variant.name / "stamps"
        found = [(s, container_up_to_date(stamps, s, keys, root)) for s in steps] if reuse else []
        found = [(s, wheel or store.take(shared, keys.get(s.identifier))) for s, wheel in found]
        kept = [(s, wheel) for s, wheel in found if wheel is not None]
        results: list[WheelResult] = []
        if kept:
            results = _reused(kept, wheelhouse, version, release=not local, where=chosen)
            for step, wheel in kept:  # a copy in the checkout's own wheelhouse outlives a scratch one
                if not _inside(wheel, root) and _inside(wheelhouse / wheel.name, root):
                    remember(_stamp(stamps, step), keys[step.identifier], wheelhouse / wheel.name, root)
                store.keep(shared, keys[step.identifier], wheel, did="kept")  # other checkouts take it
            steps = tuple(s for s, wheel in found if wheel is None)
            if not steps:
                return results
        cache = _open_cache(steps, engine=engine, image=chosen, toolkit=toolkit, shared=reuse)
        try:
            _run_groups(steps, project, scratch, engine=engine, image=chosen, toolkit=toolkit,
                        epoch=epoch, cache=cache, wheelhouse=wheelhouse)  # fmt: skip
        finally:
            stats = compiler_cache.stats_by_python(cache) if cache is not None else {}
            if cache is not None:
                compiler_cache.finish(cache)
        built = sorted(scratch.glob("*.whl"))
        if len(built) != len(steps):
            msg = f"cibuildwheel left {len(built)} wheel(s) in {scratch}, expected {len(steps)}"
            raise BuildError(msg)
        fresh = _verified(
            built, steps, version, release=not local, where=chosen, seconds=time.monotonic() - started,
            cache={python: found.text for python, found in stats.items()},
        )  # fmt: skip
        wheelhouse.mkdir(parents=True, exist_ok=True)
        remove_previous_wheels(wheelhouse, {step.python_tag for step in steps})
        for wheel in built:
            atomic.move_file(report_path(wheel), report_path(wheelhouse / wheel.name))
            atomic.move_file(wheel, wheelhouse / wheel.name)
        fresh = [dataclasses.replace(r, wheel=wheelhouse / r.wheel.name) for r in fresh]
        for result in fresh:
            key = keys.get(result.step.identifier)
            if key is not None:  # relative to the checkout: a copy with build/ and wheelhouse/ keeps it
                remember(_stamp(stamps, result.step), key, result.wheel, root)
                store.keep(shared, key, result.wheel)
        return results + fresh


def _run_groups(
    steps: tuple[BuildStep, ...],
    project: Path,
    scratch: Path,
    *,
    engine: ContainerEngine,
    image: str,
    toolkit: str,
    epoch: str,
    cache: compiler_cache.ContainerCache | None,
    wheelhouse: Path,
) -> None:
    """cibuildwheel into `scratch`: one run for the per-Python steps and the abi3 step together
    (the abi3 identifier's config settings through an override in a config file: one container,
    one `before-all`), or one run each where their options differ in more than that."""
    variant = steps[0].variant
    groups = [tuple(g) for g in ([s for s in steps if not s.abi3], [s for s in steps if s.abi3]) if g]

    env_of = functools.partial(
        _group_env, image=image, toolkit=toolkit, engine=engine, cache=cache, epoch=epoch
    )
    runs = [(group, env_of(group, run=run), "") for run, group in enumerate(groups)]
    merged = one_run(runs[0][1], env_of(groups[1], run=0)) if len(groups) == 2 else None
    if merged is not None:
        runs = [(steps, merged[0], merged[1])]
    for group, env, config in runs:
        pythons = ", ".join(s.python + (" (abi3)" if s.abi3 else "") for s in group)
        say(f"[{variant.name}] cibuildwheel in {image} through {engine} for Python {pythons}")
        command = cibuildwheel_command("src", scratch)
        if config:
            path = project.parent / "cibuildwheel-overrides.toml"
            path.write_text(config, encoding="utf-8")
            command[-1:-1] = ["--config-file", str(path)]
        proc = process.stream(command, timeout=process.BUILD_S, cwd=project, env=env)
        if proc.returncode != 0:
            shutil.rmtree(scratch, ignore_errors=True)
            msg = (
                f"cibuildwheel failed for {variant.name} in {image} (exit {proc.returncode}); "
                f"nothing was written to {wheelhouse}"
            )
            raise BuildError(msg)


def _group_env(
    group: tuple[BuildStep, ...], *, run: int, image: str, toolkit: str, engine: ContainerEngine,
    cache: compiler_cache.ContainerCache | None, epoch: str,
) -> dict[str, str]:  # fmt: skip
    """The environment of one cibuildwheel run of `group` (the `run`-th: its cache statistics log)."""
    variant = group[0].variant
    env = {**os.environ, **container_options(group, image=image, toolkit=toolkit)}
    volumes: list[tuple[Path, str]] = []
    if cache is not None:  # mounted, and ccache installed once in before-all
        volumes += compiler_cache.volumes(cache)
        env |= compiler_cache.cibuildwheel_additions(
            cache, env, run=run, bin_dir=f"{TOOLKIT_VENV}/bin",
            install=install_command(f" {compiler_cache.CCACHE_REQUIREMENT}"),
            scikit_build=variant.build.backend == "scikit-build-core",
        )  # fmt: skip
    links = variant.smoke_requirements.find_links  # the import test's requirements, read-only
    if links is not None and links.is_dir():
        volumes.append((links, f"{FIND_LINKS_MOUNT}:ro"))
    env["CIBW_CONTAINER_ENGINE"] = engine.cibuildwheel(volumes)
    env["SOURCE_DATE_EPOCH"] = epoch
    return env


def _open_cache(
    steps: tuple[BuildStep, ...], *, engine: ContainerEngine, image: str, toolkit: str, shared: bool
) -> compiler_cache.ContainerCache | None:
    """This build's compiler cache, said in one line: the variant's shared one, or a cold private one."""
    variant = steps[0].variant
    if (why := compiler_cache.unmountable(engine)) is not None:
        say(f"[{variant.name}] {why}")
        return None
    options = container_options(steps[:1], image=image, toolkit=toolkit)
    cache = compiler_cache.open_cache(variant, engine=engine, image=image, options=options, shared=shared)
    say(f"[{variant.name}] {cache.describe() if cache else 'no compiler cache (the image has no ID yet)'}")
    return cache


def _inside(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def _stamp(stamps: Path, step: BuildStep) -> Path:
    return stamps / f"container-{step.identifier}.json"


def container_keys(
    steps: tuple[BuildStep, ...], project: Path, *, engine: ContainerEngine, image: str, toolkit: str,
    epoch: str,
) -> dict[str, str]:  # fmt: skip
    """Each step's key (by identifier): everything its wheel depends on. The project cibuildwheel
    copies in (the staged engine and the toolkit that repairs and verifies it), the image by its
    ID, cibuildwheel's version and settings for that one identifier (the matrix's, and any CIBW_*
    of the environment) and the timestamp. Empty when the image has no ID to read (not pulled yet):
    nothing is reused then."""
    image_id = engine.image_id(image)
    if image_id is None:
        return {}
    try:
        cibw = metadata.version("cibuildwheel")
    except metadata.PackageNotFoundError:
        cibw = "?"
    shared = {
        "project": tree_digest(project),
        "image": image_id,
        "engine": engine.name,
        "cibuildwheel": cibw,
        "environ": settings.family("CIBW_"),
        "epoch": epoch,
    }
    return {
        step.identifier: wheel_key(
            {**shared, "options": container_options((step,), image=image, toolkit=toolkit)}
        )
        for step in steps
    }


def container_up_to_date(stamps: Path, step: BuildStep, keys: dict[str, str], root: Path) -> Path | None:
    """The wheel the last container build of `step` made from exactly these inputs, still where
    it was put (relative to the checkout `root`, or absolute), unchanged (its SHA-256) and beside
    its report; None when it must be built or has no key."""
    key = keys.get(step.identifier)
    return None if key is None else up_to_date(_stamp(stamps, step), key, root)


def _reused(
    kept: list[tuple[BuildStep, Path]], wheelhouse: Path, version: str, *, release: bool, where: str
) -> list[WheelResult]:
    """The up-to-date wheels in `wheelhouse` (copied there when they are in another directory),
    verified again (a rule changed since judges them now), each said in a line."""
    started = time.monotonic()
    wheelhouse.mkdir(parents=True, exist_ok=True)
    elsewhere = [(s, w) for s, w in kept if w.parent.resolve() != wheelhouse.resolve()]
    if elsewhere:  # another wheelhouse: what it holds for these Pythons makes way, as for a build
        remove_previous_wheels(wheelhouse, {s.python_tag for s, _ in elsewhere})
    for _, wheel in elsewhere:
        atomic.copy_file(report_path(wheel), report_path(wheelhouse / wheel.name))
        atomic.copy_file(wheel, wheelhouse / wheel.name)
    placed = [wheelhouse / wheel.name for _, wheel in kept]
    for step, wheel in kept:
        say(f"{step.identifier}: up to date, nothing changed since its build in {where} ({wheel})")
    steps = tuple(s for s, _ in kept)
    seconds = time.monotonic() - started
    return [
        dataclasses.replace(r, cache="up to date")
        for r in _verified(placed, steps, version, release=release, where=where, seconds=seconds)
    ]
