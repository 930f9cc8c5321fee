"""Serving images simulated with mount namespaces, for hosts without a container engine.

Every command of a simulated image runs as one `unshare --mount --propagation private` process
executing a generated shell script: the script builds the image's mounts, then `exec`s the
command. As root that is all; as another user (a CI runner's), the namespace is made in a user
namespace of its own (`unshare --user --map-root-user`) where the kernel allows it, else with
passwordless sudo, the command then dropping back to the user (see `namespace_runner`). The
mounts live in that private namespace only and vanish with its last process, so the host is
never modified and nothing is left to clean up when a check fails or times out. The layouts
(see `Simulation` in `release.config.matrix`):

- `runtime: system`: the host's distribution library directory as it is (the runtime where the
  distribution installs it).
- `runtime: prefix`: a copy of the runtime's files under the prefix (an overlay on the prefix's
  nearest existing ancestor, so nothing is created on the host), the originals hidden by an overlay
  on the distribution's library directory whose upper layer deletes them; the loader finds the
  prefix through a file in a private copy of `/etc/ld.so.conf.d` and a private `/etc/ld.so.cache`
  written by `ldconfig` inside the namespace, or through `LD_LIBRARY_PATH` only.
- `runtime: absent`: the runtime's files hidden, the loader cache rebuilt without them.
- `rootfs: debootstrap-minbase`: a cached `debootstrap --variant=minbase` tree (made by
  make-image.sh `rootfs`, the toolkit's one debootstrap path: `release.machine.debian`), used through an
  overlay (the cache stays pristine) with `chroot`; the host's interpreter directory, the work
  directory and the wheel's directory are bind-mounted at their own paths, read-only where they
  are inputs.
"""

from __future__ import annotations

import fnmatch
import os
import platform
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from release import process, settings
from release.config.matrix import Simulation
from release.errors import SmokeError, ToolchainError
from release.inspect.elf import ElfReadError, read_elf_file
from release.machine.debian import make_rootfs
from release.machine.lock import build_lock
from release.smoke.namespace import namespace_runner, sudo_problem
from release.smoke.namespace import tool as _tool

MINBASE_SUITE = "bookworm"
MINBASE_ENV = "RELEASE_MINBASE_DIR"
_LOADER_CACHE = Path("/etc/ld.so.cache")
_LOADER_CONF_DIR = Path("/etc/ld.so.conf.d")
_SIM_CONF_NAME = "zz-release-simulated-runtime.conf"


@dataclass(frozen=True)
class Result:
    """What one command printed and how it ended."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def distribution_libdir() -> Path:
    """Where the distribution installs shared libraries (Debian multiarch directory)."""
    return Path("/usr/lib") / f"{platform.machine()}-linux-gnu"


def _needed(path: Path) -> tuple[str, ...]:
    try:
        return read_elf_file(path).needed
    except (ElfReadError, OSError):
        return ()


def runtime_files(libdir: Path, globs: Sequence[str]) -> tuple[str, ...]:
    """Names in `libdir` (files and links) that belong to the runtime matched by `globs`.

    The runtime is the files the globs match plus the libraries they NEED (transitively) that no
    other library of `libdir` needs: what a vendor install brings along (for Debian's HIP:
    `libhsakmt`), while shared system libraries (`libnuma`, `libelf`, `libstdc++`) stay.
    """
    if not globs or not libdir.is_dir():
        return ()
    entries = sorted(p for p in libdir.iterdir() if p.name.startswith("lib") and ".so" in p.name)
    by_real: dict[Path, list[str]] = {}
    for entry in entries:
        if entry.is_file():
            by_real.setdefault(entry.resolve(), []).append(entry.name)
    name_to_real = {name: real for real, names in by_real.items() for name in names}
    needed = {real: _needed(real) for real in by_real}
    chosen = {name_to_real[n] for n in name_to_real if any(fnmatch.fnmatchcase(n, g) for g in globs)}
    if not chosen:
        return ()
    while True:
        candidates = {
            name_to_real[soname]
            for real in chosen
            for soname in needed.get(real, ())
            if soname in name_to_real and name_to_real[soname] not in chosen
        }
        added = set()
        for candidate in candidates:
            users = {r for r, deps in needed.items() if any(name_to_real.get(d) == candidate for d in deps)}
            if users <= chosen:
                added.add(candidate)
        if not added:
            break
        chosen |= added
    return tuple(sorted(name for real in chosen for name in by_real[real]))


def minbase_dir() -> Path:
    """The cached minimal Debian tree (`RELEASE_MINBASE_DIR` overrides the default place)."""
    override = settings.path(MINBASE_ENV)
    if override is not None:
        return override
    cache = settings.path("XDG_CACHE_HOME") or Path.home() / ".cache"
    return cache / "gpu-wheel-release" / f"minbase-{MINBASE_SUITE}"


def ensure_minbase(
    path: Path | None = None, *, log: Callable[[str], None] = print, workdir: Path | None = None
) -> Path:
    """The minbase tree, made when absent; returns its path. One process makes it at a time (a
    lock beside the tree, taken only when the tree is absent): parallel test workers or two smoke
    runs wait for the first instead of racing in one directory. It is made by the toolkit's one
    debootstrap path, make-image.sh `rootfs` (`release.machine.debian.make_rootfs`), whose
    tarball cache (`workdir`, default make-image.sh's own) the local images share."""
    target = path or minbase_dir()
    if _minbase_ready(target):
        return target
    lock = f".{target.name}.lock"
    what = f"the minbase tree {target}"
    with build_lock(target.parent, what=what, name=lock, say=log, error=ToolchainError):
        if _minbase_ready(target):
            return target
        return _make_minbase(target, log, workdir)


def _minbase_ready(target: Path) -> bool:
    return (target / "usr" / "bin" / "ldd").exists()


def _make_minbase(target: Path, log: Callable[[str], None], workdir: Path | None) -> Path:
    as_root: list[str] = []
    if os.geteuid() != 0:
        no_sudo = sudo_problem()
        if no_sudo is not None:
            msg = (
                f"making the minbase tree (debootstrap) needs root or passwordless sudo ({no_sudo}): "
                f"run it once as root, or point {MINBASE_ENV} at a debootstrap --variant=minbase tree"
            )
            raise ToolchainError(msg)
        as_root = [str(shutil.which("sudo")), "-n"]
    for stale in target.parent.glob(f"{target.name}.partial*"):  # an interrupted build's (the lock is ours)
        shutil.rmtree(stale, ignore_errors=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{target.name}.partial.", dir=target.parent))
    started = time.monotonic()
    try:
        make_rootfs(partial, MINBASE_SUITE, as_root=as_root, workdir=workdir, log=log)
    except ToolchainError:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    partial.rename(target)
    log(f"built {target} in {time.monotonic() - started:.0f}s")
    return target


@dataclass(frozen=True, kw_only=True)
class Bind:
    """A host directory shown at the same path inside a `rootfs` image."""

    path: Path
    read_only: bool = True


class _Tools(NamedTuple):
    """The paths of the tools a simulation script runs."""

    mount: str
    cp: str
    mkdir: str
    rm: str
    ldconfig: str

    @property
    def copy(self) -> str:
        return f"{self.cp} -a --no-preserve=ownership"  # a user namespace cannot give files to root


def _overlay(tools: _Tools, stage: Path, lower: Path, target: Path, tag: str) -> list[str]:
    """An overlay of `lower` at `target`, its upper and work directories in `stage`."""
    q = shlex.quote
    up, work = stage / f"{tag}-up", stage / f"{tag}-work"
    options = f"lowerdir={lower},upperdir={up},workdir={work}"
    return [
        f"{tools.mkdir} -p {q(str(up))} {q(str(work))}",
        f"{tools.mount} -t overlay release-sim -o {q(options)} {q(str(target))}",
    ]


class Sandbox:
    """Runs commands inside one simulated image; each command gets a fresh namespace."""

    def __init__(
        self,
        name: str,
        simulation: Simulation,
        *,
        workdir: Path,
        runtime: Sequence[str] = (),
        libdir: Path | None = None,
        rootfs: Path | None = None,
        binds: Sequence[Bind] = (),
    ) -> None:
        """`runtime`: file names in `libdir` that make up the runtime (see `runtime_files`)."""
        self.name = name
        self.simulation = simulation
        self.workdir = workdir
        self.runtime = tuple(runtime)
        self.libdir = libdir or distribution_libdir()
        self.rootfs = rootfs
        self.binds = tuple(binds)
        self._count = 0
        if simulation.rootfs == "debootstrap-minbase" and rootfs is None:
            msg = f"image {name!r} needs the minbase root file system (see ensure_minbase)"
            raise SmokeError(msg)
        if simulation.runtime in ("system", "prefix") and not self.runtime:
            msg = (
                f"image {name!r} provides the GPU runtime, but this host has none of its libraries in "
                f"{self.libdir} to put there"
            )
            raise ToolchainError(msg)

    @property
    def runtime_dir(self) -> Path | None:
        """Where the image's loader finds the runtime (None: nowhere)."""
        sim = self.simulation
        if sim.runtime == "system":
            return self.libdir
        if sim.runtime == "prefix" and sim.prefix:
            return Path(sim.prefix)
        return None

    def script(self, stage: Path, user: tuple[int, int] | None = None, *, userns: bool = False) -> str:
        """The shell script that builds this image's mounts in `stage` and execs "$@" (as `user`,
        a (uid, gid), when the namespace was made as root for another user; `userns`: inside a
        user namespace, where an overlay cannot copy up the root file system's root-owned files)."""
        q = shlex.quote
        run_as = f"{_tool('setpriv')} --reuid={user[0]} --regid={user[1]} --init-groups " if user else ""
        tools = _Tools(*(_tool(t) for t in ("mount", "cp", "mkdir", "rm", "ldconfig")))
        lines = ["set -eu", f"{tools.mount} -t tmpfs release-sim {q(str(stage))}"]
        if self.rootfs is not None:
            root = stage / "root"
            lines += self._rootfs_mounts(self.rootfs, root, stage, tools, userns=userns)
            lines.append(f'exec {_tool("chroot")} {q(str(root))} {run_as}"$@"')
        else:
            lines += self._runtime_mounts(stage, tools)
            lines.append(f'exec {run_as}"$@"')
        return "\n".join(lines) + "\n"

    def _rootfs_mounts(
        self, rootfs: Path, root: Path, stage: Path, tools: _Tools, *, userns: bool
    ) -> list[str]:
        """The image's root file system at `root`, with /proc, /dev and the binds mounted in it."""
        q = shlex.quote
        lines = [f"{tools.mkdir} -p {q(str(root))}"]
        if userns:
            lines += self._assembled_root(rootfs, root)
        else:
            lines += _overlay(tools, stage, rootfs, root, "rootfs")
        # Recursive binds: a user namespace may not mount a new proc, nor bind /dev without
        # the mounts below it.
        lines.append(f"{tools.mount} --rbind /proc {q(str(root / 'proc'))}")
        lines.append(f"{tools.mount} --rbind /dev {q(str(root / 'dev'))}")
        for bind in self.binds:
            inside = root / bind.path.relative_to("/")
            lines.append(f"{tools.mkdir} -p {q(str(inside))}")
            lines.append(f"{tools.mount} --bind {q(str(bind.path))} {q(str(inside))}")
            if bind.read_only:
                lines.append(f"{tools.mount} -o remount,bind,ro {q(str(inside))}")
        return lines

    def _runtime_mounts(self, stage: Path, tools: _Tools) -> list[str]:
        """The host's own root, with the runtime moved to the simulated prefix or taken away, the
        loader told where it is now, and LD_LIBRARY_PATH set where the image finds it that way."""
        q = shlex.quote
        sim = self.simulation
        files = [self.libdir / n for n in self.runtime]
        lines: list[str] = []
        if sim.runtime == "prefix" and sim.prefix:
            lines += self._prefix_mounts(Path(sim.prefix), stage, tools, files)
        if sim.runtime in ("prefix", "absent") and files:
            lines += _overlay(tools, stage, self.libdir, self.libdir, "libdir")
            lines.append(f"{tools.rm} -f {' '.join(q(str(f)) for f in files)}")
            lines += self._loader_mounts(stage, tools)
        if sim.runtime == "prefix" and sim.via == "LD_LIBRARY_PATH" and sim.prefix:
            lines.append(f'export LD_LIBRARY_PATH={q(sim.prefix)}"${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"')
        return lines

    def _prefix_mounts(self, prefix: Path, stage: Path, tools: _Tools, files: list[Path]) -> list[str]:
        """The runtime's files copied to a fresh `prefix`."""
        q = shlex.quote
        saved = stage / "runtime"
        lines: list[str] = []
        if files:
            # A copy first: the prefix may be where the runtime lives (an AMD install under
            # /opt/rocm-X/lib), which the mounts below then cover.
            lines.append(f"{tools.mkdir} -p {q(str(saved))}")
            lines.append(f"{tools.copy} {' '.join(q(str(f)) for f in files)} {q(str(saved))}/")
        anchor = next(p for p in (prefix, *prefix.parents) if p.exists())
        if anchor == Path("/"):
            msg = f"image {self.name!r}: cannot simulate prefix {prefix} (no existing parent below /)"
            raise SmokeError(msg)
        if anchor != prefix:
            lines += _overlay(tools, stage, anchor, anchor, "prefix")
            lines.append(f"{tools.mkdir} -p {q(str(prefix))}")
        else:
            lines.append(f"{tools.mount} -t tmpfs release-sim {q(str(prefix))}")
        lines.append(f"{tools.copy} {q(str(saved))}/. {q(str(prefix))}/")
        return lines

    def _loader_mounts(self, stage: Path, tools: _Tools) -> list[str]:
        """A private ld.so.conf.d (naming the prefix where the image finds the runtime that way)
        and the loader cache made from it, bound over the host's."""
        q = shlex.quote
        sim = self.simulation
        confd = stage / "ld.so.conf.d"
        cache = stage / "ld.so.cache"
        lines = [f"{tools.mkdir} -p {q(str(confd))}"]
        if _LOADER_CONF_DIR.is_dir():
            lines.append(f"{tools.copy} {q(str(_LOADER_CONF_DIR))}/. {q(str(confd))}/")
        if sim.runtime == "prefix" and sim.via == "ld.so.conf.d" and sim.prefix:
            lines.append(f"echo {q(sim.prefix)} > {q(str(confd / _SIM_CONF_NAME))}")
        lines.append(f"{tools.mount} --bind {q(str(confd))} {q(str(_LOADER_CONF_DIR))}")
        # -X: no link updates, so ldconfig writes nothing but the private cache.
        lines.append(f"{tools.ldconfig} -X -C {q(str(cache))}")
        lines.append(f"{tools.mount} --bind {q(str(cache))} {q(str(_LOADER_CACHE))}")
        return lines

    def _assembled_root(self, rootfs: Path, root: Path) -> list[str]:
        """The root file system for a user namespace: `root` (inside the stage's tmpfs) gets the
        tree's entries bind-mounted, except the directories on the way to a mount point (the
        binds, /proc, /dev), which are made in the tmpfs and filled the same way one level down.
        Nothing of the cached tree is written, and no root-owned directory needs a copy-up."""
        q = shlex.quote
        mount, mkdir, ln = (_tool(t) for t in ("mount", "mkdir", "ln"))
        targets = [Path("proc"), Path("dev"), Path("tmp")]
        targets += [b.path.relative_to("/") for b in self.binds]
        lines: list[str] = []

        def fill(relative: Path) -> None:
            source = rootfs / relative
            for entry in sorted(source.iterdir()):
                inner = relative / entry.name
                dest = q(str(root / inner))
                if entry.is_symlink():
                    lines.append(f"{ln} -s {q(str(entry.readlink()))} {dest}")
                elif entry.is_dir() and any(t == inner or inner in t.parents for t in targets):
                    lines.append(f"{mkdir} -p {dest}")
                    fill(inner)
                elif entry.is_dir():
                    lines.append(f"{mkdir} -p {dest}")
                    lines.append(f"{mount} --rbind {q(str(entry))} {dest}")

        fill(Path())
        return lines

    def run(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = 600
    ) -> Result:
        """Run one command in a fresh namespace of this image."""
        runner = namespace_runner(f"simulating image {self.name!r}")
        self._count += 1
        stage = self.workdir / f".ns-{self.name}-{self._count}"
        stage.mkdir(parents=True, exist_ok=True)
        script = stage.with_suffix(".sh")
        userns = runner.how == "user namespace"
        script.write_text(self.script(stage, runner.user, userns=userns), encoding="utf-8")
        command = runner.argv(script, argv, env)
        return run_command(command, env=env, timeout=timeout, shown=argv, cwd=self.workdir)


def run_command(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
    shown: Sequence[str] | None = None,
    cwd: Path | None = None,
) -> Result:
    """Run a command, capturing its output; a timeout is reported as exit 124."""
    started = time.monotonic()
    try:
        proc = process.run(argv, env=env, timeout=timeout, cwd=cwd)
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except process.TimedOut as exc:
        code = 124
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        err += f"\ntimed out after {timeout:.0f}s"
    except FileNotFoundError as exc:
        code, out, err = 127, "", f"{exc.filename}: not found"
    except OSError as exc:
        code, out, err = 126, "", f"{exc.filename}: {exc.strerror}"
    return Result(tuple(shown or argv), code, out, err, time.monotonic() - started)


_LDD_MISSING = re.compile(r"^\s*(\S+)\s+=>\s+not found", re.MULTILINE)
_LOADER_MISSING = re.compile(r"error while loading shared libraries: (\S+?): cannot open shared object file")


def missing_libraries(output: str) -> tuple[str, ...]:
    """Sonames that `ldd` output or a loader error reports as not found."""
    found = _LDD_MISSING.findall(output) + _LOADER_MISSING.findall(output)
    return tuple(dict.fromkeys(found))


def host_package(soname: str, libdir: Path | None = None) -> str | None:
    """The Debian package that provides `soname` on this host (for an 'install X' hint)."""
    path = (libdir or distribution_libdir()) / soname
    dpkg = shutil.which("dpkg-query") or shutil.which("dpkg")
    if dpkg is None or not path.exists():
        return None
    for candidate in (path, path.resolve()):
        proc = process.run([dpkg, "-S", str(candidate)], timeout=process.QUERY_S)
        if proc.returncode == 0 and ":" in proc.stdout:
            return proc.stdout.split(":", 1)[0].strip()
    return None


def interpreter_home(python: Path) -> Path:
    """The installation directory of an interpreter (what a rootfs image needs bind-mounted)."""
    home = python.resolve().parent.parent
    if home in (Path("/"), Path("/usr"), Path("/usr/local")):
        msg = (
            f"{python} belongs to the host system ({home}); a rootfs image needs a self-contained "
            "interpreter (pyenv or python-build-standalone)"
        )
        raise SmokeError(msg)
    return home
