"""Smoke tests in real containers of local images (podman or docker), one container per wheel
and image: started once, every check run in it with `exec`, removed at the end."""

from __future__ import annotations

import itertools
import os
import platform
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from release.config.matrix import Simulation
from release.errors import SmokeError
from release.smoke.image import Result, run_command
from release.wheel.names import manylinux_interpreter

_COUNTER = itertools.count()


class ContainerSandbox:
    """Runs commands in one running container of a local image; paths are shared by bind mounts
    at the same place (the work directory read-write, the wheel's directory read-only)."""

    def __init__(
        self,
        engine: str,
        image: str,
        layout: Simulation | None,
        *,
        workdir: Path,
        wheels: Path,
        sonames: Sequence[str] = (),
        extra: Sequence[Path] = (),
    ) -> None:
        """`extra`: more directories mounted read-only (a declared directory of requirement wheels)."""
        self.engine = engine
        self.image = image
        self.layout = layout
        self.sonames = tuple(sonames)
        self.workdir = workdir
        self.name = f"release-smoke-{os.getpid()}-{next(_COUNTER)}"
        mounts = [(workdir, True), (wheels, False), *((p, False) for p in extra)]
        start_container(engine, image, self.name, mounts=mounts)

    @property
    def runtime_dir(self) -> Path | None:
        """Where the image's loader finds the runtime, as its layout declares: a `system` runtime
        is where the image's loader cache (`ldconfig -p`) has it, the distribution's directory
        unless the image's toolkit install put it elsewhere (CUDA under /usr/local/cuda-X.Y/lib)."""
        sim = self.layout
        if sim is None or sim.runtime == "absent":
            return None
        if sim.runtime == "prefix" and sim.prefix and sim.via == "rocm_sdk":
            return self._sdk_dir(sim.prefix)
        if sim.runtime == "prefix" and sim.prefix:
            return Path(sim.prefix)
        cached = self._cached_dir()
        return cached or Path("/usr/lib") / f"{platform.machine()}-linux-gnu"

    def _sdk_dir(self, venv: str) -> Path | None:
        """The directory of the runtime `rocm_sdk.find_libraries` names in the image's venv (its
        library package's name carries a nonce: asked, never guessed)."""
        short = self.sonames[0].split(".so")[0].removeprefix("lib") if self.sonames else "amdhip64"
        code = f"import os, rocm_sdk; print(os.path.dirname(rocm_sdk.find_libraries({short!r})[0]))"
        result = self.run([f"{venv}/bin/python", "-c", code], timeout=60)
        lines = result.stdout.strip().splitlines()
        return Path(lines[-1]) if result.returncode == 0 and lines else None

    def _cached_dir(self) -> Path | None:
        if not self.sonames:
            return None
        result = self.run(["ldconfig", "-p"], timeout=60)
        for line in result.output.splitlines():
            name, _, path = line.strip().partition(" => ")
            if path and name.split(" ", 1)[0] in self.sonames:
                return Path(path).parent
        return None

    def run(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = 600
    ) -> Result:
        command = [self.engine, "exec", "-w", str(self.workdir)]
        for key, value in (env or {}).items():
            if key == "PATH" or not key.startswith("LD_"):
                command += ["-e", f"{key}={value}"]
        return run_command([*command, self.name, *argv], timeout=timeout, shown=argv)

    def close(self) -> None:
        remove_container(self.engine, self.name)


def start_container(
    engine: str,
    image: str,
    name: str,
    *,
    mounts: Sequence[tuple[Path, bool]],
    flags: Sequence[str] = (),
    timeout: float = 300,
) -> None:
    """Start `name`, a detached container of `image` on the host network that only sleeps:
    commands run in it with `exec`, and `remove_container` ends it. Each (path, writable) mount
    is bound at the same path inside, read-only unless writable; `flags` go to `run` as given.
    `SmokeError` naming the image and the engine's last line when it cannot start."""
    argv = [engine, "run", "-d", "--rm", "--network=host", "--name", name, *flags]
    for path, writable in mounts:
        argv += ["-v", f"{path}:{path}" + ("" if writable else ":ro")]
    argv += ["--entrypoint", "/bin/sh", image, "-c", "sleep 86400"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["no output"]
        msg = f"cannot start a container of {image} ({engine}): {lines[-1]}"
        raise SmokeError(msg)


def remove_container(engine: str, name: str) -> None:
    """Stop and remove a container `start_container` started (quietly: it may be gone already)."""
    subprocess.run([engine, "rm", "-f", name], capture_output=True, check=False, timeout=120)


def interpreter(python: str) -> Path:
    """The image's interpreter for a version, where local images put it (cibuildwheel's layout)."""
    return Path(manylinux_interpreter(python))


def pull(
    engine: str,
    reference: str,
    *,
    log: Callable[[str], None],
    failure: Callable[[str], str] | None = None,
    timeout: float = 3600,
) -> None:
    """The declared serving image, pulled unless the engine already holds it. A failed pull is a
    `SmokeError`: `failure(the engine's stderr)`, else `cannot pull <reference>: <its last line>`;
    one that outlasts `timeout` seconds is one too, naming the reference."""
    present = subprocess.run(
        [engine, "image", "inspect", reference], capture_output=True, check=False, timeout=120
    )
    if present.returncode == 0:
        return
    log(f"pulling {reference} ({engine})")
    argv = [engine, "pull", reference]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        msg = f"cannot pull {reference}: no result within {timeout:.0f} s ({engine} pull)"
        raise SmokeError(msg) from None
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["no output"]
        msg = failure(proc.stderr) if failure else f"cannot pull {reference}: {lines[-1]}"
        raise SmokeError(msg)


def image_python(engine: str, image: str, python: str, fallback: Path) -> str | None:
    """Where the image keeps `python` (a command such as python3.12, or a path): on its PATH,
    else at `fallback` (cibuildwheel's layout, where local images keep it); None when neither."""
    script = f"command -v {python} || {{ test -x {fallback} && echo {fallback}; }}"
    proc = subprocess.run(
        [engine, "run", "--rm", "--entrypoint", "/bin/sh", image, "-c", script],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    found = proc.stdout.strip().splitlines()
    return found[-1] if proc.returncode == 0 and found and found[-1].startswith("/") else None


def image_interpreter(engine: str, reference: str, python: str) -> Path:
    """Where a serving image keeps Python `python`: on its PATH, else cibuildwheel's layout."""
    fallback = interpreter(python)
    found = image_python(engine, reference, f"python{python}", fallback)
    if found is None:
        msg = f"{reference} has no Python {python} (neither python{python} on its PATH nor {fallback})"
        raise SmokeError(msg)
    return Path(found)


STANDINS_ENV = "RELEASE_IMAGE_STANDINS"
"""REF=TAG[,REF=TAG...]: serving images no registry gives here (the rehearsal) and the local
images that stand in for them: `release smoke --pull` and `release hardware --image` run the stand-in
instead of pulling, and a leg run in a stand-in says so in its table."""


def standins(value: str) -> dict[str, str]:
    """The mapping RELEASE_IMAGE_STANDINS spells; a malformed entry is an error naming it."""
    found: dict[str, str] = {}
    for entry in filter(None, (e.strip() for e in value.split(","))):
        reference, sep, tag = entry.rpartition("=")
        if not sep or not reference or not tag:
            msg = f"{STANDINS_ENV}: {entry!r} is not REFERENCE=LOCAL_TAG"
            raise SmokeError(msg)
        found[reference] = tag
    return found
