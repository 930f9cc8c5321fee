"""The suite's `local_images` fixture makes a missing image instead of skipping the test that
needs it: a fresh machine (CI's) has no local images, and a test may run alone (`-k`)."""

from __future__ import annotations

import dataclasses
import subprocess

from release.build import images

from .conftest import LocalImages

THROWAWAY = "localhost/xfer-test-made-on-request"


def test_a_missing_local_image_is_made_on_request(local_images: LocalImages) -> None:
    # The matrix's runtime-absent recipe without interpreters: the smallest image the toolkit makes
    # (debootstrap's result is cached by make-image.sh, so this costs an import, not a download).
    recipe = dataclasses.replace(local_images.smoke_recipe("rocm-absent"), tag=THROWAWAY, pythons=())
    engine = local_images.engine
    subprocess.run([engine, "rmi", "--force", THROWAWAY], capture_output=True, check=False, timeout=120)
    assert not images.exists(engine, THROWAWAY)
    try:
        made: list[str] = []
        images.ensure(engine, recipe, log=made.append)
        assert made[-1].startswith(f"image {THROWAWAY}: made ("), made
        assert local_images.make(recipe) == THROWAWAY
        assert images.exists(engine, THROWAWAY)
        assert local_images.make(recipe) == THROWAWAY  # asked again: the same image, not remade
        # Outside the fixture's memo, make-image.sh finds its label unchanged, and the log says so.
        lines: list[str] = []
        images.ensure(engine, recipe, log=lines.append)
        assert lines[-1].startswith(f"image {THROWAWAY}: up to date, kept ("), lines
    finally:
        subprocess.run([engine, "rmi", "--force", THROWAWAY], capture_output=True, check=False, timeout=120)
