"""A hardware leg inside its serving image: the GPU devices its backend declares (as far as the
host has them: `release.machine.devices`), passed to one long-lived container of the image, every
command of the leg run in it with `exec` as the image's own user, paths shared by bind mounts at
the same place (so the leg's files are the same paths inside and out), and what the container
wrote handed back to the caller's user at the end."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from release.config.devices import ContainerDevices
from release.machine.containers import ContainerEngine
from release.machine.devices import device_flags

_COUNTER = itertools.count()


def pull_failure(reference: str, engine: ContainerEngine, stderr: str, declared: str = "matrix.yaml") -> str:
    """The message for a serving image that cannot be pulled: the reference and what fixes it.
    `declared`: where the reference is written (`matrix.yaml: images.vllm-rocm.container`)."""
    lines = stderr.strip().splitlines() or ["no output"]
    name, _, digest = reference.partition("@")
    if digest:
        fix = (
            f"the digest {digest} is pinned in {declared}; if the registry no longer serves it, "
            f"pin the image again: `skopeo inspect docker://{name}` (or `docker buildx imagetools "
            f"inspect {name}`) prints the current digest; write `{name}@sha256:<digest>` there. "
            "If the registry is unreachable from this runner, "
            f"`{engine} pull {reference}` ahead of the run, or give it access to the registry"
        )
    else:
        fix = (
            f"check that the tag exists (`skopeo inspect docker://{reference}`), pin it by digest in "
            f"{declared}, and that this runner reaches the registry"
        )
    return f"cannot pull the serving image {reference} ({engine}: {lines[-1]}): {fix}"


def ensure_image(
    engine: ContainerEngine, reference: str, log: Callable[[str], None], declared: str = "matrix.yaml"
) -> None:
    """The serving image, pulled unless the engine already holds it; a failure names the fix."""
    engine.pull(reference, log=log, failure=lambda stderr: pull_failure(reference, engine, stderr, declared))


class Container:
    """One running container of the serving image for one leg, removed by `close`."""

    def __init__(
        self,
        engine: ContainerEngine,
        image: str,
        *,
        mounts: Sequence[tuple[Path, bool]],
        devices: ContainerDevices,
        timeout: float = 300,
    ) -> None:
        """`devices`: the leg's backend's device needs (none under emulation)."""
        name = f"release-hardware-{os.getpid()}-{next(_COUNTER)}"
        self.writable = [path for path, writable in mounts if writable]
        self.devices = device_flags(devices)
        flags = ["-e", "HOME=/tmp", *self.devices]
        self.container = engine.start(image, name, mounts=mounts, flags=flags, timeout=timeout)

    def prefix(self, env: dict[str, str]) -> list[str]:
        """The words before a command that run it in this container with `env`."""
        return self.container.prefix(dict(sorted(env.items())))

    def close(self) -> None:
        """Hand what the image's user (root, in serving images) wrote back to us, then remove it."""
        if self.writable and os.getuid() != 0:
            owner = f"{os.getuid()}:{os.getgid()}"
            self.container.exec(["chown", "-R", owner, *map(str, self.writable)], timeout=300)
        self.container.remove()
