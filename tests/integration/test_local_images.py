"""The suite's `local_images` fixture makes a missing image instead of skipping the test that
needs it: a fresh machine (CI's) has no local images, and a test may run alone (`-k`)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from release.config.pythons import python
from release.machine import images
from release.machine.containers import DERIVED_LABEL
from release.machine.recipe import Recipe

from .conftest import LocalImages

THROWAWAY = "localhost/xfer-test-made-on-request"
BESIDE = "localhost/xfer-test-made-beside"
AGAIN = "localhost/xfer-test-made-again"
FORMAT = "{{.Id}} {{json .RootFS.Layers}} {{json .Config.Env}}"


def test_a_missing_local_image_is_made_on_request(local_images: LocalImages) -> None:
    # The matrix's runtime-absent recipe without interpreters: the smallest image the toolkit makes
    # (debootstrap's result is cached by make-image.sh, so this costs an import, not a download).
    recipe = dataclasses.replace(local_images.smoke_recipe("rocm-absent"), tag=THROWAWAY, pythons=())
    beside = dataclasses.replace(recipe, tag=BESIDE)
    engine = local_images.engine
    podman = engine.command
    subprocess.run(
        [podman, "rmi", "--force", THROWAWAY, BESIDE], capture_output=True, check=False, timeout=120
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
        assert logs[waited[0]][-1].startswith(f"image {THROWAWAY}: up to date, kept ("), logs
        # The two tags are one recipe: one is made, the other is a tag of it (said so, not "made").
        ends = sorted(log[-1].split(": ", 1)[1].split(" (")[0] for log in (made, logs[2]))
        assert ends == ["made", "tagged"], logs
        assert made[-1].startswith(f"image {THROWAWAY}: "), made
        assert logs[2][-1].startswith(f"image {BESIDE}: "), logs[2]
        assert local_images.make(recipe) == THROWAWAY
        assert images.exists(engine, THROWAWAY)
        assert local_images.make(recipe) == THROWAWAY  # asked again: the same image, not remade
        # Outside the fixture's memo, make-image.sh finds its label unchanged, and the log says so.
        lines: list[str] = []
        images.ensure(engine, recipe, log=lines.append)
        assert lines[-1].startswith(f"image {THROWAWAY}: up to date, kept ("), lines
    finally:
        subprocess.run(
            [podman, "rmi", "--force", THROWAWAY, BESIDE], capture_output=True, check=False, timeout=120
        )


def test_runtime_layouts_are_a_layer_over_one_image_and_a_repeated_recipe_is_a_tag(
    local_images: LocalImages,
) -> None:
    """make-image.sh makes a recipe's Debian and interpreters once, and its runtime from another
    archive as one layer over them (clean-minbase); the /opt prefix and
    LD_LIBRARY_PATH layouts are one layer (the moved libraries) over the distribution layout's
    image, also when all three are asked for at once, as are the registry images' one-Python
    stand-ins (the other interpreters removed in their layer), and two names for one recipe (clean-minbase,
    rocm-absent) are two tags of one image."""
    engine = local_images.engine
    podman = engine.command
    layouts = (("rocm-opt-prefix", "/opt/rocm-7.2.4/lib"), ("rocm-ld-library-path", "/opt/rocm/lib"))

    def inspect(tag: str) -> tuple[str, list[str], list[str]]:
        proc = subprocess.run(
            [podman, "image", "inspect", tag, "--format", FORMAT],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        image_id, layers, env = proc.stdout.split(" ", 2)
        return image_id, json.loads(layers), json.loads(env)

    # Asked for side by side, as the real matrix's rehearsal asks (two makers of the one recipe
    # underneath: the second waits for the first and tags its image).
    local_images.make_all([local_images.smoke_recipe(name) for name in ("rocm-distro", *dict(layouts))])
    distro = inspect(local_images.make(local_images.smoke_recipe("rocm-distro")))
    # That image is HIP 7.2 from experimental, one layer over clean-minbase (the same Debian and
    # interpreters without it).
    minbase = inspect(local_images.make(local_images.smoke_recipe("clean-minbase")))
    assert distro[1][:-1] == minbase[1] and len(distro[1]) == len(minbase[1]) + 1, (distro[1], minbase[1])
    for name, prefix in layouts:
        recipe = local_images.smoke_recipe(name)
        assert recipe.runtime_prefix == prefix, recipe
        _, layers, env = inspect(local_images.make(recipe))
        assert layers[:-1] == distro[1] and len(layers) == len(distro[1]) + 1, (name, layers, distro[1])
        assert (f"LD_LIBRARY_PATH={prefix}" in env) == (recipe.runtime_via == "LD_LIBRARY_PATH"), env
        found = subprocess.run(
            [podman, "run", "--rm", "--network=none", recipe.tag, "sh", "-c",
             f"ls {prefix}/libamdhip64.so.7 && ! ls /usr/lib/x86_64-linux-gnu/libamdhip64.so.7"],
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert found.returncode == 0, (name, found.stdout, found.stderr)
    # The registry images' stand-ins (one Python each) are a layer over the same image too, the
    # other interpreters removed in it.
    variants = local_images.plan.variants.values()
    standins = [image.standin for v in variants for image in v.images if image.standin]
    assert standins, "matrix.yaml declares no registry serving image with a stand-in"
    for recipe in standins:
        _, layers, _ = inspect(local_images.make(recipe))
        assert layers[:-1] == distro[1] and len(layers) == len(distro[1]) + 1, (recipe.tag, layers, distro[1])
        listed = subprocess.run(
            [podman, "run", "--rm", "--network=none", recipe.tag, "ls", "/opt/python"],
            capture_output=True, text=True, check=True, timeout=120,
        )  # fmt: skip
        tags = [f"cp{v.replace('.', '')}-cp{v.replace('.', '')}" for v in recipe.pythons]
        assert listed.stdout.split() == tags, (recipe.tag, listed.stdout)
    # Serving images' recipes that differ only in their tag are one image.
    same: dict[Recipe, list[str]] = {}
    served = {image.local for v in local_images.plan.variants.values() for image in v.images if image.local}
    for recipe in sorted(served, key=lambda r: r.tag):
        key = dataclasses.replace(images.recipe_of(recipe), tag="")  # the recipe without its name
        same.setdefault(key, []).append(local_images.make(recipe))
    repeated = [tags for tags in same.values() if len(tags) > 1]
    assert repeated, "matrix.yaml no longer names one recipe twice: this check needs another pair"
    for tags in repeated:
        assert len({inspect(tag)[0] for tag in tags}) == 1, tags


FLAKY_PODMAN = """#!/bin/sh
# podman, but the first `podman images` fails as it does while another process removes an image
# (it cannot read a label: podman #24800); every other call is the real one.
if [ "$1" = images ] && [ ! -e "$FLAKY_STATE" ]; then
  : > "$FLAKY_STATE"
  echo 'Error: retrieving label for image "0123abcd": image not known' >&2
  exit 125
fi
exec "$REAL_PODMAN" "$@"
"""


def test_a_passing_podman_images_failure_does_not_make_a_recipe_twice(
    local_images: LocalImages, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second tag of a recipe an image already has is a tag of that image, also when the
    `podman images` that finds it fails once (as it does while another process removes an image):
    taken for "no image of this recipe", it made the recipe a second time, beside the first."""
    engine = local_images.engine
    podman = engine.command
    recipe = dataclasses.replace(local_images.smoke_recipe("rocm-absent"), tag=THROWAWAY, pythons=())
    again = dataclasses.replace(recipe, tag=AGAIN)
    subprocess.run([podman, "rmi", "--force", AGAIN], capture_output=True, check=False, timeout=120)
    try:
        # Made here, not through the fixture: its memo says made after the test above removed it.
        images.ensure(engine, recipe, log=lambda _line: None)
        assert images.exists(engine, THROWAWAY)
        bindir = tmp_path / "bin"
        bindir.mkdir()
        (bindir / "podman").write_text(FLAKY_PODMAN)
        (bindir / "podman").chmod(0o755)
        state = tmp_path / "failed-once"
        env = {
            "PATH": f"{bindir}:{os.environ['PATH']}",
            "FLAKY_STATE": str(state),
            "REAL_PODMAN": shutil.which(engine.command) or engine.command,
        }
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        lines: list[str] = []
        images.ensure(engine, again, log=lines.append)
        assert state.exists(), "the stand-in podman never failed: this test proves nothing"
        assert any("the image made from the same inputs" in line for line in lines), lines
        assert not any("debootstrap" in line for line in lines), "the recipe was made a second time"
        ids = subprocess.run(
            [podman, "image", "inspect", THROWAWAY, AGAIN, "--format", "{{.Id}}"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout.split()  # fmt: skip
        assert len(ids) == 2 and len(set(ids)) == 1, ids
    finally:
        subprocess.run(
            [podman, "rmi", "--force", THROWAWAY, AGAIN], capture_output=True, check=False, timeout=120
        )


def test_an_images_interpreters_start_from_their_own_bytecode(local_images: LocalImages) -> None:
    """The interpreters are copied into an image with their standard library's bytecode (not the
    -O/-OO copies), so a Python started in a container compiles nothing it imports from it: after
    a venv and the imports a smoke leg makes, the container's own layer holds no new .pyc."""
    recipe = local_images.smoke_recipe("clean-minbase")
    assert recipe.pythons, "clean-minbase has no interpreter: this check needs one"
    tag = local_images.make(recipe)
    engine = local_images.engine
    podman = engine.command
    name = f"xfer-bytecode-{os.getpid()}"
    # the newest interpreter this machine has (the image holds those only: no free-threaded one here)
    found, _ = images.image_interpreters(recipe.pythons)
    home = python(list(found)[-1]).manylinux_path()
    imports = "import json, ssl, ctypes, email.parser"
    script = f"{home}/bin/python -m venv --without-pip /tmp/v && /tmp/v/bin/python -c '{imports}'"
    try:
        subprocess.run(
            [podman, "run", "--name", name, "--network=none", tag, "sh", "-c", script],
            capture_output=True, text=True, check=True, timeout=120,
        )  # fmt: skip
        diff = subprocess.run(
            [podman, "diff", name], capture_output=True, text=True, check=True, timeout=60
        ).stdout.split()
    finally:
        subprocess.run([podman, "rm", "--force", name], capture_output=True, check=False, timeout=60)
    assert [path for path in diff if path.endswith(".pyc")] == [], diff
    compiled = subprocess.run(
        [podman, "run", "--rm", "--network=none", tag, "find", "-L", f"{home}/lib", "-name", "*.pyc"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout.split()  # fmt: skip
    assert len(compiled) > 500, f"{len(compiled)} .pyc files under {home}/lib"
    assert not [path for path in compiled if ".opt-" in path], "the -O/-OO bytecode is in the image"


def test_a_build_image_with_a_toolkit_is_one_layer_over_the_image_without_it(
    local_images: LocalImages,
) -> None:
    """The cuda build image is the cpu build image (the same recipe but for its toolkit install)
    plus one layer, the install's: made side by side, the cpu image is made once; nvcc runs in the
    result, and a container of it has the base's environment (the install's settings are not kept)."""
    cpu, cuda = local_images.build_recipe("cpu"), local_images.build_recipe("cuda")
    assert cuda.toolkit_install and not cpu.toolkit_install
    without = dataclasses.replace(images.recipe_of(cuda), tag=cpu.tag, toolkit_install="")
    assert without == images.recipe_of(cpu), "the cuda recipe is not the cpu one and a toolkit"
    local_images.make_all([cuda, cpu])
    engine = local_images.engine
    podman = engine.command
    described = {}
    for recipe in (cpu, cuda):
        proc = subprocess.run(
            [podman, "image", "inspect", recipe.tag, "--format", FORMAT],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        _, layers, env = proc.stdout.split(" ", 2)
        described[recipe.tag] = (json.loads(layers), json.loads(env))
    (cpu_layers, cpu_env), (cuda_layers, cuda_env) = described[cpu.tag], described[cuda.tag]
    assert cuda_layers[:-1] == cpu_layers and len(cuda_layers) == len(cpu_layers) + 1, cuda_layers
    # What a build in either sees (podman adds its own container= and TERM= to every container).
    seen = {}
    for recipe in (cpu, cuda):
        proc = subprocess.run(
            [podman, "run", "--rm", "--network=none", recipe.tag, "env"],
            capture_output=True, text=True, check=True, timeout=120,
        )  # fmt: skip
        seen[recipe.tag] = sorted(x for x in proc.stdout.splitlines() if not x.startswith("HOSTNAME="))
    assert seen[cuda.tag] == seen[cpu.tag]
    assert set(cpu_env) <= set(cuda_env), (cpu_env, cuda_env)
    nvcc = subprocess.run(
        [podman, "run", "--rm", "--network=none", cuda.tag, "/usr/local/cuda/bin/nvcc", "--version"],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert nvcc.returncode == 0 and "release 13.0" in nvcc.stdout, (nvcc.stdout, nvcc.stderr)
    # The rocm build image: the same cpu image, HIP 7.2's packages from experimental (one layer),
    # then its toolkit install (install-rocm.sh 7.2, another).
    rocm = local_images.build_recipe("rocm")
    assert rocm.toolkit_install and rocm.packages and all("/" in package for package in rocm.packages)
    proc = subprocess.run(
        [podman, "image", "inspect", local_images.make(rocm), "--format", FORMAT],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    rocm_layers = json.loads(proc.stdout.split(" ", 2)[1])
    assert rocm_layers[:-2] == cpu_layers and len(rocm_layers) == len(cpu_layers) + 2, rocm_layers


DERIVED = "localhost/xfer-test-derived"
OLD_CROSS = "localhost/xfer-test-old-cross"
STALE = "localhost/xfer-test-stale-tag"


def test_an_image_committed_over_a_recipe_image_is_never_taken_for_it(local_images: LocalImages) -> None:
    """A cross image is committed over a build image. It kept the build image's inputs label, and
    the entrypoint of the run that made it (`/bin/sh -c SCRIPT`); a later make of another recipe
    with the same inputs (Mooncake's cuda image over the same packages) then took the cross image
    for its base and failed with `/bin/sh: 0: cannot open bash`. Now the committed image drops the
    label and is marked derived, and an old toolkit's cross image, even under the recipe's own tag,
    is passed over: the recipe's tag ends on the recipe's image."""
    engine = local_images.engine
    podman = engine.command
    recipe = local_images.smoke_recipe("clean-minbase")
    base = local_images.make(recipe)

    def inspect(tag: str, template: str) -> str:
        return subprocess.run(
            [podman, "image", "inspect", tag, "--format", template],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout.strip()  # fmt: skip

    inputs = inspect(base, '{{index .Labels "io.release.image.inputs"}}')
    base_id = inspect(base, "{{.Id}}")
    assert len(inputs) == 64
    subprocess.run(
        [podman, "rmi", "--force", DERIVED, OLD_CROSS, STALE],
        capture_output=True, check=False, timeout=120,
    )  # fmt: skip
    try:
        engine.commit_script(base, "true", DERIVED, name="xfer-test-derive", labels={"io.xfer.test": "1"})
        labels = '{{index .Labels "io.release.image.inputs"}}|{{index .Labels "' + DERIVED_LABEL + '"}}'
        assert inspect(DERIVED, labels) == f"|{base}"
        assert inspect(DERIVED, "{{json .Config.Entrypoint}} {{json .Config.Cmd}}") in (
            'null ["/bin/bash"]',
            '[] ["/bin/bash"]',
        )
        # What an older toolkit committed: the base's inputs label kept, the cross label set.
        subprocess.run([podman, "rm", "-f", "xfer-test-old"], capture_output=True, check=False, timeout=60)
        old = [podman, "run", "--name", "xfer-test-old", "--entrypoint", "/bin/sh", base, "-c", "true"]
        subprocess.run(old, capture_output=True, check=True, timeout=120)
        mark = ["--change", "LABEL io.release-toolkit.cross.base=old"]
        subprocess.run(
            [podman, "commit", "-q", *mark, "xfer-test-old", OLD_CROSS],
            capture_output=True,
            check=True,
            timeout=300,
        )
        subprocess.run([podman, "rm", "-f", "xfer-test-old"], capture_output=True, check=False, timeout=60)
        assert inspect(OLD_CROSS, '{{index .Labels "io.release.image.inputs"}}') == inputs
        subprocess.run([podman, "tag", OLD_CROSS, STALE], capture_output=True, check=True, timeout=60)
        local_images.make(dataclasses.replace(recipe, tag=STALE))
        assert inspect(STALE, "{{.Id}}") == base_id  # the recipe's image, not the old cross image
    finally:
        subprocess.run(
            [podman, "rmi", "--force", DERIVED, OLD_CROSS, STALE],
            capture_output=True,
            check=False,
            timeout=120,
        )
