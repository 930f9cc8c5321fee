"""An image recipe as make-image.sh is given it, its inputs hash, and the algebra of bases and layers.

A `Recipe` is a local image's recipe made concrete for this machine: the interpreters' directories
found here, the toolkit's auditwheel bound. Its inputs hash (the image label io.release.image.inputs)
is the sha256 of `inputs_text`: the leaf scripts' content, the options, the interpreters'
directories and the host's CA certificates, written as make-image.sh wrote them when it computed
the hash itself (tests/unit/data/image_inputs.json holds its goldens). `layer` says which recipe an
image is one layer over: its runtime layout over the same recipe without it, its toolkit install
over the recipe without the install, packages from other archives over the recipe without them.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from release.machine.debian import DEFAULT_MIRROR

RUNTIME_LIBS = ("libamdhip64.so*", "libhsa-runtime64.so*", "libamd_comgr.so*", "libhiprtc.so*")
"""The runtime libraries a layout moves when the recipe names none."""
CA_DIR = Path("/usr/local/share/ca-certificates")
"""The host's extra CA certificates (`*.crt`), copied into every image and part of its inputs."""
THEROCK_STAGE = Path(__file__).with_name("therock.py")
"""What stages a TheRock layout's files (release/machine/therock.py): an input of those images too."""
LEAF_SCRIPTS = ("make-image.sh", "_common.sh", "image-layers.sh")
"""The shell that shapes an image (the leaves and the layers' scripts): its content is the first
line of every recipe's inputs."""


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """One image's make-image.sh inputs (the label is the sha256 of their text)."""

    tag: str
    suite: str
    mirror: str = DEFAULT_MIRROR
    """The Debian mirror (`images.recipe_of` gives `debian_mirror()`, the one setting)."""
    include: tuple[str, ...] = ()
    """Debian packages of the suite, and `pkg/ARCHIVE` ones from another archive."""
    pythons: tuple[str, ...] = ()
    homes: tuple[tuple[str, str], ...] = ()
    """(version, installation directory) of every interpreter the recipe or its bases copy in."""
    env_python: str | None = None
    """The interpreter at /opt/python/cp39-cp39 (build images; None: none)."""
    minbase: bool = True
    """A plain runtime image: no compilers, no build or auditwheel."""
    gcc: str = ""
    auditwheel: str = ""
    runtime_prefix: str = ""
    runtime_via: str = "ld.so.conf.d"
    runtime_libs: tuple[str, ...] = RUNTIME_LIBS
    runtime_links: str = ""
    """A directory of symbolic links to the `runtime_prefix` runtime's files (TheRock's /opt/rocm/lib)."""
    base_pythons: tuple[str, ...] = ()
    """With a layer: the interpreters of the image under it (a superset of `pythons`; empty: the same)."""
    toolkit_install: str = ""

    def home(self, version: str) -> str:
        return dict(self.homes)[version]

    @property
    def all_pythons(self) -> tuple[str, ...]:
        """Every interpreter in the image: `pythons`, then the environment interpreter if another."""
        extra = (self.env_python,) if self.env_python and self.env_python not in self.pythons else ()
        return (*self.pythons, *extra)

    @property
    def dropped(self) -> tuple[str, ...]:
        """The interpreters of the image under this one that this one removes."""
        return tuple(v for v in self.base_pythons if v not in self.pythons)

    @property
    def by_archive(self) -> dict[str, tuple[str, ...]]:
        """{archive: packages} of the `pkg/ARCHIVE` packages, in the order they are named."""
        found: dict[str, tuple[str, ...]] = {}
        for package in self.include:
            if "/" in package:
                name, archive = package.split("/", 1)
                found[archive] = (*found.get(archive, ()), name)
        return found

    def layer(self) -> tuple[str, Recipe] | None:
        """(the kind of layer, the recipe of the image under it) where this image is one layer over
        another (`layout`, `toolkit`, `packages`, in that order); None: a whole image."""
        under = self.base_pythons or self.pythons
        if self.runtime_prefix:
            return "layout", dataclasses.replace(
                self, runtime_prefix="", runtime_via="ld.so.conf.d", runtime_libs=RUNTIME_LIBS,
                runtime_links="", base_pythons=(), pythons=under,
            )  # fmt: skip
        if self.toolkit_install:
            return "toolkit", dataclasses.replace(self, toolkit_install="")
        if any("/" in package for package in self.include):
            plain = tuple(package for package in self.include if "/" not in package)
            return "packages", dataclasses.replace(self, include=plain, base_pythons=(), pythons=under)
        return None


@dataclass(frozen=True, kw_only=True)
class Digests:
    """What a recipe's inputs read from files: the leaf scripts, the toolkit scripts, the host's CA
    certificates ((path, sha256) each)."""

    leaf: str
    toolkit: str
    ca: tuple[tuple[str, str], ...] = ()
    therock: str = ""
    """The TheRock pip stand-in's sources (scripts/therock-standin), an input of `rocm_sdk` layouts."""


def inputs_text(recipe: Recipe, digests: Digests) -> str:
    """What goes into the inputs hash, one fact a line (kept as inputs/<hash>.txt, so two makes of
    one tag can be compared); the lines make-image.sh wrote when it computed the hash itself."""
    lines = [
        f"{digests.leaf}  -",
        f"suite={recipe.suite} mirror={recipe.mirror} include={','.join(recipe.include)} "
        f"minbase={int(recipe.minbase)} prefix={recipe.runtime_prefix} via={recipe.runtime_via} "
        f"libs={','.join(recipe.runtime_libs)} env_python={recipe.env_python or 'none'}",
    ]
    if recipe.runtime_links:
        lines.append(f"links={recipe.runtime_links}")
    if recipe.runtime_via == "rocm_sdk":
        lines.append(f"{digests.therock}  -")
    lines.append("env=")
    if recipe.dropped:
        lines.append(f"base-pythons={','.join(recipe.base_pythons)}")
    lines.append(f"auditwheel={recipe.auditwheel} gcc={recipe.gcc}")
    if recipe.toolkit_install:
        lines += [f"toolkit-install={recipe.toolkit_install}", f"{digests.toolkit}  -"]
    lines += [f"python {v} {recipe.home(v)}" for v in recipe.all_pythons]
    lines += [f"{digest}  {path}" for path, digest in digests.ca]
    if (layer := recipe.layer()) is not None:
        # A layer is made over the image of the recipe under it: what that image is made of (the
        # runtime libraries a layout moves, say) is this image's input too, not only this recipe's.
        kind, under = layer
        lines.append(f"over={kind} {inputs_hash(inputs_text(under, digests))}")
    return "\n".join(lines)


def inputs_hash(text: str) -> str:
    """The label io.release.image.inputs of the image whose inputs are `text`."""
    return hashlib.sha256((text + "\n").encode()).hexdigest()


def _sha256(paths: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def read_digests(scripts: Path, ca_dir: Path = CA_DIR) -> Digests:
    """The digests of this checkout's scripts and this host's CA certificates."""
    toolkit = [
        *sorted(scripts.glob("install-*.sh")),
        scripts / "hipcc-host.sh",
        scripts / "runtimes.tsv",
        scripts / "toolkits.tsv",
    ]
    ca = sorted(ca_dir.glob("*.crt")) if ca_dir.is_dir() else []
    standin = scripts / "therock-standin"
    return Digests(
        therock=_sha256([*sorted(standin.glob("*.py")), *sorted(standin.glob("*/*.py")), THEROCK_STAGE]),
        leaf=_sha256([scripts / name for name in LEAF_SCRIPTS]),
        toolkit=_sha256(toolkit),
        ca=tuple((str(path), _sha256([path])) for path in ca),
    )
