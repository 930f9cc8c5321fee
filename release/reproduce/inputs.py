"""What a rebuild needs, as the release manifest records it (`inputs`) and `release reproduce`
checks it: the source commit, `SOURCE_DATE_EPOCH`, the tools' versions, and per variant the
build image (by digest where cibuildwheel pins it; a local image by its recipe), the declared
toolkit and the build settings and environment the matrix sets. Each wheel of the manifest adds
its build identifier and the compilers its verify report found.
"""

from __future__ import annotations

import configparser
import dataclasses
import hashlib
import json
import platform
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from importlib import metadata, resources
from pathlib import Path

from release import DISTRIBUTION, __version__
from release.build.prebuild import source_date_epoch
from release.plan.resolve import ResolvedBuildImage, ResolvedVariant
from release.wheel.names import parse_platform_tag

TOOLS = ("cibuildwheel", "auditwheel", "build", "packaging")
"""The Python tools whose versions shape a wheel: cibuildwheel (and the image it pins),
auditwheel (repair), build (the PEP 517 frontend) and packaging (tags)."""
GIT_TIMEOUT = 60


def git_head(directory: Path) -> str | None:
    """The commit checked out in the git repository that holds `directory`, or None (no git, not
    a repository)."""
    if shutil.which("git") is None or not directory.is_dir():
        return None
    proc = subprocess.run(
        ["git", "-C", str(directory), "rev-parse", "--verify", "HEAD^{commit}"],
        capture_output=True, text=True, check=False, timeout=GIT_TIMEOUT,
    )  # fmt: skip
    commit = proc.stdout.strip()
    return commit if proc.returncode == 0 and len(commit) >= 40 else None


def git_changes(directory: Path) -> list[str]:
    """The tracked files with uncommitted changes below the repository of `directory` (none when it
    is not one)."""
    if git_head(directory) is None:
        return []
    proc = subprocess.run(
        ["git", "-C", str(directory), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True, check=False, timeout=GIT_TIMEOUT,
    )  # fmt: skip
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


def image_inputs(image: ResolvedBuildImage, floor: str) -> dict[str, object]:
    """The release image by digest (where cibuildwheel pins it), and the local image with its recipe
    and the recipe's sha256 (what make-image.sh was asked for)."""
    recipe = dataclasses.asdict(image.local_recipe) if image.local_recipe is not None else None
    arch = parse_platform_tag(floor).arch
    return {
        "release": image.release,
        "release_pinned": pinned_image(image.release, arch),
        "local": image.local,
        "local_recipe": recipe,
        "local_recipe_sha256": _digest(recipe) if recipe is not None else None,
    }


def variant_inputs(variant: ResolvedVariant) -> dict[str, object]:
    """What the matrix decided for one variant's build: toolkit, image, repair, settings, env."""
    settings, env = variant.build.translate()
    return {
        "distribution": variant.distribution,
        "backend": variant.backend_name,
        "toolkit": variant.toolkit,
        "floor": variant.floor,
        "excludes": list(variant.excludes),
        "build_image": image_inputs(variant.build_image, variant.floor),
        "build_backend": variant.build.backend,
        "config_settings": [list(pair) for pair in settings],
        "env": dict(sorted(env.items())),
        "before_all": variant.before_all,
    }


def collect(root: Path, variants: Mapping[str, ResolvedVariant]) -> dict[str, object]:
    """The manifest's `inputs`: everything a rebuild of the set needs besides the checkout."""
    return {
        "source": source(root, variants.values()),
        "source_date_epoch": source_date_epoch(root),
        "toolkit": {"distribution": DISTRIBUTION, "version": __version__},
        "tools": tool_versions(),
        "variants": {name: variant_inputs(v) for name, v in sorted(variants.items())},
    }


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()
