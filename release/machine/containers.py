"""The one module that speaks to a container engine. A `ContainerEngine` is a value, parsed once
(`ContainerEngine.answering()` probes which one answers here) and handed on: every engine command
line, and cibuildwheel's `CIBW_CONTAINER_ENGINE` string, is a method of it. A `Container` is one
running container of an image with its lifecycle: started by `ContainerEngine.start`, commands run
in it with `exec`, removed by `remove`. Smoke, the hardware tier, the builders, the images, the
emulation and the rehearsal all go through them, so an engine subcommand is spelled here and
nowhere else (tests/unit/test_architecture.py holds it)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from release import process, settings
from release.config.resources import setup_podman_command
from release.errors import SmokeError, ToolchainError
from release.wheel.names import manylinux_interpreter

INPUTS_LABEL = "io.release.image.inputs"
"""The inputs hash of an image made from a recipe (`release.machine.imaging`): the image a later
make of the same recipe takes as it is."""
DERIVED_LABEL = "io.release-toolkit.derived"
"""Set on an image `commit_script` commits over another: never the base's recipe, whatever it
inherited (a cross image over a build image once carried the build image's inputs label, and a
later make of that recipe took the cross image for it)."""

ENGINES = ("podman", "docker")
"""The engines the toolkit drives, in the order `answering` asks them."""
REMOTE_VARIABLES = {"podman": ("CONTAINER_HOST", "CONTAINER_CONNECTION"), "docker": ("DOCKER_HOST",)}
"""The variables that point an engine's client at a service elsewhere (another machine, or this
one's from inside a container), where a bind mount names that service's paths, not this machine's."""

Mount = tuple[Path, bool]
"""A host path bound at the same path inside, and whether it is writable."""


class ContainerStepFailed(Exception):
    """A container step of `commit_script` that did not succeed (the caller says what it was for)."""


def _volumes(mounts: Mapping[Path, str] | None) -> list[str]:
    return [word for host, inside in (mounts or {}).items() for word in ("-v", f"{host}:{inside}")]


def _last(proc: process.Result) -> str:
    return (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]


@dataclass(frozen=True)
class ContainerEngine:
    """A container engine: `command` runs its client (`podman`, `docker`, or a path to one). Its
    `name` is what messages and cibuildwheel call it."""

    command: str

    @property
    def name(self) -> str:
        return Path(self.command).name

    def __str__(self) -> str:
        return self.name

    @classmethod
    def answering(cls) -> ContainerEngine | None:
        """`podman` or `docker` when one answers (a client without a daemon does not count)."""
        for name in ENGINES:
            path = shutil.which(name)
            if path is None:
                continue
            if process.run([path, "info"], timeout=30).returncode == 0:
                return cls(name)
        return None

    def _argv(self, *words: str) -> list[str]:
        return [self.command, *words]

    # -- what the engine is -------------------------------------------------------------------

    def remote(self, environ: Mapping[str, str] | None = None) -> str | None:
        """`NAME=value` of the variable that makes this engine a remote client, or None (local)."""
        for name in REMOTE_VARIABLES.get(self.name, ()):
            value = settings.raw(name, environ)
            if value:
                return f"{name}={value}"
        return None

    def cibuildwheel(self, volumes: Sequence[tuple[Path | str, str]] = ()) -> str:
        """cibuildwheel's `CIBW_CONTAINER_ENGINE`: this engine, the host network, and each
        (host, inside[:ro]) of `volumes` bound into the build container."""
        words = ["--network=host", *(shlex.quote(f"--volume={host}:{inside}") for host, inside in volumes)]
        return f"{self.name}; create_args: {' '.join(words)}"

    # -- images -------------------------------------------------------------------------------

    def inspect(self, reference: str, template: str | None = None, *, timeout: float = 120) -> str | None:
        """`image inspect` of `reference` (with a Go `template`): its output, None when the image is
        not here (or the engine cannot be asked)."""
        argv = self._argv("image", "inspect", *(("--format", template) if template else ()), reference)
        try:
            proc = process.run(argv, timeout=timeout)
        except (OSError, process.TimedOut):
            return None
        return proc.stdout if proc.returncode == 0 else None

    def has_image(self, reference: str) -> bool:
        return self.inspect(reference) is not None

    def image_id(self, reference: str) -> str | None:
        """The image's ID, None when it is not here."""
        found = (self.inspect(reference, "{{.Id}}") or "").strip()
        return found or None

    def label(self, reference: str, key: str) -> str:
        """The image's label `key`; '' when it has none or is not here."""
        return (self.inspect(reference, f'{{{{index .Labels "{key}"}}}}') or "").strip()

    def labelled(self, key: str, value: str, template: str) -> process.Result:
        """`images` labelled `key=value`, one `template` line each (the caller retries a failure)."""
        argv = self._argv("images", "--noheading", "--filter", f"label={key}={value}", "--format", template)
        return process.run(argv, timeout=300)

    def tag(self, source: str, tag: str) -> None:
        """`source` also named `tag`; ContainerStepFailed naming both when it cannot be."""
        proc = process.run(self._argv("tag", source, tag), timeout=300)
        if proc.returncode != 0:
            msg = f"{self.name} tag {source} {tag} failed: {_last(proc)}"
            raise ContainerStepFailed(msg)

    def remove_image(self, reference: str) -> None:
        """Remove the image (quietly: another name may still hold it)."""
        process.run(self._argv("rmi", reference), timeout=300)

    def pull(
        self,
        reference: str,
        *,
        log: Callable[[str], None],
        failure: Callable[[str], str] | None = None,
        timeout: float = 3600,
    ) -> None:
        """The image, pulled unless the engine already holds it. A failed pull is a `SmokeError`:
        `failure(the engine's stderr)`, else `cannot pull <reference>: <its last line>`; one that
        outlasts `timeout` seconds is one too, naming the reference."""
        if self.has_image(reference):
            return
        log(f"pulling {reference} ({self})")
        try:
            proc = process.run(self._argv("pull", reference), timeout=timeout)
        except process.TimedOut:
            msg = f"cannot pull {reference}: no result within {timeout:.0f} s ({self} pull)"
            raise SmokeError(msg) from None
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines() or ["no output"]
            msg = failure(proc.stderr) if failure else f"cannot pull {reference}: {lines[-1]}"
            raise SmokeError(msg)

    def pulled_id(self, reference: str, *, timeout: float = 1800) -> str | None:
        """The image's ID after pulling it (quietly; None when it cannot be had)."""
        try:
            process.run(self._argv("pull", reference), timeout=timeout)
        except (OSError, process.TimedOut):
            return None
        return self.image_id(reference)

    # -- containers ---------------------------------------------------------------------------

    def run_script(
        self,
        image: str,
        script: str,
        *,
        network: str = "none",
        timeout: float = 300,
        mounts: Mapping[Path, str] | None = None,
    ) -> process.Result:
        """`script` run by /bin/sh in one `--rm` container of `image` (no network unless `network`
        says; each host directory of `mounts` at its path in the container), its output captured as
        text; a run past `timeout` raises `process.TimedOut`."""
        argv = self._argv("run", "--rm", f"--network={network}", *_volumes(mounts),
                          "--entrypoint", "/bin/sh", image, "-c", script)  # fmt: skip
        return process.run(argv, timeout=timeout)

    def commit_script(
        self,
        image: str,
        script: str,
        tag: str,
        *,
        name: str,
        labels: Mapping[str, str],
        network: str = "none",
        timeout: float = 1800,
        mounts: Mapping[Path, str] | None = None,
    ) -> None:
        """`script` run by /bin/sh in a container `name` of `image`, its output shown as it comes,
        the container committed as `tag` with `labels`, then removed (also on failure). The
        committed image drops the inputs label it inherits (it is not the base's recipe), is marked
        DERIVED_LABEL, and gets back a plain entrypoint and command (the run's /bin/sh -c SCRIPT
        stays out of it). A failed script or commit raises `ContainerStepFailed` naming the step;
        past `timeout`, `process.TimedOut`."""
        container = Container(self, image, name)
        container.remove()
        try:
            argv = self._argv("run", "--name", name, f"--network={network}", *_volumes(mounts),
                              "--entrypoint", "/bin/sh", image, "-c", script)  # fmt: skip
            ran = process.stream(argv, timeout=timeout)
            if ran.returncode != 0:
                msg = f"the script in a container of {image} exited {ran.returncode} (its output is above)"
                raise ContainerStepFailed(msg)
            marks = {INPUTS_LABEL: "", DERIVED_LABEL: image, **labels}
            changes = [word for key, value in marks.items() for word in ("--change", f"LABEL {key}={value}")]
            changes += ["--change", "ENTRYPOINT []", "--change", 'CMD ["/bin/bash"]']
            committed = process.run(self._argv("commit", "-q", *changes, name, tag), timeout=300)
            if committed.returncode != 0:
                msg = f"committing {tag} failed: {committed.last_line()}"
                raise ContainerStepFailed(msg)
        finally:
            container.remove()

    def start(
        self,
        image: str,
        name: str,
        *,
        mounts: Sequence[Mount],
        flags: Sequence[str] = (),
        timeout: float = 300,
    ) -> Container:
        """A detached container `name` of `image` on the host network that only sleeps: commands
        run in it with `exec`, and `remove` ends it. Each (path, writable) mount is bound at the
        same path inside, read-only unless writable; `flags` go to `run` as given. `SmokeError`
        naming the image and the engine's last line when it cannot start."""
        argv = self._argv("run", "-d", "--rm", "--network=host", "--name", name, *flags)
        for path, writable in mounts:
            argv += ["-v", f"{path}:{path}" + ("" if writable else ":ro")]
        argv += ["--entrypoint", "/bin/sh", image, "-c", "sleep 86400"]
        proc = process.run(argv, timeout=timeout)
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines() or ["no output"]
            msg = f"cannot start a container of {image} ({self}): {lines[-1]}"
            raise SmokeError(msg)
        return Container(self, image, name)

    def service(self, socket: Path, *, log: IO[Any]) -> subprocess.Popen[bytes]:
        """The engine's API service on `socket` (podman's: a client elsewhere drives this engine
        through it), started to outlive this call; its owner stops it."""
        return process.start(self._argv("system", "service", "--time=0", f"unix://{socket}"), stdout=log)


@dataclass(frozen=True)
class Container:
    """One container `name` of `image`, run by `engine`: commands run in it with `exec`."""

    engine: ContainerEngine
    image: str
    name: str

    def prefix(self, env: Mapping[str, str] | None = None, *, workdir: Path | None = None) -> list[str]:
        """The words before a command that run it in this container with `env` (each variable
        passed with `-e`), in `workdir` when given."""
        words = [self.engine.command, "exec", *(["-w", str(workdir)] if workdir is not None else [])]
        for key, value in (env or {}).items():
            words += ["-e", f"{key}={value}"]
        return [*words, self.name]

    def exec(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = 600
    ) -> process.Result:
        """`argv` run in this container, its output captured."""
        return process.run([*self.prefix(env), *argv], timeout=timeout)

    def remove(self) -> None:
        """Stop and remove the container (quietly: it may be gone already)."""
        process.run([self.engine.command, "rm", "-f", self.name], timeout=120)


def interpreter(python: str) -> Path:
    """The image's interpreter for a version, where local images put it (cibuildwheel's layout)."""
    return Path(manylinux_interpreter(python))


def image_python(engine: ContainerEngine, image: str, python: str, fallback: Path) -> str | None:
    """Where the image keeps `python` (a command such as python3.12, or a path): on its PATH,
    else at `fallback` (cibuildwheel's layout, where local images keep it); None when neither."""
    script = f"command -v {python} || {{ test -x {fallback} && echo {fallback}; }}"
    proc = engine.run_script(image, script, timeout=600)
    found = proc.stdout.strip().splitlines()
    return found[-1] if proc.returncode == 0 and found and found[-1].startswith("/") else None


def image_interpreter(engine: ContainerEngine, reference: str, python: str) -> Path:
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


def require_engine() -> ContainerEngine:
    """podman or docker, whichever answers; otherwise the one line that says how to get one."""
    engine = ContainerEngine.answering()
    if engine is None:
        msg = (
            "--container needs podman or docker, and neither answers here: install podman "
            f"(`{setup_podman_command()}`: Debian's podman and runc, set up for hosts like ours), "
            "or drop --container to build on the host"
        )
        raise ToolchainError(msg)
    return engine
