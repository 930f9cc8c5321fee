"""Smoke tests in real containers of local images (podman or docker), one container per wheel
and image: started once with SMOKE_FLAGS and the device needs of the wheel's backend, every check
run in it with `exec`, removed at the end."""

from __future__ import annotations

import itertools
import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path

from release.config.devices import ContainerDevices
from release.config.matrix import Simulation
from release.machine.containers import ContainerEngine
from release.machine.devices import device_flags
from release.smoke.image import Result, run_command

_COUNTER = itertools.count()

SMOKE_FLAGS: tuple[str, ...] = ()
"""What every smoke container is given (`run` flags) before its backend's device needs: a flag for
every smoke container is added here, and here only."""


class ContainerSandbox:
    """Runs commands in one running container of a local image; paths are shared by bind mounts
    at the same place (the work directory read-write, the wheel's directory read-only)."""

    def __init__(
        self,
        engine: ContainerEngine,
        image: str,
        layout: Simulation | None,
        *,
        workdir: Path,
        wheels: Path,
        devices: ContainerDevices,
        sonames: Sequence[str] = (),
        extra: Sequence[Path] = (),
    ) -> None:
        """`devices`: the wheel's backend's (`packaging/backends/<name>.json`: `container`), given as
        far as this host has them; `extra`: more directories mounted read-only (a declared
        directory of requirement wheels)."""
        self.layout = layout
        self.sonames = tuple(sonames)
        self.workdir = workdir
        name = f"release-smoke-{os.getpid()}-{next(_COUNTER)}"
        mounts = [(workdir, True), (wheels, False), *((p, False) for p in extra)]
        self.flags = [*SMOKE_FLAGS, *device_flags(devices)]
        self.container = engine.start(image, name, mounts=mounts, flags=self.flags)

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
        passed = {k: v for k, v in (env or {}).items() if k == "PATH" or not k.startswith("LD_")}
        command = self.container.prefix(passed, workdir=self.workdir)
        return run_command([*command, *argv], timeout=timeout, shown=argv)

    def close(self) -> None:
        self.container.remove()
