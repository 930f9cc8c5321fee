"""Local container images: made from Debian packages when absent (scripts/make-image.sh: debootstrap,
then `podman import`, no registry), and checked for the interpreters a build needs."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from release.config.checks import SUPPORTED_PYTHONS
from release.config.pins import requirement
from release.config.resources import toolkit_scripts
from release.errors import ToolchainError
from release.machine.containers import run_script
from release.machine.interpreters import self_contained_home
from release.machine.lock import build_lock
from release.plan.resolve import LocalImage
from release.wheel.names import manylinux_interpreter

MAKE_TIMEOUT = 3600
MAKE_LOCK_DIR = Path("/var/tmp/release-make-image")  # noqa: S108 (a machine-wide lock, root-owned)
"""Where the per-tag locks live: one make-image.sh per image tag at a time on a machine."""


def exists(engine: str, tag: str) -> bool:
    proc = subprocess.run([engine, "image", "exists", tag], capture_output=True, check=False, timeout=60)
    return proc.returncode == 0


ENV_PYTHON = "3.9"
"""cibuildwheel reads a container's environment with /opt/python/cp39-cp39/bin/python."""


def image_interpreters(pythons: tuple[str, ...]) -> tuple[dict[str, Path], list[str]]:
    """({version: installation directory} of the interpreters an image can be given, the versions
    that have no self-contained interpreter here)."""
    homes = {v: self_contained_home(v) for v in pythons}
    return {v: h for v, h in homes.items() if h is not None}, [v for v, h in homes.items() if h is None]


def usable(engine: str, image: LocalImage) -> bool:
    """Whether a local image can run here: root makes it when absent (make-image.sh needs root),
    anyone else uses it only when it exists."""
    return os.geteuid() == 0 or exists(engine, image.tag)


def _version(python: str) -> tuple[int, ...]:
    return tuple(int(part) for part in python.split("."))


def _from_other_archives(packages: tuple[str, ...]) -> bool:
    """Whether every package comes from another archive (`pkg/experimental`): make-image.sh makes
    them one layer over the image of the suite's own packages."""
    return bool(packages) and all("/" in package for package in packages)


def make_command(image: LocalImage) -> list[str]:
    """The make-image.sh invocation for a local image (its label caches the result), with the
    interpreters the toolkit finds here; one line naming the way out when there are none."""
    cmd = ["bash", str(toolkit_scripts() / "make-image.sh"), "--tag", image.tag, "--suite", image.suite]
    if image.packages:
        cmd += ["--include", ",".join(image.packages)]
    found, _missing = image_interpreters(image.pythons)
    if not found and image.pythons:
        msg = (
            f"image {image.tag} needs CPython {', '.join(image.pythons)} with its own prefix to copy in, "
            f"and none is here (a distribution's /usr/bin/python3.X cannot be copied): "
            f"`release toolchain install python {image.pythons[-1]}`"
        )
        raise ToolchainError(msg)
    cmd += ["--pythons", ",".join(found)]
    if image.toolchain:
        env_home = self_contained_home(ENV_PYTHON)
        env_version, env_home = (
            (ENV_PYTHON, env_home) if env_home else (list(found)[-1], found[list(found)[-1]])
        )
        cmd += ["--env-python", env_version, "--python-dir", f"{env_version}={env_home}"]
    cmd += [arg for v, home in found.items() for arg in ("--python-dir", f"{v}={home}")]
    if image.toolchain:
        cmd += ["--auditwheel", requirement("auditwheel")]  # the toolkit's own bound
        if image.gcc:
            cmd += ["--gcc", image.gcc]
        if image.toolkit_install:
            cmd += ["--toolkit-install", image.toolkit_install]
    else:
        cmd.append("--minbase-only")
    if (image.runtime_prefix or _from_other_archives(image.packages)) and not image.toolchain:
        # A layout is a layer over the image of its packages, and packages from other archives a
        # layer over the image without them, each with every supported interpreter found here:
        # stand-ins of one Python and the four-Python smoke images share those images.
        extra, _ = image_interpreters(tuple(v for v in SUPPORTED_PYTHONS if v not in found))
        if extra:
            cmd += ["--base-pythons", ",".join(sorted({*found, *extra}, key=_version))]
            cmd += [arg for v, home in extra.items() for arg in ("--python-dir", f"{v}={home}")]
    if image.runtime_prefix:
        cmd += [
            "--runtime-prefix",
            image.runtime_prefix,
            "--runtime-via",
            image.runtime_via or "ld.so.conf.d",
        ]
        cmd += ["--runtime-libs", ",".join(image.runtime_globs)]
    return cmd


def ensure(engine: str, image: LocalImage, *, log: Callable[[str], None]) -> None:
    """Make the image unless one with the same inputs exists (make-image.sh checks its label); a
    build image must also have a glibc that some manylinux policy covers."""
    _made(engine, image, log=log)
    if image.toolchain:
        require_repairable_glibc(engine, image)


def require_repairable_glibc(engine: str, image: LocalImage) -> None:
    """A build image whose glibc is newer than the newest manylinux policy makes wheels that
    auditwheel cannot repair (`too-recent versioned symbols`): refused in one line naming a base."""
    from release.inspect.verify import manylinux_policies  # noqa: PLC0415 (only for build images)

    found = image_glibc(engine, image.tag)
    newest = manylinux_policies()[-1] if manylinux_policies() else None
    if found is None or newest is None or found <= newest.libc:
        return
    have, limit = ".".join(map(str, found)), ".".join(map(str, newest.libc))
    msg = (
        f"image {image.tag} (Debian {image.suite}) has glibc {have}, newer than the newest manylinux "
        f"policy auditwheel knows ({newest.name}): no wheel built there can be repaired. Base the recipe "
        f"on a suite whose glibc is at most {limit} (`suite: trixie`, glibc 2.41) and take newer "
        "packages from another archive (`packages: [pkg/experimental]`, the C library stays the base's)"
    )
    raise ToolchainError(msg)


def image_glibc(engine: str, tag: str) -> tuple[int, int] | None:
    """The glibc version of an image (`getconf GNU_LIBC_VERSION`), or None where it cannot say."""
    proc = run_script(engine, tag, "getconf GNU_LIBC_VERSION", timeout=300)
    match = re.search(r"glibc (\d+)\.(\d+)", proc.stdout)
    return (int(match.group(1)), int(match.group(2))) if proc.returncode == 0 and match else None


def _made(engine: str, image: LocalImage, *, log: Callable[[str], None]) -> None:
    if os.geteuid() != 0 and exists(engine, image.tag):
        # make-image.sh needs root (debootstrap): an unprivileged build (a CI runner) uses the
        # image that is there, as it would one pulled from a registry.
        log(f"image {image.tag}: present; not re-checking its recipe (making images needs root)")
        return
    _found, lacking = image_interpreters(image.pythons)
    if lacking and exists(engine, image.tag):
        # Its recipe names interpreters this machine cannot give it (a container reaching the
        # host's engine, a machine without pyenv): the image made elsewhere is used as it is.
        log(
            f"image {image.tag}: present; used as it is (this machine has no self-contained "
            f"CPython {', '.join(lacking)} to re-make it with)"
        )
        return
    if engine != "podman":
        if not exists(engine, image.tag):
            command = " ".join(make_command(image))
            msg = f"image {image.tag} is absent and only podman can make it here: run `{command}`"
            raise ToolchainError(msg)
        return
    started = time.monotonic()
    log(f"image {image.tag}: checking its recipe (Debian {image.suite}; making it takes minutes)")
    # One maker per tag (parallel test workers, two builds): the second finds the image up to date
    # when it was the same recipe. Images of different tags are made side by side.
    with one_maker(log, image.tag):
        returncode, last = _run_streamed(make_command(image), log=lambda line: log(f"  {line}"))
    if returncode != 0:
        msg = f"could not make image {image.tag}: {last or 'make-image.sh failed'}"
        raise ToolchainError(msg)
    if not last.startswith("[make-image.sh] done:"):
        state = "up to date, kept"
    else:  # a tag of the image of the same inputs, or a whole new image
        state = "tagged (the image of the same recipe)" if ", tagged " in last else "made"
    log(f"image {image.tag}: {state} ({time.monotonic() - started:.0f} s)")


def one_maker(log: Callable[[str], None], tag: str) -> contextlib.AbstractContextManager[None]:
    """Held while make-image.sh makes or checks `tag`: one maker per tag on a machine (make-image.sh
    keeps its scratch per run and its logs per tag; its debootstrap cache has a lock of its own)."""
    name = ".make-" + re.sub(r"[^A-Za-z0-9._-]", "_", tag) + ".lock"
    what = f"making the local image {tag}"
    return build_lock(MAKE_LOCK_DIR, what=what, wait_s=MAKE_TIMEOUT, say=log, name=name, error=ToolchainError)


def _run_streamed(argv: list[str], *, log: Callable[[str], None]) -> tuple[int, str]:
    """Run make-image.sh, passing its step lines on as they come (several minutes of work);
    (exit status, its last non-empty line). One deadline bounds the whole run."""
    deadline = time.monotonic() + MAKE_TIMEOUT
    last = ""
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as proc:
        assert proc.stdout is not None  # noqa: S101 (PIPE above)
        timer = threading.Timer(MAKE_TIMEOUT, proc.kill)
        timer.start()
        try:
            for raw in proc.stdout:
                line = raw.rstrip()
                if line:
                    last = line
                    log(line)
        finally:
            timer.cancel()
        returncode = proc.wait()
    if time.monotonic() > deadline:
        return returncode or 1, f"make-image.sh ran past {MAKE_TIMEOUT} s and was stopped"
    return returncode, last


def _absent_paths(engine: str, image: str, paths: list[str]) -> list[str]:
    """Which of `paths` are not executables in the image (one short container run)."""
    script = "for p in " + " ".join(paths) + '; do [ -x "$p" ] || echo "$p"; done'
    proc = run_script(engine, image, script, timeout=300)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["cannot run it"])[-1]
        msg = f"image {image} does not run: {last}"
        raise ToolchainError(msg)
    return [p for p in proc.stdout.split() if p in paths]


def missing_interpreters(engine: str, image: str, pythons: tuple[str, ...]) -> list[str]:
    """The versions among `pythons` whose /opt/python/cpXY-cpXY interpreter the image lacks."""
    paths = {manylinux_interpreter(p): p for p in pythons}
    return [paths[p] for p in _absent_paths(engine, image, list(paths))]


def require_interpreters(engine: str, image: str, pythons: tuple[str, ...]) -> None:
    """Every interpreter cibuildwheel will call must be in the image: one line naming the image and
    the missing paths otherwise (cp39 is the one cibuildwheel reads the environment with)."""
    if not exists(engine, image):
        msg = (
            f"image {image} is not in {engine}'s store: make it (a matrix `build_image.debian` recipe does) "
            "or name another with --image"
        )
        raise ToolchainError(msg)
    paths = [manylinux_interpreter(p) for p in pythons] + [manylinux_interpreter(ENV_PYTHON)]
    missing = _absent_paths(engine, image, paths)
    if missing:
        msg = f"image {image} lacks the interpreter(s) the build needs: {', '.join(missing)}"
        raise ToolchainError(msg)
