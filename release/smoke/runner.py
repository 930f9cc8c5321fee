"""`release smoke`: install the exact wheel files in fresh environments and simulated images.

For every wheel of a variant (and Python) in `wheelhouse/<variant>/`, and for every image the
variant declares (plus `host`, a fresh venv on this machine), the smoke test creates a fresh venv
with the matrix's interpreter, installs that one file (its `Requires-Dist` from the declared
`engine.smoke.requirements` only, else `--no-index`), checks the shared libraries with the image's
own loader, imports the engine, proves where the GPU runtime was loaded from, and runs
`engine.smoke.commands`. Images that expect `runtime-missing` must refuse the import with the
toolkit's message (naming the runtime), never a bare loader error. What did not run is said.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from release.config.matrix import Image
from release.errors import SmokeError, ToolchainError, UsageError, VerifyError
from release.inspect.rules.runtime import vendored_runtime as vendored_runtime_rule
from release.inspect.verify import inspect_wheel
from release.machine.containers import ContainerEngine, image_interpreter
from release.machine.containers import interpreter as container_interpreter
from release.machine.images import ensure as ensure_image
from release.machine.images import usable as local_image_usable
from release.machine.interpreters import require_interpreter
from release.machine.venv import fresh_venv_argv, interpreter_installs, pip_argv, runs_pip
from release.plan.resolve import LocalImage, ResolvedVariant
from release.smoke import gil, verdict
from release.smoke.container import ContainerSandbox
from release.smoke.hostruntime import HostRuntime, find_host_runtime, needs_host_runtime, require_host_runtime
from release.smoke.image import (
    Bind,
    Result,
    Sandbox,
    distribution_libdir,
    ensure_minbase,
    host_package,
    interpreter_home,
    missing_libraries,
    run_command,
)
from release.smoke.legs import plan_legs
from release.smoke.outcome import Outcome, Step
from release.smoke.placement import Placement, host_libc, host_platforms, uninstallable
from release.smoke.probes import ELF_FILES, MAPPED_RUNTIME, one_copy_argv, two_copies
from release.smoke.refusal import absent_drivers, absent_runtime, refusal_problem
from release.smoke.requirements import install_argvs, left_out, missing_source_line, network_env
from release.smoke.requirements import mounts as requirement_mounts
from release.smoke.selection import HOST_IMAGE, wheels_for
from release.smoke.verdict import command_argv, judge, shown, smoke_commands
from release.table import printable
from release.wheel.archive import WheelReadError, read_metadata, requires_dist
from release.wheel.files import file_sha256
from release.wheel.names import parse_wheel_name

TAIL_LINES = 25


class _Failed(Exception):
    """A check failed; the outcome already says why."""


def vendored_runtime(wheel: Path, variant: ResolvedVariant) -> list[str]:
    """The wheel's files that verify's `vendored-runtime` rule finds: an excluded library by its
    file name or by its SONAME (a renamed copy), judged by the rule itself, not a copy of it."""
    finding = vendored_runtime_rule(inspect_wheel(wheel, variant=variant))
    return list(finding.paths) if finding.status == "fail" else []


def tail(text: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


class Smoke:
    """Runs the checks of one wheel in one image and records them in an `Outcome`."""

    def __init__(
        self,
        variant: ResolvedVariant,
        wheel: Path,
        python: str,
        image_name: str,
        image: Image,
        *,
        workdir: Path,
        log: Callable[[str], None],
        inside: bool = False,
        container: tuple[ContainerEngine, str] | None = None,
        container_python: Path | None = None,
        runtime_libdir: Path | None = None,
        runner: str | None = None,
        install_hint: str = "",
    ) -> None:
        """`container`: (engine, image tag) to run the checks in a real container of that image,
        with its interpreter at `container_python` (default: cibuildwheel's layout);
        `runtime_libdir`: where the host's runtime files are (default: the distribution's directory);
        `runner`: what the outcome says ran the checks (default: the container or the simulation);
        `install_hint`: added to a failed install (why this host could not install the wheel)."""
        self.runner = runner
        self.install_hint = install_hint
        self.container_python = container_python
        self.runtime_libdir = runtime_libdir or distribution_libdir()
        self.inside = inside
        self.container = container
        self.variant = variant
        self.wheel = wheel
        self.image_name = image_name
        self.image = image
        self.python = python
        self.workdir = workdir
        self.log = log
        self.outcome = Outcome(
            wheel=wheel.name,
            sha256=file_sha256(wheel),
            variant=variant.name,
            python=self.python,
            image=image_name,
            expect=image.expect,
        )
        self.venv = workdir / "venv"
        self.pip: list[str] = [str(self.venv / "bin" / "python"), "-m", "pip"]
        self.env = {
            "PATH": f"{self.venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(workdir / "home"),
            "LANG": "C.UTF-8",
            "VIRTUAL_ENV": str(self.venv),
            "PYTHONNOUSERSITE": "1",
            "PIP_CONFIG_FILE": "/dev/null",
            "PIP_NO_INPUT": "1",
            "PIP_NO_CACHE_DIR": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            **network_env(variant.smoke_requirements),
        }
        (workdir / "home").mkdir(parents=True, exist_ok=True)
        self.sandbox: Sandbox | ContainerSandbox | None = None
        self.runtime_dir: Path | None = None
        self.runtime_sonames = variant.runtime_needed
        self.drivers_absent: list[str] = []

    # -- running ---------------------------------------------------------------------------

    def _run(self, argv: Sequence[str], timeout: float = 600) -> Result:
        if self.sandbox is None:
            return run_command(argv, env=self.env, timeout=timeout, cwd=self.workdir)
        return self.sandbox.run(argv, env=self.env, timeout=timeout)

    def _step(
        self, name: str, result: Result | None, ok: bool, detail: str = "", *, output: str = ""
    ) -> None:
        seconds = result.seconds if result is not None else 0.0
        failed_output = tail(result.output) if result is not None else None
        line = self.outcome.add(Step(name, ok, seconds, detail, output), failed_output)
        self.log(f"[{printable(self.python)} {printable(self.image_name)}] {line}")
        if not ok:
            if result is not None:
                self.log(f"  $ {printable(' '.join(result.argv))}  (exit {result.returncode})")
                self.log(
                    "\n".join("  | " + printable(line) for line in self.outcome.output_tail.splitlines())
                )
            raise _Failed

    # -- checks ----------------------------------------------------------------------------

    def prepare(self, interpreter: Path, host_runtime: Sequence[str]) -> None:
        sim = self.image.simulate
        if self.container is not None:
            engine, tag = self.container
            wheels, sonames = self.wheel.parent.resolve(), self.runtime_sonames
            box = ContainerSandbox(
                engine, tag, sim, workdir=self.workdir, wheels=wheels, sonames=sonames,
                devices=self.variant.backend.container,
                extra=requirement_mounts(self.variant.smoke_requirements),
            )  # fmt: skip
            self.sandbox = box
            self.runtime_dir = box.runtime_dir
            self.outcome.runner = self.runner or f"{engine} container {tag}"
            return
        if self.inside:
            # Running inside the real image: its declared layout says where the runtime lives.
            layout = self.image.simulate
            if layout is not None and layout.runtime == "prefix" and layout.prefix:
                self.runtime_dir = Path(layout.prefix)
            elif layout is not None and layout.runtime == "absent":
                self.runtime_dir = None
            else:
                self.runtime_dir = self.runtime_libdir if host_runtime else None
            return
        if self.image_name == HOST_IMAGE or sim is None:
            self.runtime_dir = self.runtime_libdir if host_runtime else None
            return
        if sim.via == "rocm_sdk":  # its venv and stand-in wheels are made in an image only
            msg = f"{self.image_name}: TheRock's pip layout needs a container engine (podman or docker)"
            raise SmokeError(msg)
        binds: list[Bind] = []
        rootfs = None
        if sim.rootfs == "debootstrap-minbase":
            rootfs = ensure_minbase(log=self.log)
            binds = [
                Bind(path=interpreter_home(interpreter)),
                Bind(path=self.workdir, read_only=False),
                Bind(path=self.wheel.parent.resolve()),
                *(Bind(path=d) for d in requirement_mounts(self.variant.smoke_requirements)),
            ]
        runtime = host_runtime if sim.rootfs == "host" else ()
        sandbox = Sandbox(
            self.image_name, sim, workdir=self.workdir, runtime=runtime, libdir=self.runtime_libdir,
            rootfs=rootfs, binds=binds,
        )  # fmt: skip
        self.sandbox = sandbox
        self.runtime_dir = sandbox.runtime_dir
        self.outcome.runner = "namespace simulation (host runtime)" if runtime else "namespace simulation"

    def run(self, interpreter: Path, host_runtime: Sequence[str]) -> Outcome:
        if self.container is not None:
            interpreter = self.container_python or container_interpreter(self.python)
        try:
            self.prepare(interpreter, host_runtime)
            self.check_contents()
            self.create_venv(interpreter)
            self.install()
            self.check_libraries()
            if self.image.expect == "runtime-missing" or self.drivers_absent:
                self.check_import_refused(self.drivers_absent)
                if self.drivers_absent and self.image.expect != "runtime-missing":
                    self.outcome.not_run += verdict.not_run(self.variant, self.drivers_absent)
            else:
                self.check_import()
                gil.check_gil(self.python, self.venv, self.variant, self._run, self._step)
                self.check_runtime_location()
                self.run_commands()
        except _Failed:
            pass
        except SmokeError as exc:
            self.outcome.error = str(exc)
        finally:
            if isinstance(self.sandbox, ContainerSandbox):
                self.sandbox.close()
        return self.outcome

    def check_contents(self) -> None:
        try:
            vendored = vendored_runtime(self.wheel, self.variant)
        except (UsageError, VerifyError) as exc:  # a wheel verify cannot read: said as the step's detail
            self._step("runtime not vendored", None, False, f"cannot inspect the wheel: {exc}")
            return
        detail = f"vendors the runtime: {', '.join(vendored)}" if vendored else ""
        self._step("runtime not vendored", None, not vendored, detail)

    def create_venv(self, interpreter: Path) -> None:
        """The fresh venv `python -m venv` makes. pip is put in it only where the interpreter's
        own pip cannot install into it or a smoke command runs pip; otherwise that pip installs,
        running under the venv's interpreter (`--python`, release.machine.venv)."""
        seed = any(runs_pip(c) for c in (*self.variant.smoke_commands, *self.variant.smoke_self_tests))
        result = self._run(fresh_venv_argv(interpreter, self.venv, seed=seed))
        ok, shared = result.returncode == 0, interpreter_installs(result.stdout)
        self.pip = pip_argv(interpreter, self.venv, seeded=not shared)
        detail = f"installs with the interpreter's {result.stdout.strip()}" if ok and shared else ""
        self._step(f"venv (python {self.python})", result, ok, detail)

    def install(self) -> None:
        try:
            requires = requires_dist(read_metadata(self.wheel))
        except WheelReadError:
            requires = []
        source = self.variant.smoke_requirements
        kept, dropped = left_out(requires, source)
        for argv in install_argvs(self.pip, self.wheel, requires, source):
            result = self._run(argv)
            if result.returncode != 0:
                break
        ok = result.returncode == 0
        why = (missing_source_line(kept, source), self.install_hint)
        skipped = f"left out: {', '.join(dropped)} (engine.smoke.requirements.skip)" if dropped else ""
        detail = skipped if ok else "; ".join(d for d in why if d)
        self._step(f"pip install {self.wheel.name}", result, ok, detail)

    def check_libraries(self) -> None:
        python = str(self.venv / "bin" / "python")
        listed = self._run([python, "-c", ELF_FILES, self.variant.distribution])
        if listed.returncode != 0:
            self._step("shared libraries", listed, False, "cannot list the installed files")
        listing = verdict.last_line_json(listed.stdout, b"[]")
        files = [str(f) for f in listing] if isinstance(listing, list) else []
        if not isinstance(listing, list) or not all(isinstance(f, str) for f in listing):
            self._step("shared libraries", listed, False, "the listing printed no JSON list on its last line")
        if not files:
            self._step("shared libraries", listed, True, "no ELF files")
            return
        ldd = self._run(["ldd", *files])
        missing = missing_libraries(ldd.stdout + ldd.stderr)
        self.drivers_absent = absent_drivers(missing, self.variant)
        # The runtime's libraries, not only the one the import binds: an engine that NEEDs
        # libhsa-runtime64.so.1 too finds it where TheRock's layouts keep it, beside libamdhip64.
        runtime = absent_runtime(missing, self.runtime_sonames, self.variant)
        system = [m for m in missing if m not in runtime and m not in self.drivers_absent]
        if system:
            hints = []
            for soname in system:
                package = host_package(soname)
                hint = f" (install {package})" if package else ""
                hints.append(f"missing system library {soname}{hint}")
            self._step("shared libraries", ldd, False, "; ".join(hints))
        sim = self.image.simulate  # TheRock's layouts: off the loader's path, the import finds it
        own = sim is not None and sim.runtime == "prefix" and sim.via in ("none", "rocm_sdk")
        if runtime and self.image.expect != "runtime-missing" and not own:
            detail = f"the image's loader does not find {', '.join(runtime)}"
            self._step("shared libraries", ldd, False, detail)
        note = f"runtime {', '.join(runtime)} absent, as the image expects" if runtime else ""
        off_path = f"runtime {', '.join(runtime)} off the loader's path, as in the image"
        note = off_path if runtime and own else note
        if self.drivers_absent:  # no GPU here: the import must say that the driver is missing
            note = "; ".join(filter(None, [note, f"GPU driver {', '.join(self.drivers_absent)} absent"]))
        self._step("shared libraries", ldd, True, note)

    def check_import(self) -> None:
        """The engine imports, before and after the image's `companions` (torch), and then its process
        holds one file of each `single_copy` library of the backend."""
        name, companions = self.variant.import_name, self.image.companions
        for modules in [[*companions, name], [name, *companions]] if companions else [[name]]:
            result = self._run(one_copy_argv(self.venv, self.variant.backend.single_copy, modules))
            shown = " then ".join(f"import {m}" for m in modules)
            self._step(shown, result, result.returncode == 0, two_copies(result))

    def check_import_refused(self, drivers: Sequence[str] = ()) -> None:
        """The import refuses in the package's words, naming the absent runtime (or `drivers`)."""
        name = self.variant.import_name
        result = self._run([str(self.venv / "bin" / "python"), "-c", f"import {name}"])
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        message = lines[-1] if lines else ""
        names = list(drivers) or [s.split(".so")[0] for s in self.runtime_sonames]
        problem = refusal_problem(result.returncode, message, names, driver=bool(drivers))
        self._step(f"import {name} refused", result, problem is None, problem or message)

    def check_runtime_location(self) -> None:
        if not self.runtime_sonames or self.runtime_dir is None:
            return
        argv = [
            str(self.venv / "bin" / "python"),
            "-c",
            MAPPED_RUNTIME,
            self.variant.import_name,
            ",".join(self.runtime_sonames),
            str(self.runtime_dir),
        ]
        result = self._run(argv)
        if result.returncode != 0:
            self._step("runtime location", result, False, "cannot read the process's mappings")
        data = verdict.last_object(result.stdout) or {}
        found, dirs, expected = data.get("mapped"), data.get("dirs"), data.get("expected")
        mapped = [str(m) for m in found] if isinstance(found, list) else []
        if not isinstance(found, list) or not isinstance(dirs, list):
            self._step("runtime location", result, False, "the probe's output does not end in its JSON")
        if not mapped:
            self._step("runtime location", result, False, "the runtime was not loaded by the import")
        ok = dirs == [expected]
        detail = f"{mapped[0]}" if ok else f"loaded from {', '.join(mapped)}, expected {self.runtime_dir}"
        self._step("runtime location", result, ok, detail)

    def run_commands(self) -> None:
        """The commands, then the self-tests, judged by release.smoke.verdict; each keeps its output."""
        name, python = self.variant.import_name, str(self.venv / "bin" / "python")
        for command in smoke_commands(self.variant.smoke_commands, self.variant.smoke_self_tests):
            argv = command_argv(command.argv, python=python, bindir=self.venv / "bin", import_name=name)
            result = self._run(argv)
            ok, detail = judge(result.returncode, result.stdout, self_test=command.self_test)
            self._step(shown(command.argv, name), result, ok, detail, output=tail(result.output))
            self.outcome.not_run += verdict.device_not_run(result.stdout, shown(command.argv, name))


def smoke_variant(
    variant: ResolvedVariant,
    *,
    wheelhouse: Path,
    python: str | None = None,
    images: Sequence[str] | None = None,
    in_image: str | None = None,
    log: Callable[[str], None] = print,
    containers: bool = True,
    pull: bool = False,
) -> list[Outcome]:
    """Smoke-test every wheel of a variant (for one Python or all) in every chosen image.

    An image with a local recipe runs in a real container where podman or docker answers
    (`containers`), else in the namespace simulation; with `pull`, a declared serving image
    (`images.<name>.container`) runs in a real container of that reference, pulled first (a CI
    job frees the disk before, which a job-level `container:` cannot), and a failed pull fails
    that leg; without `pull`, a stand-in made from the declared toolkit's Debian runtime runs in
    its place. A wheel this host cannot install (a newer manylinux tag than its glibc) has its
    host legs run in the variant's local build image. Each outcome says which ran
    (`placement.place` decides)."""
    directory = wheelhouse / variant.name
    wheels = wheels_for(directory, variant, python)
    if not wheels:
        what = f" for Python {python}" if python else ""
        build = f"python -m release build --variant {variant.name}"
        build += f" --python {python}" if python else ""
        msg = f"no {variant.distribution} wheel{what} in {directory}: run `{build}` first"
        raise SmokeError(msg)
    found = find_host_runtime(variant)
    host_runtime = found.files if found.matches else ()
    platforms, libc = host_platforms(), host_libc()
    refused = {w: uninstallable(parse_wheel_name(w), platforms, libc) for w in wheels}
    build_recipe = variant.build_image.local_recipe
    # No engine probe (`podman info`) unless a leg could run in a container.
    serving = [i for i in variant.images if i.local is None and i.image.container]
    boxed = any(i.made_here is not None for i in variant.images)
    moved = build_recipe is not None and any(refused.values())
    wanted = containers and in_image is None and (boxed or moved)
    engine = ContainerEngine.answering() if wanted or (pull and serving) else None
    if pull and serving and engine is None:
        msg = "--pull runs the serving images in containers: install podman or docker"
        raise SmokeError(msg)

    def usable(recipe: LocalImage) -> bool:
        return engine is not None and local_image_usable(engine, recipe)

    legs = plan_legs(
        variant, wheels, python=python, images=images, in_image=in_image,
        host_has_runtime=found.usable or not variant.runtime_globs,
        engine=engine, pull=pull, usable=usable, refused=refused,
    )  # fmt: skip
    outcomes: list[Outcome] = []
    root = Path(tempfile.mkdtemp(prefix="release-smoke-"))
    try:
        for leg in legs:
            if leg.skipped:
                log(f"{leg.label} skipped: {leg.skipped}")
                continue
            if leg.where.note:
                log(f"{leg.label} {leg.where.note}")
            workdir = root / f"{leg.wheel.stem}-{leg.python}-{leg.image}"
            workdir.mkdir()
            outcome = _smoke_leg(
                variant, leg.wheel, leg.python, leg.image, leg.where,
                engine=engine, found=found, host_runtime=host_runtime, workdir=workdir, log=log,
                inside=in_image is not None,
            )  # fmt: skip
            outcomes.append(outcome)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return outcomes


def _smoke_leg(
    variant: ResolvedVariant,
    wheel: Path,
    version: str,
    image_name: str,
    where: Placement,
    *,
    engine: ContainerEngine | None,
    found: HostRuntime,
    host_runtime: Sequence[str],
    workdir: Path,
    log: Callable[[str], None],
    inside: bool,
) -> Outcome:
    """One wheel x Python x image, where `where` says; a pull or an image that cannot be made
    fails this leg alone, naming what it could not get."""
    container = (engine, where.container) if engine is not None and where.container is not None else None
    smoke = Smoke(
        variant,
        wheel,
        version,
        image_name,
        where.image,
        workdir=workdir,
        log=log,
        inside=inside,
        container=container,
        runtime_libdir=found.libdir,
        runner=where.runner,
        install_hint=where.install_hint,
    )
    try:
        if container is not None and where.pull is not None:
            container[0].pull(where.pull, log=log)
            smoke.container_python = image_interpreter(container[0], where.pull, version)
        elif container is not None and where.recipe is not None:
            ensure_image(container[0], where.recipe, log=log)
        if container is None and not inside and needs_host_runtime(where.image):
            require_host_runtime(variant, found, image_name)
    except (SmokeError, ToolchainError) as exc:
        if container is None:
            raise
        smoke.outcome.runner = where.runner or f"{container[0]} container {container[1]}"
        smoke.outcome.error = str(exc)
        log(f"[{version} {image_name}] FAILED: {exc}")
        return smoke.outcome
    # A container brings its own interpreter: the host needs this Python only otherwise.
    interpreter = smoke.container_python or (
        container_interpreter(version) if container else require_interpreter(version)
    )
    return smoke.run(interpreter, host_runtime)
