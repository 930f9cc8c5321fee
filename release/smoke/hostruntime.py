"""The GPU runtime on this machine that simulated images lay out: found, and checked against the
variant's declared toolkit.

Simulations copy the host's runtime into each image's layout, so the host must have the runtime a
release wheel binds: for ROCm 6.4 `libamdhip64.so.6`, whether Debian installed it in its library
directory or AMD's packages under `/opt/rocm-6.4.x/lib` (the backend's toolkit prefixes). A
runtime of another major would make every layout fail at import with a loader error; this module
says so first, with the command that installs the declared one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from release import settings
from release.config.matrix import Image
from release.errors import ToolchainError
from release.machine.containers import ContainerEngine
from release.machine.images import usable as local_image_usable
from release.machine.install import install_backend
from release.machine.toolchain import install_hint
from release.plan.resolve import ResolvedImage, ResolvedVariant
from release.smoke.image import distribution_libdir, runtime_files


@dataclass(frozen=True)
class HostRuntime:
    """Where the runtime's files are on this machine (`files`: names in `libdir`)."""

    libdir: Path
    files: tuple[str, ...]
    matches: bool
    """The files include a soname the declared toolkit binds (or nothing is declared)."""

    @property
    def usable(self) -> bool:
        return bool(self.files) and self.matches


def runtime_dirs(variant: ResolvedVariant) -> list[Path]:
    """The distribution's library directory, then `lib` of every toolkit prefix the backend names
    (its environment variables first, then its prefixes, newest version first)."""
    dirs = [distribution_libdir()]
    probe = variant.backend.toolkit
    if probe is not None:
        for var in probe.env:
            value = settings.data_declared(var)
            if value:
                dirs.append(Path(value) / "lib")
        for pattern in probe.prefixes:
            path = Path(pattern)
            if "*" in pattern:
                found = sorted(path.parent.glob(path.name), key=lambda p: p.name, reverse=True)
                dirs += [p / "lib" for p in found]
            else:
                dirs.append(path / "lib")
    return list(dict.fromkeys(d for d in dirs if d.is_dir()))


def find_host_runtime(variant: ResolvedVariant, dirs: Sequence[Path] | None = None) -> HostRuntime:
    """The first directory holding the declared runtime; else the first holding any of it."""
    wanted = variant.runtime_sonames
    other: HostRuntime | None = None
    for libdir in runtime_dirs(variant) if dirs is None else dirs:
        files = runtime_files(libdir, variant.runtime_globs)
        if not files:
            continue
        if not wanted or any(name in files for name in wanted):
            return HostRuntime(libdir, files, matches=True)
        other = other or HostRuntime(libdir, files, matches=False)
    return other or HostRuntime(distribution_libdir(), (), matches=not wanted)


def needs_host_runtime(image: Image) -> bool:
    """A simulation that lays out the host's runtime (not a minbase tree, not `absent`)."""
    sim = image.simulate
    return sim is not None and sim.rootfs == "host" and sim.runtime in ("system", "prefix")


def require_host_runtime(variant: ResolvedVariant, runtime: HostRuntime, image_name: str) -> None:
    """Stop, in one line naming the fix, when `image_name` cannot be simulated with this host's runtime."""
    if runtime.usable or not variant.runtime_globs:  # a CPU variant binds no runtime
        return
    backend = variant.backend
    install = install_hint(backend)
    if variant.toolkit:
        install += f" {variant.toolkit} --runtime-only"
    fix = (
        f"install it with `{install}` (or `release toolchain install --variant {variant.name} "
        "--runtime-only`), or run the image in a container (podman or docker and the image's local recipe)"
    )
    wanted = ", ".join(variant.runtime_sonames) or ", ".join(variant.runtime_globs)
    declared = f"toolkit {variant.toolkit} ({variant.toolkit_source})" if variant.toolkit else "no toolkit"
    if runtime.files:
        needed = variant.runtime_needed
        sonames = [n for n in runtime.files if any(n.startswith(g.rstrip("*")) for g in needed)]
        have = ", ".join(sonames or runtime.files)
        msg = (
            f"image {image_name!r} simulates the {backend.title} runtime with this machine's, which is "
            f"{have} in {runtime.libdir}, but {variant.distribution} declares {declared} and binds "
            f"{wanted}: {fix}"
        )
    else:
        looked = ", ".join(str(d) for d in runtime_dirs(variant)) or str(distribution_libdir())
        msg = (
            f"image {image_name!r} simulates the {backend.title} runtime with this machine's, and this "
            f"machine has none ({wanted} not in {looked}): {fix}"
        )
    raise ToolchainError(msg)


def install_smoke_runtime(variant: ResolvedVariant) -> int:
    """The declared runtime, where the variant's image simulations will need it from this host."""
    engine = ContainerEngine.answering() if any(i.made_here is not None for i in variant.images) else None

    def in_container(image: ResolvedImage) -> bool:
        """Smoke runs an image with a local recipe (or a stand-in for a registry image) in a real
        container, which brings its own runtime, where an engine answers and the image exists or
        root can make it."""
        local = image.made_here
        return engine is not None and local is not None and local_image_usable(engine, local)

    needing = ", ".join(i.name for i in variant.images if needs_host_runtime(i.image) and not in_container(i))
    if not needing:
        boxed = [i.name for i in variant.images if in_container(i)]
        where = f" ({', '.join(boxed)} run in {engine} containers)" if boxed else ""
        print(f"{variant.name}: no simulated image lays out the runtime from this machine{where}: "
              "nothing to do")  # fmt: skip
        return 0
    found = find_host_runtime(variant)
    if found.usable:
        print(f"{variant.name}: {', '.join(found.files)} already in {found.libdir} (for {needing})")
        return 0
    print(f"{variant.name}: {needing} lay out the {variant.backend.title} runtime from this machine")
    return install_backend(variant.backend_name, variant.toolkit, runtime_only=True)
