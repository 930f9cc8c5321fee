"""`release init` proposes system build dependencies from what the CMake files ask for."""

from __future__ import annotations

from pathlib import Path

from release import cli
from release.builder import cibw
from release.config.matrix import load
from release.init.sysdeps import propose, requests
from release.plan.steps import make_plan

PYPROJECT = """\
[build-system]
requires = ["scikit-build-core"]
build-backend = "scikit_build_core.build"

[project]
name = "kvmove"
version = "1.0.0"
"""
CMAKE = """\
cmake_minimum_required(VERSION 3.20)
project(kvmove CXX)
set(KV_BACKEND cpu CACHE STRING "runtime")
set_property(CACHE KV_BACKEND PROPERTY STRINGS cpu hip)
find_package(Threads REQUIRED)
find_package(Python 3.10 COMPONENTS Interpreter Development.Module REQUIRED)
find_package(kvmove CONFIG QUIET)   # the project's own core
# find_package(OldThing)            a comment, not a request
find_package(glog REQUIRED)
find_package(${dep} CONFIG)
add_subdirectory(transport)
"""
TRANSPORT = """\
find_package(PkgConfig REQUIRED)
pkg_check_modules(RDMA REQUIRED IMPORTED_TARGET libibverbs librdmacm>=1.0)
find_package(Frobnicator 2.0 REQUIRED)
find_package(GLOG)
"""


def _project(root: Path) -> Path:
    project = root / "kvmove"
    (project / "kvmove").mkdir(parents=True)
    (project / "kvmove" / "__init__.py").write_text("", encoding="utf-8")
    (project / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (project / "CMakeLists.txt").write_text(CMAKE, encoding="utf-8")
    (project / "transport").mkdir()
    (project / "transport" / "CMakeLists.txt").write_text(TRANSPORT, encoding="utf-8")
    vendored = project / "third_party" / "yaml"
    vendored.mkdir(parents=True)
    (vendored / "CMakeLists.txt").write_text("find_package(Vendored)\n", encoding="utf-8")
    return project


def test_requests_name_their_file_and_line(tmp_path: Path) -> None:
    project = _project(tmp_path)
    found = {(r.kind, r.name): r.where for r in requests(project)}
    assert found[("find_package", "glog")] == "CMakeLists.txt:9"
    assert found[("pkg_check_modules", "libibverbs")] == "transport/CMakeLists.txt:2"
    assert found[("pkg_check_modules", "librdmacm")] == "transport/CMakeLists.txt:2"
    assert ("find_package", "OldThing") not in found  # commented out
    assert ("find_package", "Vendored") not in found  # third_party/ is not the project's
    assert ("find_package", "GLOG") not in found  # the same package, mentioned again
    assert not any(name in {"REQUIRED", "IMPORTED_TARGET", "RDMA"} for _kind, name in found)


def test_known_requests_become_entries_the_others_comments(tmp_path: Path) -> None:
    proposal = propose(_project(tmp_path), own=("kvmove",))
    assert list(proposal.known) == ["glog", "ibverbs", "rdmacm"]
    glog, _request = proposal.known["glog"]
    assert glog.dnf == ("epel-release", "glog-devel")
    assert glog.apt == ("libgoogle-glog-dev",) and glog.pkg_config == ("libglog",)
    assert [r.name for r in proposal.unknown] == ["Frobnicator"]


def test_init_writes_them_and_the_release_image_installs_them(tmp_path: Path) -> None:
    project = _project(tmp_path)
    output = tmp_path / "release" / "matrix.yaml"
    assert cli.main(["init", str(project), "--variants", "rocm,cpu", "--output", str(output)]) == 0
    text = output.read_text(encoding="utf-8")
    assert "# yours: Frobnicator: {dnf: [...], apt: [...], pkg_config: [...]}" in text
    assert "find_package(Frobnicator) at transport/CMakeLists.txt:3" in text
    loaded = load(output)
    packages = loaded.matrix.engine.system_packages
    assert set(packages) == {"glog", "ibverbs", "rdmacm"}
    assert packages["ibverbs"].apt == ("libibverbs-dev",)
    steps = make_plan(loaded, variants=("cpu",)).builds_of("cpu")
    before_all = cibw.cibuildwheel_options(steps)["before-all"]
    installs = "dnf install -y epel-release && dnf install -y glog-devel rdma-core-devel pkgconf-pkg-config"
    assert f"then {installs}; fi" in before_all


def test_a_project_without_requests_gets_no_key(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "CMakeLists.txt").write_text("project(kvmove CXX)\n", encoding="utf-8")
    (project / "transport" / "CMakeLists.txt").unlink()
    output = tmp_path / "matrix.yaml"
    assert cli.main(["init", str(project), "--variants", "cpu", "--output", str(output)]) == 0
    assert "system_packages" not in output.read_text(encoding="utf-8")
    assert load(output).matrix.engine.system_packages == {}
