"""`python -m release init` as a user runs it: on the reference engine (its result must match the
committed matrix on every key init can know) and on a setuptools engine whose generated matrix then
drives a real build.

Keys init derives: variant names, distributions, backends, runtime excludes, cmake_defines (from
the project's `<X>_BACKEND` cache variable), the Python list (from requires-python), engine.source,
engine.import_name, engine.scripts (from [project.scripts] and the wheels' scripts), engine.version
and platform.system_libraries (from the wheels' NEEDED entries). Keys left to the maintainer,
written as commented examples or defaults: variants' toolkit, architectures, device_code, images,
hardware and metadata; engine.prebuild, own_libraries, metadata, smoke commands; top-level images
and hardware (written empty) and publish (written with the toolkit's defaults, compared as such).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from release.config.matrix import Publish, load
from release.plan.resolve import resolve_variant

from .conftest import ROOT, toolkit
from .test_second_engine import NUMA, PY, needs_cc, needs_numa, write_kvmove

pytestmark = pytest.mark.integration
ENV = {"PYTHONPATH": str(ROOT)}  # runs outside the checkout, where `release` may not be installed


def test_init_on_the_reference_engine_matches_the_committed_matrix(
    tmp_path: Path, host_wheelhouse: tuple[Path, Path]
) -> None:
    _matrix, wheelhouse = host_wheelhouse
    wheels = sorted(wheelhouse.rglob("*.whl"))
    assert {w.parent.name for w in wheels} == {"cpu", "rocm"}
    output = tmp_path / "matrix.yaml"
    args = ["init", str(ROOT / "engine"), "--variants", "cpu,cuda,rocm,musa", "--output", str(output)]
    for wheel in wheels:
        args += ["--wheel", str(wheel)]
    package = ROOT / "engine" / "python" / "xfer" / "__init__.py"
    before = package.read_bytes()
    result = toolkit(*args, cwd=tmp_path, env=ENV)
    assert f"wrote {output}" in result.stdout
    # The engine guards itself (`from importlib import metadata`): init keeps it, and writes nothing
    # into the checkout the rest of the suite builds from.
    assert "kept (it already checks the installed distributions)" in result.stdout
    assert package.read_bytes() == before

    generated = load(output)
    committed = load(ROOT / "matrix.yaml")
    g, c = generated.matrix, committed.matrix
    assert list(g.variants) == list(c.variants)
    for name, want in c.variants.items():
        got = g.variants[name]
        assert got.distribution == want.distribution, name
        assert got.backend == want.backend, name
        # what repair excludes: the backend's defaults (cuda: libcudart, the driver's libcuda), the variant's
        assert resolve_variant(generated, name).excludes == resolve_variant(committed, name).excludes, name
        assert dict(got.cmake_defines) == dict(want.cmake_defines), name
        assert (
            resolve_variant(generated, name).runtime_needed == resolve_variant(committed, name).runtime_needed
        )
        assert (got.images, got.hardware, got.architectures, got.device_code) == ((), (), (), False)
    # init proposes the GIL Pythons; free-threaded rows are the maintainer's choice (init/scaffold.py)
    assert g.python == tuple(v for v in c.python if not v.endswith("t"))
    assert generated.engine_dir == committed.engine_dir
    assert g.engine.import_name == c.engine.import_name
    assert g.engine.scripts == c.engine.scripts  # found in the wheels (CMake installs the master)
    assert g.engine.version == c.engine.version
    assert g.engine.own_libraries == c.engine.own_libraries
    assert g.platform.system_libraries == c.platform.system_libraries
    # init writes this machine's floor; the committed matrix adds aarch64 (the maintainer's choice)
    assert g.platform.floor_of("x86_64") == c.platform.floor_of("x86_64") == "manylinux_2_28_x86_64"
    assert (g.platform.machines, c.platform.machines) == (("x86_64",), ("x86_64", "aarch64"))
    assert g.publish == c.publish == Publish()  # the committed publish block is the defaults
    assert dict(g.images) == {} and dict(g.hardware) == {}

    # Without a wheel init reads only pyproject.toml: the reference engine declares no console
    # script there (CMake installs its master binary), so engine.scripts stays for the maintainer.
    bare = tmp_path / "bare.yaml"
    toolkit("init", str(ROOT / "engine"), "--variants", "cpu", "--output", str(bare), cwd=tmp_path, env=ENV)
    assert load(bare).matrix.engine.scripts == ()


def test_init_refuses_to_overwrite_as_a_process(tmp_path: Path) -> None:
    output = tmp_path / "out" / "matrix.yaml"
    output.parent.mkdir()
    output.write_text("# mine\n", encoding="utf-8")
    result = toolkit(
        "init", str(ROOT / "engine"), "--output", str(output), cwd=tmp_path, env=ENV, check=False
    )
    assert result.returncode == 2
    assert "--force" in result.stderr and str(output) in result.stderr
    assert "Traceback" not in result.stderr
    assert output.read_text(encoding="utf-8") == "# mine\n"


def test_init_force_replaces_a_broken_matrix_in_the_current_directory(tmp_path: Path) -> None:
    output = tmp_path / "matrix.yaml"
    output.write_text("", encoding="utf-8")
    result = toolkit("init", str(ROOT / "engine"), "--force", cwd=tmp_path, env=ENV, check=False)
    assert result.returncode == 0, result.stderr
    load(output)


@needs_numa
@needs_cc
@pytest.mark.slow
def test_generated_matrix_builds_a_setuptools_engine(tmp_path: Path) -> None:
    """init without a wheel cannot know libnuma, so repair vendors it; init given the built (not yet
    repaired) wheel declares it, and the next build binds it from the system instead."""
    project = write_kvmove(tmp_path)
    output = tmp_path / "matrix.yaml"
    all_pythons = 'python: ["3.10", "3.11", "3.12", "3.13", "3.14", "3.15"]'
    toolkit("init", str(project), "--variants", "cpu", "--output", str(output), cwd=tmp_path, env=ENV)
    output.write_text(output.read_text(encoding="utf-8").replace(all_pythons, f'python: ["{PY}"]'))
    loaded = load(output).matrix
    assert loaded.engine.import_name == "kvmove" and loaded.engine.scripts == ("kvmove-probe",)
    assert loaded.variants["cpu"].distribution == "kvmove-cpu"
    assert not loaded.variants["cpu"].cmake_defines
    assert loaded.platform.system_libraries == ()

    wheelhouse = tmp_path / "wheelhouse"
    build = ("--matrix", str(output), "build", "--variant", "cpu", "--wheelhouse", str(wheelhouse))
    toolkit(*build, cwd=tmp_path, env=ENV)
    (repaired,) = sorted((wheelhouse / "cpu").glob("*.whl"))
    with zipfile.ZipFile(repaired) as zf:
        assert any(Path(n).name.startswith("libnuma") for n in zf.namelist())  # undeclared: vendored
    (built,) = sorted((tmp_path / "build" / "cpu" / "dist").rglob("*.whl"))  # what the backend made

    again = toolkit(
        "init", str(project), "--variants", "cpu", "--wheel", str(built), "--output", str(output),
        "--force", cwd=tmp_path, env=ENV,
    )  # fmt: skip
    assert f"system libraries: {NUMA}" in again.stdout
    output.write_text(output.read_text(encoding="utf-8").replace(all_pythons, f'python: ["{PY}"]'))
    assert load(output).matrix.platform.system_libraries == (NUMA,)
    toolkit(*build, cwd=tmp_path, env=ENV)
    (repaired,) = sorted((wheelhouse / "cpu").glob("*.whl"))
    with zipfile.ZipFile(repaired) as zf:
        assert not any(Path(n).name.startswith("libnuma") for n in zf.namelist())  # declared: bound
    report = json.loads(Path(f"{repaired}.verify.json").read_text(encoding="utf-8"))
    rules = {r["id"]: r["status"] for r in report["rules"]}
    assert rules["external-dependency"] == "pass"
