"""How this host is asked where a build can run: the `Probes` that `release plan` and `release build`
both hand to `release.plan.placement.place_steps`, so the placement `release plan` prints is the one
`release build` carries out. Each probe is cheap: the toolkit's files, the interpreters on PATH, and
`podman info` (or docker's), asked at most once and only when an image build needs it; no container
starts."""

from __future__ import annotations

from release.config.machines import host_machine
from release.config.resources import setup_podman_command
from release.machine.containers import ContainerEngine
from release.machine.interpreters import find_interpreter
from release.machine.toolchain import host_toolkit
from release.plan.placement import Probes
from release.settings import in_github_actions


def host_probes(*, allow_toolkit_mismatch: bool = False) -> Probes[ContainerEngine]:
    """This host's probes; `allow_toolkit_mismatch` lets a host toolkit that is not the declared
    one build on the host (`release build --allow-toolkit-mismatch`)."""
    return Probes(
        machine=host_machine(),
        toolkit=lambda variant: host_toolkit(variant, allow=allow_toolkit_mismatch),
        engine=ContainerEngine.answering,
        interpreter=lambda version: find_interpreter(version) is not None,
        setup_podman=setup_podman_command(),
        everywhere=in_github_actions(),
    )
