"""How this process gets a private mount namespace for a simulated image, as root or not.

Root: `unshare --mount`. Another user (a CI runner's): a user namespace of its own
(`unshare --user --map-root-user --mount`) where the kernel allows one, else passwordless sudo,
the command then dropping back to the user with setpriv; where neither works, one line naming
both ways to allow it (the sysctls that govern unprivileged user namespaces included).
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from release import process, settings
from release.errors import ToolchainError

NO_USERNS_ENV = "RELEASE_SMOKE_NO_USERNS"
"""Set to 1 to never use a user namespace (the root-or-sudo behaviour, for tests and for kernels
where user namespaces misbehave)."""
USERNS_SYSCTLS = (
    "kernel.unprivileged_userns_clone=1",  # Debian kernels before 6.x; absent elsewhere
    "kernel.apparmor_restrict_unprivileged_userns=0",  # Ubuntu 23.10+ (GitHub's ubuntu-24.04)
)


def tool(name: str) -> str:
    for directory in ("/usr/bin", "/usr/sbin", "/bin", "/sbin"):
        candidate = Path(directory) / name
        if candidate.exists():
            return str(candidate)
    found = shutil.which(name)
    if found is None:
        msg = f"simulating images needs `{name}` (util-linux / coreutils)"
        raise ToolchainError(msg)
    return found


@dataclass(frozen=True)
class NamespaceRunner:
    """How this process gets a private mount namespace: the argv that precedes the script, and
    the user a sudo-made namespace hands the command back to."""

    how: str
    prefix: tuple[str, ...]
    user: tuple[int, int] | None = None

    def argv(self, script: Path, command: Sequence[str], env: Mapping[str, str] | None) -> list[str]:
        if self.user is None:
            return [*self.prefix, "/bin/sh", str(script), *command]
        # sudo resets the environment: carry the command's own through `env`.
        assignments = [f"{k}={v}" for k, v in (env or {}).items()]
        unshare = [tool("unshare"), "--mount", "--propagation", "private"]
        return [*self.prefix, tool("env"), *assignments, *unshare, "/bin/sh", str(script), *command]


def _probe(argv: Sequence[str]) -> str | None:
    """None when `argv` succeeds, else its last line of output (or why it could not start)."""
    try:
        proc = process.run(argv, timeout=30)
    except (OSError, process.TimedOut) as exc:
        return str(exc)
    if proc.returncode == 0:
        return None
    lines = [line for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"exit {proc.returncode}"


@functools.cache
def _userns_probe() -> str | None:
    unshare = tool("unshare")
    return _probe([unshare, "--user", "--map-root-user", "--mount", "--propagation", "private", "true"])


@functools.cache
def _sudo_probe(sudo: str) -> str | None:
    return _probe([sudo, "-n", "true"])


def userns_problem() -> str | None:
    """Why an unprivileged user namespace with a mount namespace cannot be made here (None: it can)."""
    if settings.switch(NO_USERNS_ENV):
        return f"user namespaces are switched off by {NO_USERNS_ENV}=1"
    return _userns_probe()


def sudo_problem() -> str | None:
    """Why passwordless sudo cannot be used here (None: it can)."""
    sudo = shutil.which("sudo")
    if sudo is None:
        return "sudo is not installed"
    return _sudo_probe(sudo)


def namespace_runner(what: str) -> NamespaceRunner:
    """Root: a plain mount namespace. Another user: a user namespace where the kernel allows one,
    else passwordless sudo; where neither works, one line naming both ways to allow it."""
    unshare = tool("unshare")
    if os.geteuid() == 0:
        return NamespaceRunner("root", (unshare, "--mount", "--propagation", "private"))
    no_userns = userns_problem()
    if no_userns is None:
        prefix = (unshare, "--user", "--map-root-user", "--mount", "--propagation", "private")
        return NamespaceRunner("user namespace", prefix)
    no_sudo = sudo_problem()
    if no_sudo is None:
        return NamespaceRunner("sudo", (str(shutil.which("sudo")), "-n"), user=(os.getuid(), os.getgid()))
    sysctls = " or ".join(f"`sudo sysctl -w {s}`" for s in USERNS_SYSCTLS)
    msg = (
        f"{what} needs a private mount namespace, and user {os.getuid()} can make none: no user namespace "
        f"({no_userns}) and no passwordless sudo ({no_sudo}). Allow unprivileged user namespaces "
        f"({sysctls}, as the kernel names it), or give this user passwordless sudo, or run as root"
    )
    raise ToolchainError(msg)
