"""Engine shapes real projects have, each from data in matrix.yaml (issue 30, item 4): a variant's
own import package, build requirements a variant replaces, the wheel's runtime dependencies in
smoke legs, a GPU variant whose own ELF files bind no runtime; and what a build image gives a real
build (pkg-config where modules are declared, the build venv first on PATH)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from release.builder import cibw, host
from release.builder.host import venv_first_path
from release.builder.stage import rewrite_pyproject
from release.config.matrix import LoadedMatrix, Metadata, loads
from release.errors import BuildError, MatrixError
from release.machine.toolchain import Toolchain
from release.machine.venv import runs_pip
from release.plan.resolve import RequirementSource
from release.plan.runtimes import RUNTIME_ENV
from release.plan.source import check_engine_source
from release.plan.steps import make_plan
from release.smoke.requirements import install_argv, missing_source_line, network_env
from tests.unit import test_rules_good as good

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "packaging" / "backends"

BASE = """\
schema_version: 1
engine:
  source: .
  import_name: mypkg
{engine}python: ["3.12"]
platform:
  floor: manylinux_2_28_x86_64
variants:
  cpu:
    distribution: mypkg-cpu
    backend: cpu
{cpu}  cuda:
    distribution: mypkg-cu13
    backend: cuda
    toolkit: "13.0"
{cuda}"""


def _load(tmp_path: Path, *, engine: str = "", cpu: str = "", cuda: str = "") -> LoadedMatrix:
    text = BASE.format(engine=engine, cpu=cpu, cuda=cuda)
    path = tmp_path / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    return loads(text, path=path, backends_dir=BACKENDS)


def _error(tmp_path: Path, **parts: str) -> str:
    with pytest.raises(MatrixError) as info:
        _load(tmp_path, **parts)
    return str(info.value)


# --- a variant's own import package -----------------------------------------------------------------


def test_a_variant_names_its_own_import_package(tmp_path: Path) -> None:
    plan = make_plan(_load(tmp_path, cuda="    import_name: mypkg_cu13\n"))
    cuda, cpu = plan.variant("cuda"), plan.variant("cpu")
    assert (cuda.import_name, cpu.import_name) == ("mypkg_cu13", "mypkg")
    # What smoke imports and cibuildwheel's test command imports is the variant's own package.
    assert cibw.test_command(cpu) == "python -c 'import mypkg'"
    # cuda binds the driver (libcuda.so.1): its import test also takes the package's own refusal
    assert "import mypkg_cu13\\n" in cibw.test_command(cuda)
    assert "import mypkg\\n" not in cibw.test_command(cuda)
    # No other variant ships mypkg_cu13: its guard keeps nothing apart, mypkg's only itself.
    assert (cuda.sharing, cpu.sharing) == (("mypkg-cu13",), ("mypkg-cpu",))


def test_variants_sharing_the_engine_import_package_must_guard_it(tmp_path: Path) -> None:
    plan = make_plan(_load(tmp_path))
    assert plan.variant("cuda").sharing == ("mypkg-cpu", "mypkg-cu13")


def test_a_bad_variant_import_name_is_one_located_line(tmp_path: Path) -> None:
    message = _error(tmp_path, cuda="    import_name: mypkg-cu13\n")
    assert "matrix.yaml:16: variants.cuda.import_name: 'mypkg-cu13' is not a Python identifier" in message
    assert "did you mean 'import_name'?" in _error(tmp_path, cuda="    import_nmae: mypkg_cu13\n")


def test_variant_conflict_passes_for_a_package_no_other_variant_ships() -> None:
    facts = good.good_rocm()
    facts.add_text("xfer/__init__.py", b"")  # no guard
    ctx = good.context(facts)
    assert ctx.variant is not None
    assert good.apply("variant-conflict", ctx).status == "fail"
    alone = dataclasses.replace(ctx.variant, sharing=(ctx.variant.distribution,))
    result = good.apply("variant-conflict", dataclasses.replace(ctx, variant=alone))
    assert result.status == "pass" and "its own import package" in result.message


# --- build requirements a variant replaces ------------------------------------------------------------

PYPROJECT = """\
[build-system]
# the heavy pin
requires = ["scikit-build-core>=0.10", "torch==2.9.0", "pybind11"]
build-backend = "scikit_build_core.build"

[project]
name = "mypkg"
version = "0"
"""


def test_build_requires_replaces_and_drops_by_name_structurally() -> None:
    text = rewrite_pyproject(
        PYPROJECT, name="mypkg-cpu", version="1.0", metadata=Metadata(),
        build_requires={"Torch": "", "pybind11": "pybind11>=2.13"},
    )  # fmt: skip
    assert 'requires = ["scikit-build-core>=0.10", "pybind11>=2.13"]' in text
    assert "# the heavy pin" in text  # tomlkit keeps the file's comments


def test_build_requires_naming_what_the_project_does_not_require_stops(tmp_path: Path) -> None:
    expected = r"variants.cpu.build_requires.troch: .*has no 'troch'; did you mean 'torch'\?"
    with pytest.raises(BuildError, match=expected):
        rewrite_pyproject(
            PYPROJECT, name="x", version="1", metadata=Metadata(), build_requires={"troch": ""},
            key="variants.cpu.build_requires",
        )  # fmt: skip


def test_build_requires_resolve_and_bad_requirements_are_located(tmp_path: Path) -> None:
    plan = make_plan(_load(tmp_path, cpu="    build_requires: {torch: ''}\n"))
    assert plan.variant("cpu").build_requires == {"torch": ""}
    message = _error(tmp_path, cpu="    build_requires: {torch: 'torch=>2'}\n")
    assert "matrix.yaml:12: variants.cpu.build_requires.torch: 'torch=>2' is not a requirement" in message


# --- the wheel's runtime dependencies in smoke legs ---------------------------------------------------


def test_smoke_requirements_resolve_relative_to_the_matrix(tmp_path: Path) -> None:
    engine = "  smoke:\n    requirements: {find_links: wheels}\n"
    source = make_plan(_load(tmp_path, engine=engine)).variant("cpu").smoke_requirements
    assert source == RequirementSource(find_links=tmp_path / "wheels")
    assert make_plan(_load(tmp_path)).variant("cpu").smoke_requirements == RequirementSource()


def test_a_bad_requirement_source_is_one_located_line(tmp_path: Path) -> None:
    engine = "  smoke:\n    requirements: {index_url: 'ftp://mirror/simple'}\n"
    message = _error(tmp_path, engine=engine)
    assert "engine.smoke.requirements.index_url: 'ftp://mirror/simple' is not an http(s) URL" in message
    assert "did you mean 'index_url'?" in _error(tmp_path, engine="  smoke:\n    requirements: {index: x}\n")


def test_smoke_installs_requirements_from_the_declared_source_only(tmp_path: Path) -> None:
    python, wheel = ["/v/bin/python", "-m", "pip"], tmp_path / "wh" / "w.whl"
    index = install_argv(python, wheel, ["numpy"], RequirementSource(index_url="https://pypi.org/simple"))
    assert index[3:6] == ["install", "--index-url", "https://pypi.org/simple"] and "--no-index" not in index
    links = install_argv(python, wheel, ["numpy"], RequirementSource(find_links=tmp_path / "deps"))
    assert links[3:] == [
        "install", "--no-index",
        "--find-links", str(wheel.parent), "--find-links", str(tmp_path / "deps"), str(wheel),
    ]  # fmt: skip
    # Nothing required: the one file, no index asked.
    assert install_argv(python, wheel, [], RequirementSource())[3:] == ["install", "--no-index", str(wheel)]


def test_requirements_without_a_source_are_explained_in_one_line(tmp_path: Path) -> None:
    line = missing_source_line(["numpy>=1.26", "torch"], RequirementSource())
    assert line == (
        "the wheel requires numpy>=1.26, torch (Requires-Dist) and the matrix names no source: "
        "declare engine.smoke.requirements.index_url or .find_links"
    )
    absent = missing_source_line(["numpy"], RequirementSource(find_links=tmp_path / "nope"))
    assert absent == f"engine.smoke.requirements.find_links: {tmp_path / 'nope'} is not a directory"
    assert missing_source_line(["numpy"], RequirementSource(index_url="https://pypi.org/simple")) == ""
    assert missing_source_line([], RequirementSource()) == ""


# --- a GPU variant whose own ELF files bind no GPU runtime ----------------------------------------------


def test_runtime_needed_empty_expects_and_guards_no_runtime(tmp_path: Path) -> None:
    plan = make_plan(_load(tmp_path, cuda="    runtime_needed: []\n"))
    cuda = plan.variant("cuda")
    assert (cuda.runtime_needed, cuda.runtime_sonames) == ((), ())
    assert RUNTIME_ENV not in cuda.build.env  # the import guard checks no runtime
    assert cuda.excludes  # the runtime is still never vendored
    default = make_plan(_load(tmp_path)).variant("cuda")
    assert default.runtime_sonames == ("libcudart.so.13",) and RUNTIME_ENV in default.build.env


def _unbound_rocm() -> good.Facts:
    facts = good.good_rocm()
    facts.add_elf(good.elf(good.EXT, needed=("libxfercore-1a2b3c4d.so.0", "libc.so.6")))
    return facts


def test_verify_follows_runtime_needed_empty() -> None:
    ctx = good.context(_unbound_rocm())
    assert ctx.variant is not None
    assert good.apply("missing-runtime-needed", ctx).status == "fail"  # the backend's default
    unbound = dataclasses.replace(ctx.variant, runtime_needed=(), runtime_sonames=())
    declared = dataclasses.replace(ctx, variant=unbound)
    assert good.apply("missing-runtime-needed", declared).status == "not-applicable"
    assert good.apply("runtime-abi", declared).status == "not-applicable"


# --- what a build image gives a real build ----------------------------------------------------------------


def test_pkg_config_comes_with_declared_modules(tmp_path: Path) -> None:
    deps = "  system_packages:\n    zlib: {dnf: [zlib-devel], apt: [zlib1g-dev], pkg_config: [zlib]}\n"
    recipe = "    build_image: {debian: {suite: trixie}}\n"
    with_modules = make_plan(_load(tmp_path, engine=deps, cpu=recipe)).variant("cpu")
    assert with_modules.build_image.local_recipe is not None
    assert with_modules.build_image.local_recipe.packages == ("zlib1g-dev", "pkgconf")
    assert "dnf install -y zlib-devel pkgconf-pkg-config" in cibw.before_all_command(with_modules)
    headers = "  system_packages:\n    zlib: {dnf: [zlib-devel], apt: [zlib1g-dev], headers: [zlib.h]}\n"
    without = make_plan(_load(tmp_path, engine=headers, cpu=recipe)).variant("cpu")
    assert without.build_image.local_recipe is not None
    assert without.build_image.local_recipe.packages == ("zlib1g-dev",)
    assert "pkgconf" not in cibw.before_all_command(without)


def test_the_host_build_runs_with_the_build_venv_first_on_path() -> None:
    exe = Path("/w/venvs/cp312/bin/python")
    assert venv_first_path(exe, "/usr/bin:/w/venvs/cp312/bin:/bin") == "/w/venvs/cp312/bin:/usr/bin:/bin"
    assert venv_first_path(exe, "") == "/w/venvs/cp312/bin"


def test_build_requires_naming_no_entry_is_a_located_plan_error(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    loaded = _load(tmp_path, cpu="    build_requires:\n      troch: ''\n")
    with pytest.raises(MatrixError) as info:
        check_engine_source(loaded)
    assert str(info.value).endswith(
        "matrix.yaml:13: variants.cpu.build_requires.troch: the engine's [build-system].requires has no "
        "'troch'; did you mean 'torch'? (it has scikit-build-core, torch, pybind11)"
    ), str(info.value)
    check_engine_source(_load(tmp_path, cpu="    build_requires: {torch: ''}\n"))  # names an entry: fine


def test_an_index_leg_passes_on_the_ca_bundle_and_proxy_only() -> None:
    environ = {"PIP_CERT": "/etc/ssl/certs/ca.crt", "HTTPS_PROXY": "http://proxy:3128", "PIP_INDEX_URL": "x"}
    index = RequirementSource(index_url="https://pypi.org/simple")
    assert network_env(index, environ) == {"PIP_CERT": "/etc/ssl/certs/ca.crt", "HTTPS_PROXY": "http://proxy:3128"}
    assert network_env(RequirementSource(find_links=Path("/w")), environ) == {}


def test_the_pep517_build_runs_with_that_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """build_one hands the frontend an environment whose PATH starts at the build venv's bin/."""
    step = make_plan(_load(tmp_path)).builds_of("cpu")[0]
    ctx = host.BuildContext(
        variant=step.variant, version="0.1.0", staged=tmp_path / "staged", work=tmp_path / "work",
        env={"PATH": "/usr/bin:/bin", "SOURCE_DATE_EPOCH": "0"}, prefix=None,
        toolchain=Toolchain(backend="cpu", prefix=None, version=None, found_by="test"),
    )  # fmt: skip
    seen: list[dict[str, str]] = []

    class Stop(Exception):
        pass

    def run_logged(cmd: list[str], *, log: Path, env: dict[str, str]) -> None:
        seen.append(env)
        raise Stop

    monkeypatch.setattr(host, "run_logged", run_logged)
    monkeypatch.setattr(host, "project_for", lambda ctx, step: tmp_path / "staged")
    with pytest.raises(Stop):
        host.build_one(
            ctx, step, tmp_path / "wheelhouse", index="[1/1]", exe=tmp_path / "venvs/cp312/bin/python"
        )
    assert seen[0]["PATH"] == f"{tmp_path / 'venvs/cp312/bin'}:/usr/bin:/bin"


def test_a_smoke_command_that_runs_pip_is_recognised() -> None:
    assert runs_pip(["pip", "check"]) and runs_pip(["{python}", "-m", "pip", "list"])
    assert runs_pip(["pip3.12", "x"])
    assert not runs_pip(["{python}", "-m", "xfer", "selftest"])
    assert not runs_pip(["xfer-master", "--pipeline"])
