"""A container build whose image is not there: one line naming the matrix key, its line and the fix
(issue 58: a cpu variant with no `build_image` ended in podman's raw short-name error)."""

from __future__ import annotations

from pathlib import Path

from release.config.matrix import loads
from release.plan.build_image import missing_image
from release.plan.resolve import ResolvedBuildImage
from release.plan.steps import make_plan

ROOT = Path(__file__).resolve().parents[2]
MATRIX = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
CPU_IMAGE = """\
    build_image:                      # release CI: manylinux_2_28; local: Debian trixie (glibc 2.41, GCC 14)
      debian: {suite: trixie}
"""


def _build_image(text: str, variant: str) -> ResolvedBuildImage:
    backends = ROOT / "packaging" / "backends"
    loaded = loads(text, path=ROOT / "matrix.yaml", display="matrix.yaml", backends_dir=backends)
    return make_plan(loaded, variants=(variant,)).builds_of(variant)[0].variant.build_image


def _line(text: str, needle: str) -> int:
    """The 1-based number of the first line that is `needle` (stripped)."""
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.strip() == needle)


def test_a_variant_without_a_build_image_names_its_line_and_the_recipe_to_add() -> None:
    assert CPU_IMAGE in MATRIX, "the committed matrix's cpu build image changed: update CPU_IMAGE"
    text = MATRIX.replace(CPU_IMAGE, "")
    image = _build_image(text, "cpu")
    assert image.local_recipe is None and image.local == "manylinux_2_28"
    line = missing_image(image, image.local, "podman")
    where = f"matrix.yaml:{_line(text, 'cpu:')} (variants.cpu)"
    assert line.startswith(f"{where}: the build image manylinux_2_28 "), line
    assert "is not in podman's store" in line
    assert "`build_image: {debian: {suite: trixie}}` under variants.cpu" in line
    assert "cibuildwheel's name of a manylinux image" in line
    assert "\n" not in line


def test_a_declared_recipe_names_the_build_image_key() -> None:
    image = _build_image(MATRIX, "rocm")
    assert image.local_recipe is not None
    lines = MATRIX.splitlines()
    after = range(_line(MATRIX, "rocm:"), len(lines))
    declared = next(n for n in after if lines[n].split("#")[0].strip() == "build_image:") + 1
    line = missing_image(image, image.local, "podman")
    where = f"matrix.yaml:{declared} (variants.rocm.build_image)"
    assert line.startswith(f"{where}: the build image {image.local} "), line
    assert "make it" in line and "--image" in line
