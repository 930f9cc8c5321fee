"""What a container needs to reach a backend's GPUs, as a backend's data declares it
(`packaging/backends/<name>.json`: `container`); `release.machine.devices` turns it into the flags
this host can meet."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from release.config.dataschema import spec


@dataclass(frozen=True, kw_only=True)
class ContainerDevices:
    """What a container needs to reach this backend's GPUs: the hardware tier's legs and smoke's
    containers are given it (`release.machine.devices.device_flags`), as far as the host has them."""

    devices: tuple[str, ...] = spec(
        "Device nodes (or directories of them) passed with `--device`, each where the host has it. "
        "The first says the host has this backend's GPUs: without it none is passed.",
        default=(),
    )
    groups: tuple[str, ...] = spec(
        "Groups the container's user joins (`--group-add`) when devices are passed: the nodes' owners.",
        default=(),
    )
    gpus: str | None = spec(
        "`--gpus` (the NVIDIA container toolkit), passed where `gpus_probe` is on the host's PATH.",
        default=None,
    )
    gpus_probe: str = spec("The program on PATH that says the host has `gpus`.", default="nvidia-smi")
    ipc: str | None = spec(
        "`--ipc` of every such container ('host': processes share GPU memory handles); null: the engine's.",
        default=None,
    )
    env: Mapping[str, str] = spec("Environment variables set in every such container.", default_factory=dict)
