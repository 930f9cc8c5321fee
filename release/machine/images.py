"""Local container images: made from Debian packages when absent (scripts/make-image.sh: debootstrap,
then `podman import`, no registry), and checked for the interpreters a build needs."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from release.config.checks import SUPPORTED_PYTHONS
from release.config.pins import requirement
from release.config.pythons import python, sort_key
from release.errors import ToolchainError
from release.machine import imaging
from release.machine.containers import ContainerEngine
from release.machine.debian import debian_mirror
from release.machine.interpreters import self_contained_home
from release.machine.recipe import RUNTIME_LIBS, Recipe
from release.plan.resolve import LocalImage
from release.wheel.names import manylinux_interpreter


def exists(engine: ContainerEngine, tag: str) -> bool:
    return engine.has_image(tag)


ENV_PYTHON = "3.9"
"""cibuildwheel reads a container's environment with /opt/python/cp39-cp39/bin/python."""


def image_interpreters(pythons: tuple[str, ...]) -> tuple[dict[str, Path], list[str]]:
    """({version: installation directory} of the interpreters an image can be given, the versions
    that have no self-contained interpreter here)."""
    homes = {v: self_contained_home(v) for v in pythons}
    return {v: h for v, h in homes.items() if h is not None}, [v for v, h in homes.items() if h is None]


def usable(engine: ContainerEngine, image: LocalImage) -> bool:
    """Whether a local image can run here: root makes it when absent (make-image.sh needs root),
    anyone else uses it only when it exists."""
    return os.geteuid() == 0 or exists(engine, image.tag)


def _from_other_archives(packages: tuple[str, ...]) -> bool:
    """Whether every package comes from another archive (`pkg/experimental`): the image is one
    layer of them over the image of the suite's own packages."""
    return bool(packages) and all("/" in package for package in packages)


def recipe_of(image: LocalImage) -> Recipe:
    """The recipe make-image.sh is given for a local image (its label caches the result), with the
    interpreters the toolkit finds here; one line naming the way out when there are none."""
    found, _missing = image_interpreters(image.pythons)
    if not found and image.pythons:
        msg = (
            f"image {image.tag} needs CPython {', '.join(image.pythons)} with its own prefix to copy in, "
            f"and none is here (a distribution's /usr/bin/python3.X cannot be copied): "
            f"`release toolchain install python {image.pythons[-1]}`"
        )
        raise ToolchainError(msg)
    homes = dict(found)
    env_python = None
    if image.toolchain:
        env_home = self_contained_home(ENV_PYTHON)
        env_python, homes[env_python] = (
            (ENV_PYTHON, env_home) if env_home else (list(found)[-1], found[list(found)[-1]])
        )
    base_pythons: tuple[str, ...] = ()
    if (image.runtime_prefix or _from_other_archives(image.packages)) and not image.toolchain:
        # A layout is a layer over the image of its packages, and packages from other archives a
        # layer over the image without them, each with every supported interpreter found here:
        # stand-ins of one Python and the four-Python smoke images share those images.
        extra, _ = image_interpreters(tuple(v for v in SUPPORTED_PYTHONS if v not in found))
        if extra:
            base_pythons = tuple(sorted({*found, *extra}, key=sort_key))
            homes.update(extra)
    return Recipe(
        tag=image.tag,
        suite=image.suite,
        mirror=debian_mirror(),
        include=image.packages,
        pythons=tuple(found),
        homes=tuple((v, str(home)) for v, home in homes.items()),
        env_python=env_python,
        minbase=not image.toolchain,
        gcc=(image.gcc or "") if image.toolchain else "",
        auditwheel=requirement("auditwheel") if image.toolchain else "",  # the toolkit's own bound
        runtime_prefix=image.runtime_prefix or "",
        runtime_via=(image.runtime_via or "ld.so.conf.d") if image.runtime_prefix else "ld.so.conf.d",
        runtime_libs=image.runtime_globs if image.runtime_prefix else RUNTIME_LIBS,
        runtime_links=(image.runtime_links or "") if image.runtime_prefix else "",
        base_pythons=base_pythons,
        toolkit_install=(image.toolkit_install or "") if image.toolchain else "",
    )


def ensure(engine: ContainerEngine, image: LocalImage, *, log: Callable[[str], None]) -> None:
    """Make the image unless one with the same inputs exists (make-image.sh checks its label); a
    build image must also have a glibc that some manylinux policy covers."""
    _made(engine, image, log=log)
    if image.toolchain:
        require_repairable_glibc(engine, image)


def require_repairable_glibc(engine: ContainerEngine, image: LocalImage) -> None:
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


def image_glibc(engine: ContainerEngine, tag: str) -> tuple[int, int] | None:
    """The glibc version of an image (`getconf GNU_LIBC_VERSION`), or None where it cannot say."""
    proc = engine.run_script(tag, "getconf GNU_LIBC_VERSION", timeout=300)
    match = re.search(r"(?a)glibc (\d+)\.(\d+)", proc.stdout)
    return (int(match.group(1)), int(match.group(2))) if proc.returncode == 0 and match else None


def _made(engine: ContainerEngine, image: LocalImage, *, log: Callable[[str], None]) -> None:
    if os.geteuid() != 0 and exists(engine, image.tag):
        # make-image.sh needs root (debootstrap): an unprivileged build (a CI runner) uses the
        # image that is there, as it would one pulled from a registry.
        log(f"image {image.tag}: present; not re-checking its recipe (making images needs root)")
        return
    _found, lacking = image_interpreters(image.pythons)
    # A free-threaded CPython no machine of ours has (its steps run on GitHub only) is left out of
    # the recipe, never a reason to keep an image made from an older one.
    lacking = [v for v in lacking if not python(v).free_threaded]
    if lacking and exists(engine, image.tag):
        # Its recipe names interpreters this machine cannot give it (a container reaching the
        # host's engine, a machine without pyenv): the image made elsewhere is used as it is.
        log(
            f"image {image.tag}: present; used as it is (this machine has no self-contained "
            f"CPython {', '.join(lacking)} to re-make it with)"
        )
        return
    if engine.name != "podman":
        if not exists(engine, image.tag):
            msg = f"image {image.tag} is absent and only podman can make it here (rootful, with debootstrap)"
            raise ToolchainError(msg)
        return
    log(f"image {image.tag}: checking its recipe (Debian {image.suite}; making it takes minutes)")
    # One maker per tag (parallel test workers, two builds): the second finds the image up to date
    # when it was the same recipe. Images of different tags are made side by side.
    made = imaging.make(engine, recipe_of(image), log=lambda line: log(f"  {line}"))
    state = {"up-to-date": "up to date, kept", "tagged": "tagged (the image of the same recipe)"}
    log(f"image {image.tag}: {state.get(made.did, 'made')} ({made.seconds:.0f} s)")


one_maker = imaging.one_maker
MAKE_LOCK_DIR = imaging.RECORD
"""Where the per-tag locks, calls.log and inputs/<hash>.txt live."""


def _absent_paths(engine: ContainerEngine, image: str, paths: list[str]) -> list[str]:
    """Which of `paths` are not executables in the image (one short container run)."""
    script = "for p in " + " ".join(paths) + '; do [ -x "$p" ] || echo "$p"; done'
    proc = engine.run_script(image, script, timeout=300)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["cannot run it"])[-1]
        msg = f"image {image} does not run: {last}"
        raise ToolchainError(msg)
    return [p for p in proc.stdout.split() if p in paths]


def missing_interpreters(engine: ContainerEngine, image: str, pythons: tuple[str, ...]) -> list[str]:
    """The versions among `pythons` whose /opt/python/cpXY-cpXY interpreter the image lacks."""
    paths = {manylinux_interpreter(p): p for p in pythons}
    return [paths[p] for p in _absent_paths(engine, image, list(paths))]


def require_interpreters(engine: ContainerEngine, image: str, pythons: tuple[str, ...]) -> None:
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
