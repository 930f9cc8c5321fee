"""How an image is planned before a leaf of make-image.sh runs: which image a recipe is a layer
over, and the leaves' arguments (release/machine/imaging.py), without a process."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.machine import images, imaging
from release.plan.resolve import LocalImage

HOMES = {f"3.{m}": Path(f"/p/3.{m}.0") for m in range(9, 14)}
HIP = ("libamdhip64.so*", "libhsa-runtime64.so*", "libamd_comgr.so*")


@pytest.fixture(autouse=True)
def _interpreters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(images, "self_contained_home", HOMES.get)


def _chain(image: LocalImage) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """(kind, include, pythons) of each step from the image down to its whole image."""
    recipe, found = images.recipe_of(image), []
    while (layer := recipe.layer()) is not None:
        kind, under = layer
        found.append((kind, recipe.include, recipe.pythons))
        recipe = under
    return [*found, ("base", recipe.include, recipe.pythons)]


def test_a_build_image_with_a_toolkit_and_another_archive_is_two_layers_over_the_suites_image() -> None:
    rocm = LocalImage(
        tag="localhost/b", suite="trixie", packages=("libamdhip64-dev/experimental", "pkgconf"),
        pythons=("3.12",), toolchain=True, gcc="14", toolkit_install="bash scripts/install-rocm.sh 7.2",
    )  # fmt: skip
    assert [(kind, include) for kind, include, _ in _chain(rocm)] == [
        ("toolkit", ("libamdhip64-dev/experimental", "pkgconf")),
        ("packages", ("libamdhip64-dev/experimental", "pkgconf")),
        ("base", ("pkgconf",)),  # the suite's own packages are debootstrap's, the other archive's a layer
    ]
    recipe = images.recipe_of(rocm)
    base = recipe.layer()[1].layer()[1]  # type: ignore[index]
    argv = imaging.base_argv(base, "f" * 64)
    assert argv[:5] == ["base", "--tag", "localhost/b", "--label", f"{imaging.LABEL}={'f' * 64}"]
    assert argv[argv.index("--include") + 1] == "pkgconf" and argv[argv.index("--gcc") + 1] == "14"
    assert "--minbase-only" not in argv and argv[argv.index("--env-python") + 1] == "3.9"
    toolkit = imaging.layer_argv(recipe, "toolkit", "a" * 64, "f" * 64)
    assert toolkit[-3:] == ["toolkit", "bash scripts/install-rocm.sh 7.2", "/p/3.12.0/bin"]
    packages = imaging.layer_argv(recipe.layer()[1], "packages", "a" * 64, "f" * 64)  # type: ignore[index]
    assert packages[-4:] == ["http://deb.debian.org/debian", "trixie", "experimental", "libamdhip64-dev"]


@pytest.mark.parametrize(
    ("via", "prefix", "links", "leaf"),
    [
        ("ld.so.conf.d", "/opt/rocm-7.2.4/lib", None,
         ["layout", "/opt/rocm-7.2.4/lib", "ld.so.conf.d", ",".join(HIP)]),
        ("rocm_sdk", "/opt/venv", None, ["therock_pip", "/opt/venv", ",".join(HIP), "3.12"]),
        ("none", "/opt/rocm/core-10.0/lib", "/opt/rocm/lib",
         ["therock_os", "/opt/rocm/core-10.0/lib", ",".join(HIP), "/opt/rocm/lib"]),
    ],
)  # fmt: skip
def test_a_runtime_layout_is_a_layer_over_every_interpreters_image(
    via: str, prefix: str, links: str | None, leaf: list[str]
) -> None:
    """A one-Python layout (a stand-in, TheRock's two) is a layer over the image of its packages
    with every supported interpreter, the others dropped in the layer."""
    image = LocalImage(
        tag="localhost/s", suite="trixie", packages=("libamdhip64-7/experimental",), pythons=("3.12",),
        toolchain=False, runtime_prefix=prefix, runtime_via=via, runtime_globs=HIP, runtime_links=links,
    )  # fmt: skip
    assert [kind for kind, _, _ in _chain(image)] == ["layout", "packages", "base"]
    assert _chain(image)[1][2] == ("3.10", "3.11", "3.12", "3.13")
    recipe = images.recipe_of(image)
    argv = imaging.layer_argv(recipe, "layout", "a" * 64, "f" * 64)
    assert argv[-len(leaf) :] == leaf
    assert [argv[i + 1] for i, word in enumerate(argv) if word == "--drop"] == [
        "3.10=/p/3.10.0", "3.11=/p/3.11.0", "3.13=/p/3.13.0",
    ]  # fmt: skip
    assert ("--env" in argv) == (via == "LD_LIBRARY_PATH")
