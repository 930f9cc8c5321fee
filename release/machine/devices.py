"""A backend's device needs (`packaging/backends/<name>.json`: `container`) as the container
flags this host can meet: the device nodes it has, the groups that own them, the NVIDIA container
toolkit where its driver is here, IPC and environment. The hardware tier's legs and smoke's
containers both take their GPU flags from here, so a backend's GPU container is data alone."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

from release.config.devices import ContainerDevices


def device_flags(
    needs: ContainerDevices,
    *,
    exists: Callable[[str], bool] = os.path.exists,
    which: Callable[[str], str | None] = shutil.which,
) -> list[str]:
    """`docker run`/`podman run` flags that give a container what `needs` declares, as far as this
    host has it (`exists` and `which` ask the host): none of the devices without the first."""
    flags: list[str] = []
    if needs.devices and exists(needs.devices[0]):
        flags += [f"--device={node}" for node in needs.devices if exists(node)]
        flags += [word for group in needs.groups for word in ("--group-add", group)]
    if needs.gpus and which(needs.gpus_probe):
        flags += ["--gpus", needs.gpus]
    if needs.ipc:
        flags.append(f"--ipc={needs.ipc}")
    flags += [word for key, value in sorted(needs.env.items()) for word in ("-e", f"{key}={value}")]
    return flags
