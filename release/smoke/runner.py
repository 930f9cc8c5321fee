"""`release smoke`: install the exact wheel files in fresh environments and simulated images.

For every wheel of a variant (and Python) in `wheelhouse/<variant>/`, and for every image the
variant declares (plus `host`, a fresh venv on this machine), the smoke test creates a fresh venv
with the matrix's interpreter, installs that one file with `pip install --no-index`, checks the
shared libraries with the image's own loader, imports the engine, proves where the GPU runtime
was loaded from, and runs `engine.smoke.commands`. Images that expect `runtime-missing` must
refuse the import with the toolkit's message (naming the runtime), never a bare loader error.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from release.build.images import ensure as ensure_image
from release.build.images import exists as image_exists
from release.build.interpreters import require_interpreter
from release.build.toolchain import container_engine
from release.config.matrix import Image
from release.errors import SmokeError
from release.inspect.rules.registry import matches
from release.plan.resolve import LocalImage, ResolvedVariant
from release.smoke.container import ContainerSandbox, image_interpreter
from release.smoke.container import interpreter as container_interpreter
from release.smoke.container import pull as pull_image
from release.smoke.hostruntime import find_host_runtime, needs_host_runtime, require_host_runtime
from release.smoke.image import (
    Bind,
    Result,
    Sandbox,
    distribution_libdir,
    ensure_minbase,
    host_package,
    missing_libraries,
    run_command,
)
from release.smoke.outcome import Outcome, Step
from release.smoke.selection import (
    HOST_IMAGE,
    declared_image,
    images_for,
    smoke_pythons,
    wheels_for,
)
from release.wheel.archive import WheelReadError, read_metadata, requires_dist
from release.wheel.files import file_sha256

TAIL_LINES = 25

_ELF_FILES = """
import json, sys
from importlib.metadata import distribution
found = []
for f in distribution(sys.argv[1]).files or ():
    p = f.locate()
    try:
        with open(p, "rb") as s:
            if s.read(4) == b"\\x7fELF":
                found.append(str(p))
    except OSError:
        pass
print(json.dumps(found))
"""

_MAPPED_RUNTIME = """
import importlib, json, os, sys
importlib.import_module(sys.argv[1])
prefixes = tuple(sys.argv[2].split(","))
mapped = []
with open("/proc/self/maps") as maps:
    for line in maps:
        parts = line.split(None, 5)
        path = parts[5].strip() if len(parts) == 6 else ""
        if os.path.basename(path).startswith(prefixes) and path not in mapped:
            mapped.append(path)
print(json.dumps({"mapped": mapped, "dirs": sorted({os.path.realpath(os.path.dirname(p)) for p in mapped}),
                  "expected": os.path.realpath(sys.argv[3])}))
"""

# The loader's own words as the whole message: what the user must never be left with.
_BARE_LOADER_ERROR = re.compile(r"^\w*(?:Error|Exception): \S+\.so[.\d]*: cannot open shared object file")


class _Failed(Exception):
    """A check failed; the outcome already says why."""


def vendored_runtime(wheel: Path, globs: Sequence[str]) -> list[str]:
    """Files inside the wheel that match the excluded libraries' globs (also under the name they
    had before auditwheel grafted them with a hash suffix, as verify matches them)."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    return [n for n in names if matches(Path(n).name, globs)]


def tail(text: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def interpreter_home(python: Path) -> Path:
    """The installation directory of an interpreter (what a rootfs image needs bind-mounted)."""
    home = python.resolve().parent.parent
    if home in (Path("/"), Path("/usr"), Path("/usr/local")):
        msg = (
            f"{python} belongs to the host system ({home}); a rootfs image needs a self-contained "
            "interpreter (pyenv or python-build-standalone)"
        )
        raise SmokeError(msg)
    return home


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
        container: tuple[str, str] | None = None,
        container_python: Path | None = None,
        runtime_libdir: Path | None = None,
    ) -> None:
        """`container`: (engine, image tag) to run the checks in a real container of that image,
        with its interpreter at `container_python` (default: cibuildwheel's layout);
        `runtime_libdir`: where the host's runtime files are (default: the distribution's directory)."""
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
        }
        (workdir / "home").mkdir(parents=True, exist_ok=True)
        self.sandbox: Sandbox | ContainerSandbox | None = None
        self.runtime_dir: Path | None = None
        self.runtime_sonames = variant.runtime_needed

    # -- running ---------------------------------------------------------------------------

    def _run(self, argv: Sequence[str], timeout: float = 600) -> Result:
        if self.sandbox is None:
            return run_command(argv, env=self.env, timeout=timeout, cwd=self.workdir)
        return self.sandbox.run(argv, env=self.env, timeout=timeout)

    def _step(self, name: str, result: Result | None, ok: bool, detail: str = "") -> None:
        seconds = result.seconds if result is not None else 0.0
        self.outcome.steps.append(Step(name, ok, seconds, detail))
        mark = "ok" if ok else "FAILED"
        extra = f": {detail}" if detail else ""
        self.log(f"[{self.python} {self.image_name}] {name} ... {mark} ({seconds:.1f}s){extra}")
        if not ok:
            self.outcome.error = f"{name}: {detail}" if detail else name
            if result is not None:
                self.outcome.output_tail = tail(result.output)
                self.log(f"  $ {' '.join(result.argv)}  (exit {result.returncode})")
                self.log("\n".join("  | " + line for line in self.outcome.output_tail.splitlines()))
            raise _Failed

    # -- checks ----------------------------------------------------------------------------

    def prepare(self, interpreter: Path, host_runtime: Sequence[str]) -> None:
        sim = self.image.simulate
        if self.container is not None:
            engine, tag = self.container
            box = ContainerSandbox(engine, tag, sim, workdir=self.workdir, wheels=self.wheel.parent.resolve())
            self.sandbox = box
            self.runtime_dir = box.runtime_dir
            self.outcome.runner = f"{engine} container {tag}"
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
        binds: list[Bind] = []
        rootfs = None
        if sim.rootfs == "debootstrap-minbase":
            rootfs = ensure_minbase(log=self.log)
            binds = [
                Bind(path=interpreter_home(interpreter)),
                Bind(path=self.workdir, read_only=False),
                Bind(path=self.wheel.parent.resolve()),
            ]
        runtime = host_runtime if sim.rootfs == "host" else ()
        sandbox = Sandbox(
            self.image_name,
            sim,
            workdir=self.workdir,
            runtime=runtime,
            libdir=self.runtime_libdir,
            rootfs=rootfs,
            binds=binds,
        )
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
            if self.image.expect == "runtime-missing":
                self.check_import_refused()
            else:
                self.check_import()
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
        vendored = vendored_runtime(self.wheel, self.variant.excludes)
        detail = f"vendors the runtime: {', '.join(vendored)}" if vendored else ""
        self._step("runtime not vendored", None, not vendored, detail)

    def create_venv(self, interpreter: Path) -> None:
        result = self._run([str(interpreter), "-m", "venv", str(self.venv)])
        self._step(f"venv (python {self.python})", result, result.returncode == 0)

    def install(self) -> None:
        argv = [str(self.venv / "bin" / "python"), "-m", "pip", "install", "--no-index"]
        if self._requires_dist():
            argv += ["--find-links", str(self.wheel.parent.resolve())]
        argv.append(str(self.wheel.resolve()))
        result = self._run(argv)
        self._step(f"pip install {self.wheel.name}", result, result.returncode == 0)

    def _requires_dist(self) -> bool:
        try:
            return bool(requires_dist(read_metadata(self.wheel)))
        except WheelReadError:
            return False

    def check_libraries(self) -> None:
        python = str(self.venv / "bin" / "python")
        listed = self._run([python, "-c", _ELF_FILES, self.variant.distribution])
        if listed.returncode != 0:
            self._step("shared libraries", listed, False, "cannot list the installed files")
        files = json.loads(listed.stdout or "[]")
        if not files:
            self._step("shared libraries", listed, True, "no ELF files")
            return
        ldd = self._run(["ldd", *files])
        missing = missing_libraries(ldd.stdout + ldd.stderr)
        runtime = [m for m in missing if m.startswith(self.runtime_sonames) and self.runtime_sonames]
        system = [m for m in missing if m not in runtime]
        if system:
            hints = []
            for soname in system:
                package = host_package(soname)
                hint = f" (install {package})" if package else ""
                hints.append(f"missing system library {soname}{hint}")
            self._step("shared libraries", ldd, False, "; ".join(hints))
        if runtime and self.image.expect != "runtime-missing":
            detail = f"the image's loader does not find {', '.join(runtime)}"
            self._step("shared libraries", ldd, False, detail)
        note = f"runtime {', '.join(runtime)} absent, as the image expects" if runtime else ""
        self._step("shared libraries", ldd, True, note)

    def check_import(self) -> None:
        name = self.variant.import_name
        result = self._run([str(self.venv / "bin" / "python"), "-c", f"import {name}"])
        self._step(f"import {name}", result, result.returncode == 0)

    def check_import_refused(self) -> None:
        name = self.variant.import_name
        result = self._run([str(self.venv / "bin" / "python"), "-c", f"import {name}"])
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        message = lines[-1] if lines else ""
        stems = [s.split(".so")[0] for s in self.runtime_sonames]
        if result.returncode == 0:
            self._step(f"import {name} refused", result, False, "the import succeeded without the runtime")
        if _BARE_LOADER_ERROR.search(message):
            self._step(f"import {name} refused", result, False, f"bare loader error: {message}")
        if stems and not any(stem in message for stem in stems):
            self._step(f"import {name} refused", result, False, f"the message does not name {stems[0]}")
        self._step(f"import {name} refused", result, True, message)

    def check_runtime_location(self) -> None:
        if not self.runtime_sonames or self.runtime_dir is None:
            return
        argv = [
            str(self.venv / "bin" / "python"),
            "-c",
            _MAPPED_RUNTIME,
            self.variant.import_name,
            ",".join(self.runtime_sonames),
            str(self.runtime_dir),
        ]
        result = self._run(argv)
        if result.returncode != 0:
            self._step("runtime location", result, False, "cannot read the process's mappings")
        data = json.loads(result.stdout)
        mapped, dirs, expected = data["mapped"], data["dirs"], data["expected"]
        if not mapped:
            self._step("runtime location", result, False, "the runtime was not loaded by the import")
        ok = dirs == [expected]
        detail = f"{mapped[0]}" if ok else f"loaded from {', '.join(mapped)}, expected {self.runtime_dir}"
        self._step("runtime location", result, ok, detail)

    def run_commands(self) -> None:
        python = str(self.venv / "bin" / "python")
        for command in self.variant.smoke_commands:
            argv = [python if part == "{python}" else part for part in command]
            if argv[0] != python and (self.venv / "bin" / argv[0]).exists():
                argv[0] = str(self.venv / "bin" / argv[0])
            shown = " ".join(command).replace("{python}", "python")
            result = self._run(argv)
            if result.returncode != 0:
                self._step(shown, result, False, f"exit {result.returncode}")
            verdict = _json_ok(result.stdout)
            self._step(
                shown,
                result,
                verdict is not False,
                "" if verdict is None else "ok: true" if verdict else "reported ok: false",
            )


def _json_ok(stdout: str) -> bool | None:
    """The `ok` value of a JSON object printed on stdout; None when there is none."""
    try:
        data = json.loads(stdout)
    except ValueError:
        return None
    if isinstance(data, dict) and "ok" in data:
        return data["ok"] is True
    return None


def local_image_usable(engine: str, recipe: LocalImage) -> bool:
    """Whether a local image can run here: root makes it when absent (make-image.sh needs root),
    anyone else uses it only when it exists."""
    return os.geteuid() == 0 or image_exists(engine, recipe.tag)


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
    job frees the disk before, which a job-level `container:` cannot). Each outcome says which ran."""
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
    local = {i.name: i.local for i in variant.images if i.local is not None}
    # Only images with a local recipe run in containers: no engine probe (`podman info`) without one.
    serving = {i.name: i.image.container for i in variant.images if i.local is None and i.image.container}
    engine = container_engine() if (containers and local) or (pull and serving) else None
    if pull and serving and engine is None:
        msg = "--pull runs the serving images in containers: install podman or docker"
        raise SmokeError(msg)
    outcomes: list[Outcome] = []
    root = Path(tempfile.mkdtemp(prefix="release-smoke-"))
    try:
        for wheel, version in ((w, v) for w in wheels for v in smoke_pythons(w, variant, python)):
            has_runtime = found.usable or not variant.runtime_globs
            pairs = images_for(variant, images, host_has_runtime=has_runtime)
            if in_image is not None:
                pairs = [(in_image, declared_image(variant, in_image))]
            for image_name, image in pairs:
                if image.python and version not in image.python:
                    continue
                reference = serving.get(image_name) if pull and in_image is None else None
                if image.simulate is None and in_image is None and reference is None:
                    log(f"[{version} {image_name}] skipped: no simulation and no container engine here")
                    continue
                workdir = root / f"{wheel.stem}-{version}-{image_name}"
                workdir.mkdir()
                recipe = local.get(image_name) if in_image is None else None
                container = None
                container_python = None
                if engine is not None and reference is not None:
                    pull_image(engine, reference, log=log)
                    container_python = image_interpreter(engine, reference, version)
                    container = (engine, reference)
                elif engine is not None and recipe is not None and version in recipe.pythons:
                    if local_image_usable(engine, recipe):
                        ensure_image(engine, recipe, log=log)
                        container = (engine, recipe.tag)
                    else:  # make-image.sh needs root (debootstrap, rootful podman)
                        log(f"[{version} {image_name}] {recipe.tag} is absent, only root makes it: simulated")
                if container is None and in_image is None and needs_host_runtime(image):
                    require_host_runtime(variant, found, image_name)
                smoke = Smoke(
                    variant,
                    wheel,
                    version,
                    image_name,
                    image,
                    workdir=workdir,
                    log=log,
                    inside=in_image is not None,
                    container=container,
                    container_python=container_python,
                    runtime_libdir=found.libdir,
                )
                # A container brings its own interpreter: the host needs this Python only otherwise.
                interpreter = container_python or (
                    container_interpreter(version) if container else require_interpreter(version)
                )
                outcomes.append(smoke.run(interpreter, host_runtime))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return outcomes
