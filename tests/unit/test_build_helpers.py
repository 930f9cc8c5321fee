"""Pure pieces of building, staging and publishing that earlier went wrong (no processes)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from release.builder.host import forget_stale_builds, remove_previous_wheels
from release.builder.stage import _ignore
from release.config.matrix import load
from release.errors import MatrixError
from release.publish.index import simple_url_for


def test_previous_wheels_of_the_built_pythons_go_and_nothing_else(tmp_path: Path) -> None:
    names = [
        "x_cpu-0.1.0-cp312-cp312-manylinux_2_34_x86_64.whl",
        "x_cpu-0.1.0-1-cp312-cp312-manylinux_2_34_x86_64.whl",  # with a build tag
        "x_cpu-0.1.0-cp313-cp313-manylinux_2_34_x86_64.whl",
        "notes.whl",  # not a wheel name at all: left alone, no crash
    ]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    (tmp_path / (names[0] + ".verify.json")).write_text("{}")
    remove_previous_wheels(tmp_path, {"cp312"})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([names[2], names[3]])


def test_a_new_configuration_drops_cmake_trees(tmp_path: Path) -> None:
    for tree in ("core-build", "core-prefix", "build-cp312", "src"):
        (tmp_path / tree).mkdir()
        (tmp_path / tree / "CMakeCache.txt").write_text("XFER_STALE_MARK:UNINITIALIZED=ON\n")
    forget_stale_builds(tmp_path, "first")
    assert not (tmp_path / "core-build").exists() and not (tmp_path / "build-cp312").exists()
    assert (tmp_path / "src").exists()
    (tmp_path / "core-build").mkdir()
    forget_stale_builds(tmp_path, "first")  # same configuration: kept
    assert (tmp_path / "core-build").exists()
    forget_stale_builds(tmp_path, "second")
    assert not (tmp_path / "core-build").exists()


def test_staging_skips_build_output_only_at_the_top(tmp_path: Path) -> None:
    ignore = _ignore(tmp_path)
    assert ignore(str(tmp_path), ["build", "dist", "src", "x.egg-info"]) == {"build", "dist", "x.egg-info"}
    assert ignore(str(tmp_path / "src"), ["build", "dist", "__pycache__"]) == {"__pycache__"}


def test_credentials_never_reach_the_listing_url() -> None:
    assert simple_url_for("http://user:s3cr3t@127.0.0.1:8080/") == "http://127.0.0.1:8080/simple/"


def test_a_matrix_that_is_not_utf8_is_a_located_error(tmp_path: Path) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(MatrixError, match="not UTF-8"):
        load(path)


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("cmake_source: .", "cmake_source: ../..", "engine.prebuild.cmake_source"),
        ('tag_pattern: "v*"', 'tag_pattern: ""', "publish.tag_pattern"),
    ],
)
def test_settings_that_could_never_work_are_refused(tmp_path: Path, old: str, new: str, key: str) -> None:
    text = (Path(__file__).resolve().parents[2] / "matrix.yaml").read_text(encoding="utf-8")
    assert text.count(old) == 1
    path = tmp_path / "matrix.yaml"
    path.write_text(text.replace(old, new), encoding="utf-8")
    with pytest.raises(MatrixError) as info:
        load(path, backends_dir=Path(__file__).resolve().parents[2] / "packaging" / "backends")
    assert [p.key for p in info.value.problems] == [key]


def test_the_summary_names_the_compiler_short() -> None:
    from release.builder.host import compiler_summary

    assert compiler_summary(("GCC: (Debian 14.4.0-3) 14.4.0",)) == "GCC 14.4.0"
    assert compiler_summary(("GCC: (GNU) 14.2.1 20240801 (Red Hat 14.2.1-1)",)) == "GCC 14.2.1"
    twice = ("GCC: (Debian 12.2.0-14) 12.2.0", "GCC: (Debian 12.2.0-14) 12.2.0")
    assert compiler_summary(twice) == "GCC 12.2.0"
    assert compiler_summary(("clang version 18.1.8",)) == "clang version 18.1.8"
    assert compiler_summary(()) == "-"


def test_a_build_image_whose_glibc_no_policy_covers_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """sid's glibc 2.43 is newer than every manylinux policy auditwheel knows: one line names a base."""
    from release.errors import ToolchainError
    from release.inspect.verify import manylinux_policies
    from release.machine import images
    from release.plan.resolve import LocalImage

    newest = manylinux_policies()[-1].libc
    sid = LocalImage(tag="localhost/x-build", suite="sid", packages=(), pythons=("3.12",), toolchain=True)
    monkeypatch.setattr(images, "image_glibc", lambda _engine, _tag: (newest[0], newest[1] + 2))
    with pytest.raises(ToolchainError) as caught:
        images.require_repairable_glibc("podman", sid)
    message = str(caught.value)
    assert "localhost/x-build (Debian sid) has glibc" in message
    assert f"manylinux_{newest[0]}_{newest[1]}" in message and "suite: trixie" in message
    monkeypatch.setattr(images, "image_glibc", lambda _engine, _tag: newest)
    images.require_repairable_glibc("podman", sid)  # a glibc the newest policy covers passes


def test_images_get_the_interpreters_the_toolkit_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    """make-image.sh is given each Python's own prefix (--python-dir), only those found; the
    environment interpreter is 3.9 where there is one, else the newest; none at all is one line."""
    from release.errors import ToolchainError
    from release.machine import images
    from release.plan.resolve import LocalImage

    homes = {"3.9": Path("/p/3.9.18"), "3.11": Path("/p/3.11.7"), "3.12": Path("/p/3.12.1")}
    monkeypatch.setattr(images, "self_contained_home", homes.get)
    build = LocalImage(tag="localhost/b", suite="trixie", packages=(), pythons=("3.10", "3.11", "3.12"),
                       toolchain=True)  # fmt: skip
    recipe = images.recipe_of(build)
    assert recipe.pythons == ("3.11", "3.12")
    assert set(recipe.homes) == {("3.9", "/p/3.9.18"), ("3.11", "/p/3.11.7"), ("3.12", "/p/3.12.1")}
    assert recipe.env_python == "3.9"
    del homes["3.9"]
    assert images.recipe_of(build).env_python == "3.12"
    homes.clear()
    with pytest.raises(ToolchainError, match=r"none is here .*release toolchain install python 3\.12"):
        images.recipe_of(build)


def test_a_runtime_layout_of_one_python_names_every_supported_python_as_its_base(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A smoke image with a runtime layout is a layer over the image of its packages with every
    supported interpreter found here (the recipe's base_pythons, each with its directory),
    so a one-Python stand-in and the four-Python smoke images share one, as does an image of packages
    all from other archives; for the suite's own packages without a layout, or for a build image,
    there is no such option."""
    from release.machine import images
    from release.plan.resolve import LocalImage

    homes = {"3.10": Path("/p/3.10.13"), "3.12": Path("/p/3.12.1"), "3.13": Path("/p/3.13.0")}
    monkeypatch.setattr(images, "self_contained_home", homes.get)
    standin = LocalImage(tag="localhost/s", suite="trixie", packages=("libamdhip64-7/experimental",),
                         pythons=("3.12",), toolchain=False, runtime_prefix="/opt/rocm/lib",
                         runtime_via="LD_LIBRARY_PATH", runtime_globs=("libamdhip64.so*",))  # fmt: skip
    recipe = images.recipe_of(standin)
    assert recipe.pythons == ("3.12",)
    assert recipe.base_pythons == ("3.10", "3.12", "3.13")  # 3.11 is not here
    assert sorted(recipe.homes) == [("3.10", "/p/3.10.13"), ("3.12", "/p/3.12.1"), ("3.13", "/p/3.13.0")]
    assert recipe.layer() is not None and recipe.layer()[1].pythons == ("3.10", "3.12", "3.13")
    # Packages all from other archives are a layer too (over the image without them), with the same
    # base; the suite's own packages without a layout are not.
    archive = images.recipe_of(dataclasses.replace(standin, runtime_prefix=None, runtime_via=None))
    assert archive.base_pythons == ("3.10", "3.12", "3.13")
    plain = dataclasses.replace(standin, packages=("libamdhip64-6",), runtime_prefix=None, runtime_via=None)
    assert images.recipe_of(plain).base_pythons == () and images.recipe_of(plain).layer() is None
    build = dataclasses.replace(standin, toolchain=True)
    assert images.recipe_of(build).base_pythons == ()
