"""`release init` follows the build code of issue 58's engines (shapes of Mooncake's CMake and of a
meson-python transfer library), written here as small trees: `include()`d backend switches, bare
link names, `find_path`, `OUTPUT_NAME`; meson variables, `subdir()`s, optional probes, and names
mapped to Debian's packages (abseil, toml++, liburing, libaio)."""

from __future__ import annotations

from pathlib import Path

from release.init import meson, scan, sysdeps

SKBUILD = (
    '[build-system]\nbuild-backend = "scikit_build_core.build"\nrequires = ["scikit-build-core"]\n'
    '[project]\nname = "mooncake-transfer-engine"\nversion = "0.1"\n'
)
MESON = (
    '[build-system]\nbuild-backend = "mesonpy"\nrequires = ["meson-python"]\n'
    '[project]\nname = "gpulib"\nversion = "0.1"\n'
)


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_cmake_init_follows_includes_links_and_output_names(tmp_path: Path) -> None:
    root = write(tmp_path, {
        "pyproject.toml": SKBUILD,
        "CMakeLists.txt": "project(mc)\ninclude(mooncake-common/common.cmake)\nadd_subdirectory(engine)\n",
        "mooncake-common/common.cmake": 'option(USE_CUDA "cuda" OFF)\noption(USE_HIP "hip" OFF)\n'
        'option(WITH_STORE "store" ON)\nfind_path(ASIO_INCLUDE_DIR asio.hpp)\n',
        "engine/CMakeLists.txt": "add_library(transfer_engine STATIC a.cpp)\n"
        "add_library(asio_shared SHARED asio.cpp)\n"
        "set_target_properties(asio_shared PROPERTIES OUTPUT_NAME asio)\n"
        "target_link_libraries(transfer_engine PUBLIC\n"
        "  asio_shared ibverbs numa pthread ${CUDA_LIBS} glog::glog)\n",
    })  # fmt: skip
    project = scan.read_project(root)
    assert [o.name for o in project.cmake_options] == ["USE_CUDA", "USE_HIP", "WITH_STORE"]
    assert project.own_libraries == ("libasio*",)
    proposal = sysdeps.propose(root)
    assert sorted(proposal.known) == ["asio", "ibverbs", "numa"]
    assert proposal.known["ibverbs"][1].where == "engine/CMakeLists.txt:4"
    assert proposal.known["asio"][0].apt == ("libasio-dev",)
    assert not proposal.unknown  # pthread, the project's own targets and imported targets: nothing


def test_meson_init_follows_variables_subdirs_and_required(tmp_path: Path) -> None:
    root = write(tmp_path, {
        "pyproject.toml": MESON,
        "meson.options": "option('wheel_variant', type: 'combo', choices: ['cpu', 'rocm'], value: 'cpu')\n"
        "option('io_uring', type: 'feature', value: 'enabled')\n"
        "option('plugins', type: 'boolean', value: false)\n",
        "meson.build": "project('gpulib', 'cpp')\nvariant = get_option('wheel_variant')\n"
        "pkg = 'gpulib_' + variant\nabsl = dependency('absl_strings')\ntoml = dependency('tomlplusplus')\n"
        "uring = dependency('liburing', required: get_option('io_uring'))\n"
        "hip = dependency('hwloc', required: false)\n"
        "plug = dependency('zstd', required: get_option('plugins'))\n"
        "aio = meson.get_compiler('cpp').find_library('aio')\n"
        "subdir('src')\nsubdir('benchmark')\nsubdir('test')\n",
        "src/meson.build": "py.extension_module('_core', 'core.cpp', subdir: pkg, install: true)\n",
        "benchmark/meson.build": "dependency('benchmark')\n",
        "test/meson.build": "dependency('gtest')\n",
    })  # fmt: skip
    options = meson.read_options(root)
    package = meson.variant_package(root, options)
    assert package is not None and (package.option, package.prefix) == ("wheel_variant", "gpulib_")
    assert package.choices == ("cpu", "rocm")
    proposal = sysdeps.propose(root)
    assert sorted(proposal.known) == ["abseil", "libaio", "liburing", "tomlplusplus"]
    assert proposal.known["abseil"][0].apt == ("libabsl-dev",)
    assert proposal.known["tomlplusplus"][0].apt == ("libtomlplusplus-dev",)
    assert not proposal.unknown  # no hwloc (required: false), zstd (off), benchmark or gtest
