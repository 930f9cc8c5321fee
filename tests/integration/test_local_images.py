"""The suite's `local_images` fixture makes a missing image instead of skipping the test that
needs it: a fresh machine (CI's) has no local images, and a test may run alone (`-k`)."""

from __future__ import annotations

import dataclasses
import subprocess
from concurrent.futures import ThreadPoolExecutor

from release.build import images

from .conftest import LocalImages

THROWAWAY = "localhost/xfer-test-made-on-request"
BESIDE = "localhost/xfer-test-made-beside"


def test_a_missing_local_image_is_made_on_request(local_images: LocalImages) -> None:
    # The matrix's runtime-absent recipe without interpreters: the smallest image the toolkit makes
    # (debootstrap's result is cached by make-image.sh, so this costs an import, not a download).
    recipe = dataclasses.replace(local_images.smoke_recipe("rocm-absent"), tag=THROWAWAY, pythons=())
    beside = dataclasses.replace(recipe, tag=BESIDE)
    engine = local_images.engine
    subprocess.run(
        [engine, "rmi", "--force", THROWAWAY, BESIDE], capture_output=True, check=False, timeout=120
    )
    assert not images.exists(engine, THROWAWAY)
    try:
        # Three makers at once (as parallel test workers ask): the same tag twice, another beside
        # it. One maker per tag: the second ask for a tag waits and finds it made; the other tag is
        # made side by side, never waiting (a machine-wide lock made two of the three wait).
        logs: list[list[str]] = [[], [], []]
        with ThreadPoolExecutor(3) as pool:
            asked = [(recipe, logs[0]), (recipe, logs[1]), (beside, logs[2])]
            for done in [pool.submit(images.ensure, engine, r, log=log.append) for r, log in asked]:
                done.result()
        waited = [i for i, log in enumerate(logs) if any("is locked by" in line for line in log)]
        assert waited in ([0], [1]), logs
        made = logs[1 - waited[0]]
        assert made[-1].startswith(f"image {THROWAWAY}: made ("), made
        assert logs[waited[0]][-1].startswith(f"image {THROWAWAY}: up to date, kept ("), logs
        assert logs[2][-1].startswith(f"image {BESIDE}: made ("), logs[2]
        assert local_images.make(recipe) == THROWAWAY
        assert images.exists(engine, THROWAWAY)
        assert local_images.make(recipe) == THROWAWAY  # asked again: the same image, not remade
        # Outside the fixture's memo, make-image.sh finds its label unchanged, and the log says so.
        lines: list[str] = []
        images.ensure(engine, recipe, log=lines.append)
        assert lines[-1].startswith(f"image {THROWAWAY}: up to date, kept ("), lines
    finally:
        subprocess.run(
            [engine, "rmi", "--force", THROWAWAY, BESIDE], capture_output=True, check=False, timeout=120
        )
