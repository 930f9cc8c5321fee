"""A hardware leg inside its serving image: the GPU devices the host has, passed to one long-lived
container of the image, every command of the leg run in it with `exec` as the image's own user,
paths shared by bind mounts at the same place (so the leg's files are the same paths inside and
out), and what the container wrote handed back to the caller's user at the end."""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from release.machine.containers import ContainerEngine

_COUNTER = itertools.count()


@dataclass(frozen=True)
class HostDevices:
    """What the host shows of its GPUs (probed once by `host_devices`)."""

    kfd: bool
    """/dev/kfd: the AMD compute driver."""
    dri: bool
    """/dev/dri: the render nodes AMD GPUs are opened through."""
    nvidia_smi: bool
    """nvidia-smi on PATH: the NVIDIA driver (and, for containers, its container toolkit)."""


def host_devices() -> HostDevices:
    return HostDevices(
        kfd=Path("/dev/kfd").exists(),
        dri=Path("/dev/dri").is_dir(),
        nvidia_smi=shutil.which("nvidia-smi") is not None,
    )


def device_flags(devices: HostDevices) -> list[str]:
    """`docker run`/`podman run` flags that hand the host's GPUs to a container; none without GPUs.

    AMD: the compute driver and the render nodes, and the `video` group that owns them. NVIDIA:
    `--gpus all` (the NVIDIA container toolkit)."""
    flags: list[str] = []
    if devices.kfd:
        flags += ["--device=/dev/kfd"]
        if devices.dri:
            flags += ["--device=/dev/dri"]
        flags += ["--group-add", "video"]
    if devices.nvidia_smi:
        flags += ["--gpus", "all"]
    return flags


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
        flags: Sequence[str],
        timeout: float = 300,
    ) -> None:
        name = f"release-hardware-{os.getpid()}-{next(_COUNTER)}"
        self.writable = [path for path, writable in mounts if writable]
        flags = ["--ipc=host", "-e", "HOME=/tmp", *flags]
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
