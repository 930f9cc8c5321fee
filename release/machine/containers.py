"""The one module that runs containers: which engine answers (`container_engine`), a one-shot
script in an image (`run_script`), a long-lived container that commands `exec` into
(`start_container`, `remove_container`), pulling a declared image (`pull`), where an image keeps
its Python (`image_interpreter`), and the local stand-ins of images no registry gives here
(`standins`). Smoke, the hardware tier, the images and the rehearsal all go through it, so a
container's argv is assembled here and nowhere else."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from release import process
from release.errors import SmokeError
from release.wheel.names import manylinux_interpreter

INPUTS_LABEL = "io.release.image.inputs"
"""The inputs hash of an image made from a recipe (`release.machine.imaging`): the image a later
make of the same recipe takes as it is."""
DERIVED_LABEL = "io.release-toolkit.derived"
"""Set on an image `commit_script` commits over another: never the base's recipe, whatever it
inherited (a cross image over a build image once carried the build image's inputs label, and a
later make of that recipe took the cross image for it)."""


def container_engine() -> str | None:
    """`docker` or `podman` when one answers (a client without a daemon does not count)."""
    for name in ("podman", "docker"):
        path = shutil.which(name)
        if path is None:
            continue
        probe = process.run([path, "info"], timeout=30)
        if probe.returncode == 0:
            return name
    return None


REMOTE_VARIABLES = {"podman": ("CONTAINER_HOST", "CONTAINER_CONNECTION"), "docker": ("DOCKER_HOST",)}
"""The variables that point an engine's client at a service elsewhere (another machine, or this
one's from inside a container), where a bind mount names that service's paths, not this machine's."""


def remote_engine(engine: str) -> str | None:
    """`NAME=value` of the variable that makes `engine` a remote client, or None (a local engine)."""
    for name in REMOTE_VARIABLES.get(Path(engine).name, ()):
        if os.environ.get(name):
            return f"{name}={os.environ[name]}"
    return None


def run_script(
    engine: str,
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
    volumes = [word for host, inside in (mounts or {}).items() for word in ("-v", f"{host}:{inside}")]
    argv = [
        engine,
        "run",
        "--rm",
        f"--network={network}",
        *volumes,
        "--entrypoint",
        "/bin/sh",
        image,
        "-c",
        script,
    ]
    return process.run(argv, timeout=timeout)


def commit_script(
    engine: str,
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
    """`script` run by /bin/sh in a container `name` of `image`, its output shown as it comes, the
    container committed as `tag` with `labels`, then removed (also on failure). The committed image
    drops the inputs label it inherits (it is not the base's recipe), is marked DERIVED_LABEL, and
    gets back a plain entrypoint and command (the run's /bin/sh -c SCRIPT stays out of it). A failed
    script or commit raises `ContainerStepFailed` naming the step; past `timeout`, `process.TimedOut`."""
    volumes = [word for host, inside in (mounts or {}).items() for word in ("-v", f"{host}:{inside}")]
    process.run([engine, "rm", "-f", name], timeout=60)
    try:
        argv = [engine, "run", "--name", name, f"--network={network}", *volumes, "--entrypoint", "/bin/sh",
                image, "-c", script]  # fmt: skip
        ran = process.stream(argv, timeout=timeout)
        if ran.returncode != 0:
            msg = f"the script in a container of {image} exited {ran.returncode} (its output is above)"
            raise ContainerStepFailed(msg)
        marks = {INPUTS_LABEL: "", DERIVED_LABEL: image, **labels}
        changes = [word for key, value in marks.items() for word in ("--change", f"LABEL {key}={value}")]
        changes += ["--change", "ENTRYPOINT []", "--change", 'CMD ["/bin/bash"]']
        committed = process.run([engine, "commit", "-q", *changes, name, tag], timeout=300)
        if committed.returncode != 0:
            msg = f"committing {tag} failed: {committed.last_line()}"
            raise ContainerStepFailed(msg)
    finally:
        process.run([engine, "rm", "-f", name], timeout=60)


class ContainerStepFailed(Exception):
    """A container step of `commit_script` that did not succeed (the caller says what it was for)."""


def exec_prefix(engine: str, name: str, env: Mapping[str, str], *, workdir: Path | None = None) -> list[str]:
    """The words before a command that run it in the running container `name` with `env` (each
    variable passed with `-e`), in `workdir` when given."""
    words = [engine, "exec", *(["-w", str(workdir)] if workdir is not None else [])]
    for key, value in env.items():
        words += ["-e", f"{key}={value}"]
    return [*words, name]


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
    proc = process.run(argv, timeout=timeout)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["no output"]
        msg = f"cannot start a container of {image} ({engine}): {lines[-1]}"
        raise SmokeError(msg)


def remove_container(engine: str, name: str) -> None:
    """Stop and remove a container `start_container` started (quietly: it may be gone already)."""
    process.run([engine, "rm", "-f", name], timeout=120)


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
    present = process.run([engine, "image", "inspect", reference], timeout=120)
    if present.returncode == 0:
        return
    log(f"pulling {reference} ({engine})")
    argv = [engine, "pull", reference]
    try:
        proc = process.run(argv, timeout=timeout)
    except process.TimedOut:
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
    proc = run_script(engine, image, script, timeout=600)
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
