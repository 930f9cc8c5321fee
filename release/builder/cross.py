"""Cross builds: another machine's wheels (aarch64 on an x86_64 host) compiled in the local image.

The measured choice (docs/machines.md): cross-compiling costs what a native build does, emulation
about 12 times its wall time. The variant's local Debian build image gets a cross layer once
(`scripts/cross-build.sh setup`: Debian's `crossbuild-essential-arm64`, the `:arm64` -dev packages
of `system_packages`, and Debian's pair of `libpython3.X-dev` whose `pyconfig.h` differences are
the target's), committed as `<build image>-cross-<machine>` and labelled with the image
it was made over. Each step's wheel is then built there (`scripts/cross-build.sh wheel`: the
image's CPython as the build interpreter, a CMake toolchain file, `_PYTHON_HOST_PLATFORM`),
repaired with auditwheel against the multiarch directories, and verified here as a container
build's wheels are (the `elf-machine` rule reads every ELF file's machine).
"""

from __future__ import annotations

import dataclasses
import hashlib
import shlex
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from release import atomic, process
from release.builder import store
from release.builder.container import _verified
from release.builder.host import WheelResult, one_variant, remove_previous_wheels
from release.builder.prebuild import say, source_date_epoch
from release.builder.repair import declare_external
from release.builder.reuse import tree_digest, wheel_key
from release.builder.stage import stage_project
from release.config.machines import MACHINES, host_machine
from release.config.resources import toolkit_scripts
from release.errors import BuildError, ToolchainError, UsageError
from release.machine import images
from release.machine.containers import ContainerEngine, ContainerStepFailed
from release.machine.emulation import CROSS_LABEL, DIST_PYTHON, cross_image_tag
from release.machine.lock import DEFAULT_WAIT_S, build_lock
from release.plan.machine import machine_of
from release.plan.steps import BuildStep
from release.wheel.names import report_path

SETUP_TIMEOUT_S = 1200
WHEEL_TIMEOUT_S = 1800


def _checked(proc: process.Result, *, what: str) -> None:
    """A container run's failure as one line with its output's last lines before it."""
    if proc.returncode != 0:
        print("\n".join((proc.stdout + proc.stderr).strip().splitlines()[-40:]), flush=True)
        msg = f"{what} failed (exit {proc.returncode}): its output's end is above"
        raise BuildError(msg)


def _scripts_digest(toolkit: str | None) -> str:
    """What the cross layer's making reads of the toolkit's scripts: cross-build.sh, and the install
    script the toolkit command names (with the helpers both source)."""
    scripts = toolkit_scripts()
    names = ["cross-build.sh", "_common.sh"]
    names += [Path(word).name for word in shlex.split(toolkit or "") if word.endswith(".sh")]
    digest = hashlib.sha256()
    for name in dict.fromkeys(names):
        path = scripts / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b""))
    return digest.hexdigest()[:16]


def setup_script(machine: str, packages: tuple[str, ...], toolkit: str | None) -> str:
    """The cross layer's command: the cross toolchain and `packages` (`:arm64` forms), then the build
    image's `toolkit` install command again for `machine` (install-cuda.sh's `--target`: the
    target's runtime and driver stub beside the image's toolkit), where the image has one."""
    target = MACHINES[machine]
    return shlex.join([
        "bash", "/toolkit-scripts/cross-build.sh", "setup", target.gnu_triplet, target.debian,
        DIST_PYTHON, " ".join(packages), *([toolkit] if toolkit else []),
    ])  # fmt: skip


def ensure_cross_image(
    engine: ContainerEngine,
    base: str,
    machine: str,
    variant: str,
    packages: tuple[str, ...],
    *,
    toolkit: str | None,
) -> str:
    """The cross image of `base` for `machine`, made unless one over the same base image, scripts,
    packages and toolkit command exists (its label)."""
    tag = cross_image_tag(base, machine)
    base_id = engine.image_id(base)
    if base_id is None:
        msg = f"the build image {base} is not here (make it with `release build --variant {variant}` first)"
        raise ToolchainError(msg)
    wanted = f"{base_id}:{_scripts_digest(toolkit)}:{' '.join(packages)}:{toolkit or ''}"
    if engine.label(tag, CROSS_LABEL) == wanted:
        return tag
    target = MACHINES[machine]
    say(f"[{variant}] making the cross image {tag} over {base} ({target.debian} toolchain)")
    setup = setup_script(machine, packages, toolkit)
    try:
        engine.commit_script(
            base, setup, tag, name=f"release-cross-setup-{machine}-{variant}",
            labels={CROSS_LABEL: wanted}, network="host", timeout=SETUP_TIMEOUT_S,
            mounts={toolkit_scripts(): "/toolkit-scripts:ro"},
        )  # fmt: skip
    except process.TimedOut as exc:
        msg = f"the cross layer of {base} for {machine} took over {SETUP_TIMEOUT_S:.0f} s and was stopped"
        raise BuildError(msg) from exc
    except ContainerStepFailed as exc:
        msg = f"the cross layer of {base} for {machine}: {exc}"
        raise BuildError(msg) from exc
    return tag


def _cross_packages(steps: tuple[BuildStep, ...], debian_arch: str) -> tuple[str, ...]:
    """The `:arm64` form of every apt package of the variant's system_packages."""
    variant = one_variant(steps)
    found: list[str] = []
    for package in variant.system_packages.values():
        found += [f"{name.split('/')[0]}:{debian_arch}" for name in package.apt]
    return tuple(dict.fromkeys(found))


def wheel_script(step: BuildStep, machine: str, *, epoch: str) -> str:
    """One step's cross build in the cross image: the variant's build settings as `-C` config
    settings and environment (what a host or container build passes: `BuildSettings.translate`,
    the runtime requirements the import-time message names), its runtime excludes for auditwheel."""
    variant = step.variant
    pairs, env = variant.build.translate()
    if step.abi3:
        pairs += variant.build.limited_api(step.python_tag)
    settings = [word for key, value in pairs for word in ("-C", f"{key}={value}")]
    excludes = [word for pattern in variant.excludes for word in ("--exclude", pattern)]
    assignments = [f"{k}={v}" for k, v in {"SOURCE_DATE_EPOCH": epoch, **env}.items()]
    return shlex.join([
        "env", *assignments, "bash", "/toolkit-scripts/cross-build.sh", "wheel",
        MACHINES[machine].gnu_triplet, step.python, "/src", "/out", *settings, *excludes,
    ])  # fmt: skip


def rebuild_cross(
    steps: tuple[BuildStep, ...],
    *,
    wheelhouse: Path,
    version: str,
    image: bool,
    engine: Callable[[], ContainerEngine],
) -> list[Path]:
    """A second build (`release reproduce`) of another machine's wheels: cross-compiled in the
    local image as `release build --arch` built them; the release image builds them natively,
    on that machine's runner, so `image` (--release-image, --image) is refused in one line."""
    machine = machine_of(steps[0].variant)
    if image:
        msg = (
            f"{steps[0].identifier}: this machine is {host_machine()}; {machine} wheels are rebuilt "
            "here by the cross build in the local image (leave out --release-image and --image)"
        )
        raise UsageError(msg)
    built = run_cross(steps, machine, wheelhouse=wheelhouse, version=version, engine=engine())
    return [r.wheel for r in built]


def run_cross(
    steps: tuple[BuildStep, ...],
    machine: str,
    *,
    wheelhouse: Path,
    version: str,
    engine: ContainerEngine,
    lock_wait_s: float = DEFAULT_WAIT_S,
    reuse: bool = False,
) -> list[WheelResult]:
    """Cross-compile the steps' wheels for `machine` in the variant's local image, verified. With
    `reuse` (`release build`; never `reproduce`), a step the run's store holds a wheel of from the
    same inputs (`cross_keys`; release.builder.store) takes it instead."""
    variant = one_variant(steps)
    if machine == host_machine():
        msg = f"a cross build is for another machine than this one ({machine})"
        raise BuildError(msg)
    if variant.build_image.local_recipe is not None:
        images.ensure(engine, variant.build_image.local_recipe, log=say)
    target = MACHINES[machine]
    root = variant.matrix_root
    work = root / "build" / variant.name / f"cross-{machine}"
    with build_lock(
        root / "build" / variant.name, what=f"the {variant.name} build", wait_s=lock_wait_s, say=say
    ):
        recipe = variant.build_image.local_recipe
        image = ensure_cross_image(
            engine, variant.build_image.local, machine, variant.name, _cross_packages(steps, target.debian),
            toolkit=recipe.toolkit_install if recipe is not None else None,
        )  # fmt: skip
        shutil.rmtree(work, ignore_errors=True)
        stage_project(variant, version, work / "src")
        out = work / "out"
        out.mkdir(parents=True)
        started = time.monotonic()
        epoch = source_date_epoch(root)
        shared = store.store_directory() if reuse else None
        keys = (
            cross_keys(steps, machine, work / "src", engine=engine, image=image, epoch=epoch)
            if shared
            else {}
        )
        with store.holding(shared, list(keys.values()), wait_s=lock_wait_s):
            taken = {s.identifier: store.take(shared, keys.get(s.identifier)) for s in steps}
            return _cross_locked(
                steps, machine, image=image, work=work, taken=taken, keys=keys, shared=shared,
                wheelhouse=wheelhouse, version=version, engine=engine, epoch=epoch, started=started,
            )  # fmt: skip


def _cross_locked(
    steps: tuple[BuildStep, ...],
    machine: str,
    *,
    image: str,
    work: Path,
    taken: dict[str, Path | None],
    keys: dict[str, str],
    shared: Path | None,
    wheelhouse: Path,
    version: str,
    engine: ContainerEngine,
    epoch: str,
    started: float,
) -> list[WheelResult]:
    """The steps' wheels: each taken from the store where `taken` holds one, the others compiled."""
    variant = one_variant(steps)
    out = work / "out"
    # The staged copy, writable: a build writes into its source tree (setuptools' build/, a
    # scikit-build-core `build-dir` such as Mooncake's `build/python/{wheel_tag}`).
    mounts = {toolkit_scripts(): "/toolkit-scripts:ro", work / "src": "/src"}
    todo = tuple(s for s in steps if taken.get(s.identifier) is None)
    for step in todo:
        say(f"[{variant.name}] cross-compiling Python {step.python} for {machine} in {image}")
        try:
            proc = engine.run_script(
                image, wheel_script(step, machine, epoch=epoch), network="host",
                timeout=WHEEL_TIMEOUT_S, mounts=mounts | {out: "/out"},
            )  # fmt: skip
        except process.TimedOut as exc:
            msg = f"the {machine} cross build of Python {step.python} took over {WHEEL_TIMEOUT_S} s"
            raise BuildError(msg) from exc
        _checked(proc, what=f"the {machine} cross build of {variant.name} for Python {step.python}")
    built = sorted(out.glob("*.whl"))
    if len(built) != len(todo):
        msg = f"the cross build left {len(built)} wheel(s) in {out}, expected {len(todo)}"
        raise BuildError(msg)
    for wheel in built:  # as repair does: METADATA names the runtime the wheel binds
        declare_external(wheel, variant.excludes)
    for identifier, stored in taken.items():  # already declared: verified again below
        if stored is not None:
            say(f"{identifier}: up to date, the run's store holds its wheel from the same inputs ({stored})")
            atomic.copy_file(stored, out / stored.name)
            built.append(out / stored.name)
    results = _verified(
        built, steps, version, release=False, where=f"{image} (cross, {machine})",
        seconds=time.monotonic() - started,
    )  # fmt: skip
    wheelhouse.mkdir(parents=True, exist_ok=True)
    remove_previous_wheels(wheelhouse, {s.python_tag for s in steps}, machine)
    moved = []
    for result in results:
        dest = wheelhouse / result.wheel.name
        atomic.move_file(report_path(result.wheel), report_path(dest))
        atomic.move_file(result.wheel, dest)
        moved.append(dataclasses.replace(result, wheel=dest))
        key = keys.get(result.step.identifier)
        if key is not None and taken.get(result.step.identifier) is None:
            store.keep(shared, key, dest)
    shutil.rmtree(work, ignore_errors=True)
    return moved


def cross_keys(
    steps: tuple[BuildStep, ...], machine: str, project: Path, *, engine: ContainerEngine, image: str,
    epoch: str,
) -> dict[str, str]:  # fmt: skip
    """Each step's key (by identifier): everything its cross-built wheel depends on. The staged
    project, the toolkit (its scripts run in the image, its code declares the runtime in METADATA),
    the cross image by its ID, and the step's build command (settings, excludes, timestamp).
    Empty when the image has no ID: nothing is taken then."""
    found = engine.image_id(image)
    if not found:
        return {}
    shared = {
        "project": tree_digest(project),
        "toolkit": _toolkit_digest(),
        "scripts": tree_digest(toolkit_scripts()),
        "image": found,
        "engine": engine.name,
        "machine": machine,
    }
    return {
        s.identifier: wheel_key({**shared, "script": wheel_script(s, machine, epoch=epoch)}) for s in steps
    }


def _toolkit_digest() -> str:
    """The toolkit's code (every module of the `release` package by its path in the package): the
    same whether it runs from a checkout or from the wheel installed from it, which carries data
    files the checkout keeps elsewhere (their part in a build is hashed on its own: the scripts,
    the staged project, the step's command)."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" not in path.parts:
            digest.update(path.relative_to(package).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()
