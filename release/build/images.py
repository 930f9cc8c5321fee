"""Local container images: made from Debian packages when absent (scripts/make-image.sh: debootstrap,
then `podman import`, no registry), and checked for the interpreters a build needs."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable

from release.config.pins import requirement
from release.config.resources import toolkit_scripts
from release.errors import ToolchainError
from release.plan.resolve import LocalImage

MAKE_TIMEOUT = 3600


def exists(engine: str, tag: str) -> bool:
    proc = subprocess.run([engine, "image", "exists", tag], capture_output=True, check=False, timeout=60)
    return proc.returncode == 0


def make_command(image: LocalImage) -> list[str]:
    """The make-image.sh invocation for a local image (its label caches the result)."""
    cmd = ["bash", str(toolkit_scripts() / "make-image.sh"), "--tag", image.tag, "--suite", image.suite]
    if image.packages:
        cmd += ["--include", ",".join(image.packages)]
    cmd += ["--pythons", ",".join(image.pythons)]
    if image.toolchain:
        cmd += ["--auditwheel", requirement("auditwheel")]  # the toolkit's own bound
        if image.gcc:
            cmd += ["--gcc", image.gcc]
    else:
        cmd.append("--minbase-only")
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
    """Make the image unless one with the same inputs exists (make-image.sh checks its label)."""
    if os.geteuid() != 0 and exists(engine, image.tag):
        # make-image.sh needs root (debootstrap): an unprivileged build (a CI runner) uses the
        # image that is there, as it would one pulled from a registry.
        log(f"image {image.tag}: present; not re-checking its recipe (making images needs root)")
        return
    if engine != "podman":
        if not exists(engine, image.tag):
            msg = f"image {image.tag} is absent and only podman can make it here: run `{' '.join(make_command(image))}`"
            raise ToolchainError(msg)
        return
    started = time.monotonic()
    log(f"image {image.tag}: making or reusing it from Debian {image.suite} (first time: several minutes)")
    proc = subprocess.run(
        make_command(image), capture_output=True, text=True, check=False, timeout=MAKE_TIMEOUT
    )
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
        msg = f"could not make image {image.tag}: {lines[-1] if lines else 'make-image.sh failed'}"
        raise ToolchainError(msg)
    log(f"image {image.tag}: ready ({time.monotonic() - started:.0f} s)")


def interpreter_path(python: str) -> str:
    tag = "cp" + python.replace(".", "")
    return f"/opt/python/{tag}-{tag}/bin/python"


def require_interpreters(engine: str, image: str, pythons: tuple[str, ...]) -> None:
    """Every interpreter cibuildwheel will call must be in the image: one line naming the image and
    the missing paths otherwise (cp39 is the one cibuildwheel reads the environment with)."""
    if not exists(engine, image):
        msg = f"image {image} is not in {engine}'s store: make it (a matrix `build_image.debian` recipe does) or name another with --image"
        raise ToolchainError(msg)
    paths = [interpreter_path(p) for p in pythons] + ["/opt/python/cp39-cp39/bin/python"]
    script = "for p in " + " ".join(paths) + '; do [ -x "$p" ] || echo "$p"; done'
    proc = subprocess.run(
        [engine, "run", "--rm", "--network=none", "--entrypoint", "/bin/sh", image, "-c", script],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    missing = proc.stdout.split()
    if proc.returncode != 0 or missing:
        what = ", ".join(missing) if missing else (proc.stderr.strip().splitlines() or ["cannot run it"])[-1]
        msg = f"image {image} lacks the interpreter(s) the build needs: {what}"
        raise ToolchainError(msg)
