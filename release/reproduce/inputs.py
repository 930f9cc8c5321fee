"""What a rebuild needs, as the release manifest records it (`inputs`) and `release reproduce`
checks it: the source commit, `SOURCE_DATE_EPOCH`, the tools' versions, and per variant the
build image (by digest where cibuildwheel pins it; a local image by its recipe and the Debian
packages installed in it), the declared toolkit and the build settings and environment the matrix
sets. Each wheel of the manifest adds its build identifier and the compilers its verify report
found.

A local image is made here from Debian packages (scripts/make-image.sh), and its recipe names
suites, not versions: the same recipe made a month later holds other packages (sid and
experimental move). So the manifest records the image's installed packages too, read from the
image (`dpkg-query`, one container per distinct image, no network), and `release reproduce`
names the packages that differ when it rebuilds in that image. Where they cannot be read (no
container engine answers, the image is absent here, as on a CI runner that builds in the release
image), the manifest says null and why.
"""

from __future__ import annotations

import configparser
import dataclasses
import hashlib
import json
import platform
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path

from release import DISTRIBUTION, __version__, process
from release.builder.prebuild import source_date_epoch
from release.errors import ReleaseError
from release.machine import images
from release.machine.containers import ContainerEngine
from release.plan.resolve import ResolvedBuildImage, ResolvedVariant
from release.smoke.probe import run_probe
from release.wheel.names import parse_platform_tag

TOOLS = ("cibuildwheel", "auditwheel", "build", "packaging")
"""The Python tools whose versions shape a wheel: cibuildwheel (and the image it pins),
auditwheel (repair), build (the PEP 517 frontend) and packaging (tags)."""
GIT_TIMEOUT = 60
PACKAGES_TIMEOUT = 120.0
"""The bound on the one container that lists a local image's packages (0.3 to 0.8 s here)."""
DPKG_QUERY = "dpkg-query -W -f '${db:Status-Abbrev} ${binary:Package}=${Version}\\n'"
"""Every package dpkg knows, with its state: only installed ones (`ii`) count; `binary:Package`
keeps the architecture of a package installed for two (`libc6:i386`)."""
PACKAGE_KEYS = ("local_packages", "local_packages_sha256", "local_packages_reason")
"""The keys of a variant's `build_image` that hold its local image's packages."""


@dataclass(frozen=True)
class ImagePackages:
    """The Debian packages installed in a local image, `name=version` sorted by name; or None and
    the one line saying why they could not be read."""

    packages: tuple[str, ...] | None
    reason: str | None = None

    def as_inputs(self) -> dict[str, object]:
        found = list(self.packages) if self.packages is not None else None
        return {
            "local_packages": found,
            "local_packages_sha256": _digest(found) if found is not None else None,
            "local_packages_reason": self.reason,
        }


PackageQuery = Callable[[str], ImagePackages]
"""(a local image's tag) -> its packages: `package_reader()` here, a stand-in in tests."""
NOT_READ = ImagePackages(None, "not read (the variant's inputs were resolved without the image)")


def parse_packages(output: str) -> tuple[str, ...]:
    """The installed packages of `DPKG_QUERY`'s output, `name=version`, sorted by name."""
    found = {}
    for line in output.splitlines():
        state, _, package = line.strip().partition(" ")
        name, equals, _version = package.strip().partition("=")
        if state == "ii" and name and equals:
            found[name] = package.strip()
    return tuple(found[name] for name in sorted(found))


def read_packages(
    engine: ContainerEngine | None, tag: str, *, timeout: float = PACKAGES_TIMEOUT
) -> ImagePackages:
    """The packages installed in the local image `tag`, from one `--rm` container without network
    (`release.smoke.probe.run_probe`); None with the reason where no engine answers, the image is
    absent or does not run dpkg-query. Never raises for a missing image or engine."""
    if engine is None:
        return ImagePackages(None, "no container engine answers here (podman or docker)")
    try:
        if not images.exists(engine, tag):
            return ImagePackages(None, f"image {tag} is not in {engine}'s store here")
        found = parse_packages(run_probe(engine, tag, DPKG_QUERY, timeout=timeout))
    except (ReleaseError, OSError, subprocess.SubprocessError) as exc:
        return ImagePackages(None, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    if not found:
        return ImagePackages(None, f"image {tag}: dpkg-query lists no installed package")
    return ImagePackages(found)


def once(query: PackageQuery) -> PackageQuery:
    """`query` asked once per image (variants share images: one container per distinct image)."""
    seen: dict[str, ImagePackages] = {}

    def remembered(tag: str) -> ImagePackages:
        if tag not in seen:
            seen[tag] = query(tag)
        return seen[tag]

    return remembered


def package_reader() -> PackageQuery:
    """`read_packages` with the container engine found once, on the first image asked about, and
    each image read once."""
    engines: list[ContainerEngine | None] = []

    def query(tag: str) -> ImagePackages:
        if not engines:
            try:
                engines.append(ContainerEngine.answering())
            except (OSError, subprocess.SubprocessError):  # `podman info` hung past its deadline
                engines.append(None)
        return read_packages(engines[0], tag)

    return once(query)


def package_differences(recorded: object, found: Iterable[str]) -> list[str]:
    """`name: recorded -> found` for each package whose version differs, is missing here
    (`-> absent`) or was not recorded (`absent -> version`), sorted by name."""
    then = _by_name(recorded if isinstance(recorded, list) else [])
    now = _by_name(found)
    return [
        f"{name}: {then.get(name, 'absent')} -> {now.get(name, 'absent')}"
        for name in sorted(set(then) | set(now))
        if then.get(name) != now.get(name)
    ]


def _by_name(packages: Iterable[object]) -> dict[str, str]:
    pairs = (str(p).partition("=") for p in packages)
    return {name: version for name, _eq, version in pairs}


def git_head(directory: Path) -> str | None:
    """The commit checked out in the git repository that holds `directory`, or None (no git, not
    a repository)."""
    if shutil.which("git") is None or not directory.is_dir():
        return None
    proc = process.run(
        ["git", "-C", str(directory), "rev-parse", "--verify", "HEAD^{commit}"], timeout=GIT_TIMEOUT
    )
    commit = proc.stdout.strip()
    return commit if proc.returncode == 0 and len(commit) >= 40 else None


def git_changes(directory: Path) -> list[str]:
    """The tracked files with uncommitted changes below the repository of `directory` (none when it
    is not one)."""
    if git_head(directory) is None:
        return []
    proc = process.run(
        ["git", "-C", str(directory), "status", "--porcelain", "--untracked-files=no"], timeout=GIT_TIMEOUT
    )
    return [line[3:] for line in proc.stdout.splitlines() if len(line) > 3]


def source(root: Path, variants: Iterable[ResolvedVariant]) -> dict[str, str | None]:
    """The commit of the matrix's repository, and the engine's where its source lives in another
    checkout (a Mooncake clone beside the toolkit's matrix)."""
    commit = git_head(root)
    engines = {git_head(v.engine_dir) for v in variants} - {None, commit}
    return {"commit": commit, "engine_commit": sorted(e for e in engines if e)[0] if engines else None}


def tool_versions() -> dict[str, str | None]:
    """The installed versions of `TOOLS` and the Python that runs the toolkit."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for tool in TOOLS:
        try:
            found[tool] = metadata.version(tool)
        except metadata.PackageNotFoundError:
            found[tool] = None
    return found


def pinned_image(name: str, arch: str) -> str | None:
    """The image cibuildwheel pins for a short name (`manylinux_2_28` on x86_64), by digest; None
    for a full reference or a name it does not pin."""
    if "/" in name or ":" in name or "@" in name:
        return None
    try:
        text = (resources.files("cibuildwheel") / "resources" / "pinned_docker_images.cfg").read_text()
    except (ModuleNotFoundError, OSError):
        return None
    pins = configparser.ConfigParser()
    try:
        pins.read_string(text)
        reference = pins.get(arch, name, fallback=None)
    except configparser.Error:
        return None
    return reference.split("#")[0].strip() if reference else None


def image_inputs(
    image: ResolvedBuildImage, floor: str, packages: PackageQuery | None = None
) -> dict[str, object]:
    """The release image by digest (where cibuildwheel pins it), and the local image with its recipe,
    the recipe's sha256 (what make-image.sh was asked for) and, read through `packages`, the
    packages installed in it (what make-image.sh made of the recipe that day). Without `packages`
    (or for an image without a recipe) the packages are null, with the reason."""
    recipe = dataclasses.asdict(image.local_recipe) if image.local_recipe is not None else None
    arch = parse_platform_tag(floor).arch
    if recipe is None:
        installed = ImagePackages(None, "not a local image made from a recipe")
    else:
        installed = packages(image.local) if packages is not None else NOT_READ
    return {
        "release": image.release,
        "release_pinned": pinned_image(image.release, arch),
        "local": image.local,
        "local_recipe": recipe,
        "local_recipe_sha256": _digest(recipe) if recipe is not None else None,
        **installed.as_inputs(),
    }


def variant_inputs(variant: ResolvedVariant, packages: PackageQuery | None = None) -> dict[str, object]:
    """What the matrix decided for one variant's build: toolkit, image, repair, settings, env (the
    local image's packages read through `packages`; null without it)."""
    settings, env = variant.build.translate()
    return {
        "distribution": variant.distribution,
        "backend": variant.backend_name,
        "toolkit": variant.toolkit,
        "floor": variant.floor,
        "excludes": list(variant.excludes),
        "build_image": image_inputs(variant.build_image, variant.floor, packages),
        "build_backend": variant.build.backend,
        "config_settings": [list(pair) for pair in settings],
        "env": dict(sorted(env.items())),
        "before_all": variant.before_all,
    }


def collect(
    root: Path, variants: Mapping[str, ResolvedVariant], *, packages: PackageQuery | None = None
) -> dict[str, object]:
    """The manifest's `inputs`: everything a rebuild of the set needs besides the checkout. The
    local images' packages are read through `packages` (default `package_reader()`: one container
    per distinct image)."""
    query = once(packages) if packages is not None else package_reader()
    return {
        "source": source(root, variants.values()),
        "source_date_epoch": source_date_epoch(root),
        "toolkit": {"distribution": DISTRIBUTION, "version": __version__},
        "tools": tool_versions(),
        "variants": {name: variant_inputs(v, query) for name, v in sorted(variants.items())},
    }


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()
