"""System build dependencies: declared once in the matrix, installed by the release image's
before-all (dnf) and the local image recipe (apt), checked by a host build before compiling."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from release.builder import cibw
from release.builder.sysdeps import Probes, host_family, missing, require_system_packages, search_dirs
from release.config.matrix import LoadedMatrix, loads
from release.config.sysdeps import SystemPackage
from release.errors import MatrixError, ToolchainError
from release.machine import images
from release.plan.steps import make_plan

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "packaging" / "backends"

DEPS = """\
  system_packages:
    yaml-cpp: {dnf: [yaml-cpp-devel], apt: [libyaml-cpp-dev], pkg_config: [yaml-cpp]}
    gflags: {dnf: [gflags-devel], apt: [libgflags-dev], headers: [gflags/gflags.h], libraries: [gflags]}
  before_all: bash scripts/engine-deps.sh
"""
EFA = """\
    system_packages:
      libfabric: {dnf: [libfabric-devel], apt: [libfabric-dev/experimental], pkg_config: [libfabric]}
"""


def _matrix(tmp_path: Path, engine_extra: str = DEPS, rocm_extra: str = EFA) -> LoadedMatrix:
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    text = text.replace(
        '  metadata:\n    description: "GPU', engine_extra + '  metadata:\n    description: "GPU', 1
    )
    text = text.replace(
        "    cmake_defines: {XFER_BACKEND: hip}\n", "    cmake_defines: {XFER_BACKEND: hip}\n" + rocm_extra, 1
    )
    text = text.replace("source: engine", f"source: {ROOT / 'engine'}", 1)
    return loads(text, path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)


def _options(loaded: LoadedMatrix, variant: str) -> dict[str, str]:
    steps = make_plan(loaded, variants=(variant,)).builds_of(variant)
    # cibuildwheel builds one machine at a time: the x86_64 steps (aarch64's options are the same)
    return cibw.cibuildwheel_options(tuple(s for s in steps if s.identifier.endswith("_x86_64")))


def test_release_before_all_installs_the_dnf_packages_with_the_toolkit(tmp_path: Path) -> None:
    before_all = _options(_matrix(tmp_path), "rocm")["before-all"]
    dnf, toolkit, engine = before_all.split(" && ")
    assert dnf == (
        "if command -v dnf >/dev/null 2>&1; then "
        "dnf install -y yaml-cpp-devel gflags-devel libfabric-devel pkgconf-pkg-config; fi"
    )  # pkg-config modules are declared: the program comes too
    assert shlex.split(toolkit)[-1] == "7.2" and "install-rocm.sh" in toolkit
    assert engine == "bash scripts/engine-deps.sh"
    # The CPU variant has no toolkit: the engine's packages and script, not the rocm variant's.
    cpu = _options(_matrix(tmp_path), "cpu")["before-all"]
    assert "dnf install -y yaml-cpp-devel gflags-devel pkgconf-pkg-config;" in cpu
    assert "libfabric" not in cpu
    assert cpu.endswith("&& bash scripts/engine-deps.sh")


def test_repository_packages_come_first_in_their_own_transaction(tmp_path: Path) -> None:
    deps = "  system_packages:\n    glog: {dnf: [glog-devel, epel-release], apt: [libgoogle-glog-dev]}\n"
    before_all = _options(_matrix(tmp_path, engine_extra=deps, rocm_extra=""), "cpu")["before-all"]
    assert before_all == (
        "if command -v dnf >/dev/null 2>&1; then dnf install -y epel-release && dnf install -y glog-devel; fi"
    )


def test_the_generated_toml_carries_the_before_all(tmp_path: Path) -> None:
    options = _options(_matrix(tmp_path), "cpu")
    text = cibw.render(options, "toml")
    assert "dnf install -y yaml-cpp-devel gflags-devel" in text


def test_without_system_packages_before_all_is_the_toolkit_alone(tmp_path: Path) -> None:
    loaded = _matrix(tmp_path, engine_extra="", rocm_extra="")
    assert "dnf" not in _options(loaded, "rocm")["before-all"]
    assert "before-all" not in _options(loaded, "cpu")


def test_local_build_image_includes_the_apt_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    variant = make_plan(_matrix(tmp_path), variants=("rocm",)).builds_of("rocm")[0].variant
    recipe = variant.build_image.local_recipe
    assert recipe is not None
    assert recipe.packages == (
        "libamdhip64-dev/experimental", "libhsa-runtime-dev/experimental",
        "libyaml-cpp-dev", "libgflags-dev", "libfabric-dev/experimental", "pkgconf",
    )  # fmt: skip
    monkeypatch.setattr(images, "self_contained_home", lambda v: Path(f"/p/{v}"))
    included = list(images.recipe_of(recipe).include)
    # One recipe: the suite's packages in the debootstrap, the other archives' in one layer over it.
    assert included[:2] == ["libamdhip64-dev/experimental", "libhsa-runtime-dev/experimental"]
    assert {"libyaml-cpp-dev", "libgflags-dev", "libfabric-dev/experimental"} <= set(included)


def test_a_variant_entry_replaces_the_engines_of_the_same_name(tmp_path: Path) -> None:
    override = "    system_packages:\n      yaml-cpp: {dnf: [yaml-cpp-static], apt: [libyaml-cpp-dev]}\n"
    loaded = _matrix(tmp_path, rocm_extra=override)
    variant = make_plan(loaded, variants=("rocm",)).builds_of("rocm")[0].variant
    assert variant.system_packages["yaml-cpp"].dnf == ("yaml-cpp-static",)
    assert "yaml-cpp-static gflags-devel" in _options(loaded, "rocm")["before-all"]


@pytest.mark.parametrize(
    ("entry", "key", "says"),
    [
        ("bad: {dnf: ['x; rm -rf /']}", "engine.system_packages.bad.dnf[0]", "is not a dnf package name"),
        ("bad: {apt: ['Lib,comma']}", "engine.system_packages.bad.apt[0]", "is not a Debian package name"),
        (
            "bad: {apt: [ok], headers: ['../etc/passwd']}",
            "engine.system_packages.bad.headers[0]",
            "is not a header",
        ),
        ("bad: {pkg_config: [yaml-cpp]}", "engine.system_packages.bad", "name its packages"),
    ],
)
def test_bad_entries_are_named_with_file_and_line(tmp_path: Path, entry: str, key: str, says: str) -> None:
    with pytest.raises(MatrixError) as caught:
        _matrix(tmp_path, engine_extra=f"  system_packages:\n    {entry}\n", rocm_extra="")
    text = str(caught.value)
    lines = (ROOT / "matrix.yaml").read_text(encoding="utf-8").splitlines()
    entry_line = lines.index("  metadata:") + 2  # the line after `system_packages:`, put before it
    assert f"matrix.yaml:{entry_line}: {key}: " in text, text
    assert says in text


def _probes(modules: frozenset[str] = frozenset(), headers: frozenset[str] = frozenset(),
            libs: frozenset[str] = frozenset()) -> Probes:  # fmt: skip
    return Probes(modules.__contains__, headers.__contains__, libs.__contains__)


ALMA = 'ID="almalinux"\nID_LIKE="rhel centos fedora"\n'
PACKAGES = {
    "yaml-cpp": SystemPackage(dnf=("yaml-cpp-devel",), apt=("libyaml-cpp-dev",), pkg_config=("yaml-cpp",)),
    "gflags": SystemPackage(dnf=("gflags-devel",), apt=("libgflags-dev",), headers=("gflags/gflags.h",),
                            libraries=("gflags",)),
    "unchecked": SystemPackage(apt=("asio",)),
}  # fmt: skip


def test_missing_names_the_failed_probes() -> None:
    assert (
        missing(
            PACKAGES, _probes(frozenset({"yaml-cpp"}), frozenset({"gflags/gflags.h"}), frozenset({"gflags"}))
        )
        == {}
    )
    assert missing(PACKAGES, _probes(frozenset({"yaml-cpp"}), frozenset({"gflags/gflags.h"}))) == {
        "gflags": ("library gflags",)
    }
    assert missing(PACKAGES, _probes()) == {
        "yaml-cpp": ("pkg-config yaml-cpp",),
        "gflags": ("header gflags/gflags.h", "library gflags"),
    }


def test_the_refusal_is_one_line_with_this_hosts_install_command() -> None:
    with pytest.raises(ToolchainError) as caught:
        require_system_packages(
            "rocm", PACKAGES, probes=_probes(frozenset({"yaml-cpp"})), os_release="ID=debian\n"
        )
    line = str(caught.value)
    assert "\n" not in line
    assert "gflags (header gflags/gflags.h; library gflags)" in line
    assert "`apt-get install libgflags-dev`" in line and "yaml-cpp" not in line
    with pytest.raises(ToolchainError, match=r"`dnf install yaml-cpp-devel gflags-devel`"):
        require_system_packages("rocm", PACKAGES, probes=_probes(), os_release=ALMA)
    with pytest.raises(ToolchainError, match=r"`apt-get install .*` or `dnf install "):
        require_system_packages("rocm", PACKAGES, probes=_probes(), os_release="ID=arch\n")
    require_system_packages(
        "rocm",
        PACKAGES,
        probes=_probes(frozenset({"yaml-cpp"}), frozenset({"gflags/gflags.h"}), frozenset({"gflags"})),
    )


@pytest.mark.parametrize(
    ("text", "family"),
    [("ID=ubuntu\nID_LIKE=debian\n", "apt"), ("ID=debian\n", "apt"), ('ID="rocky"\n', "dnf"),
     ("ID=fedora\n", "dnf"), ("ID=alpine\n", None), ("", None)],
)  # fmt: skip
def test_host_family(text: str, family: str | None) -> None:
    assert host_family(text) == family


def test_search_dirs_put_the_environment_first() -> None:
    dirs = search_dirs(
        {"CPATH": "/opt/x/include:/opt/y/include"}, ("CPATH", "C_INCLUDE_PATH"), ("/usr/include",)
    )
    assert dirs == (Path("/opt/x/include"), Path("/opt/y/include"), Path("/usr/include"))


def test_the_commented_example_in_the_matrix_is_valid(tmp_path: Path) -> None:
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    commented = re.compile(r"^  #( {3}\w+:| (system_packages|before_all):)")
    example = [line for line in text.splitlines() if commented.match(line)]
    assert len(example) == 4, example
    for line in example:
        text = text.replace(line, "  " + line[4:], 1)
    text = text.replace("source: engine", f"source: {ROOT / 'engine'}", 1)
    loaded = loads(text, path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)
    assert set(loaded.matrix.engine.system_packages) == {"glog", "rdma"}
    before_all = _options(loaded, "rocm")["before-all"]
    assert "dnf install -y epel-release && dnf install -y glog-devel rdma-core-devel" in before_all
