"""What a container build says when its image is not here: one line naming where the matrix
declares the image (or the variant, when it declares none) and the fixes. Issue 58: a cpu variant
without `build_image` ended in podman's raw short-name error about `manylinux_2_28`."""

from __future__ import annotations

from release.plan.resolve import ResolvedBuildImage


def missing_image(build_image: ResolvedBuildImage, image: str, engine: object) -> str:
    """The one line for a local build whose image is not in `engine`'s store: where the matrix
    declares it (or the variant, when it declares none) and the fixes."""
    if build_image.local_recipe is None and image == build_image.local:
        recipe = "`build_image: {debian: {suite: trixie}}`"
        fix = (
            f"declare one to make here: {recipe} under variants.{build_image.variant} "
            "(`release init` writes it), or pull an image and pass --image"
        )
        if "/" not in image:
            fix += f" (`{image}` is cibuildwheel's name of a manylinux image: --release-image uses it)"
    else:
        fix = "make it (a matrix `build_image.debian` recipe does) or name another with --image"
    where = f"{build_image.declared_at}: " if build_image.declared_at else ""
    return f"{where}the build image {image} is not in {engine}'s store: {fix}"
