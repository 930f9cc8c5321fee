"""`release init`: the pure parts (names, Python versions, system libraries, CMake switch, refusal to
overwrite) and the whole command in-process on small projects written here (no process starts)."""

from __future__ import annotations

import importlib
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
import yaml

from release import cli
from release.config.backends import load_backends
from release.config.matrix import SCHEMA_FILE, load
from release.errors import UsageError
from release.init import scaffold as init_mod
from release.init import scan as scan_mod
from release.init.guard import BEGIN, mentions_metadata, write_guard

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("cpu", "cuda", "rocm", "musa")
LOADED = load_backends(ROOT / "packaging" / "backends")
SPELLINGS = {n: b.spellings for n, b in LOADED.items()}


@pytest.mark.parametrize(
    ("project", "backend", "expected"),
    [
        ("xfer-engine", "cuda", "xfer-engine"),
        ("xfer-engine", "cpu", "xfer-engine-cpu"),
        ("xfer-engine", "rocm", "xfer-engine-rocm"),
        ("xfer-engine", "musa", "xfer-engine-musa"),
        ("kvmove", "standin", "kvmove-standin"),
        ("kvmove-rocm", "rocm", "kvmove-rocm"),  # a project named for one variant: its stem is kept
        ("kvmove-rocm", "cuda", "kvmove"),
        ("kvmove_cuda", "cpu", "kvmove-cpu"),
        ("cpu", "cpu", "cpu-cpu"),  # nothing left to strip: the name stays whole
    ],
)
def test_distribution_names_follow_the_reference_matrix(project: str, backend: str, expected: str) -> None:
    assert init_mod.distribution_name(project, backend, LOADED) == expected


def test_committed_matrix_names_are_what_init_derives() -> None:
    committed = load(ROOT / "matrix.yaml").matrix
    cuda = committed.variants["cuda"].distribution
    for name, variant in committed.variants.items():
        assert init_mod.distribution_name(cuda, variant.backend, LOADED) == variant.distribution, name


@pytest.mark.parametrize(
    ("requires", "expected"),
    [
        (None, ("3.10", "3.11", "3.12", "3.13", "3.14", "3.15")),
        (">=3.10", ("3.10", "3.11", "3.12", "3.13", "3.14", "3.15")),
        (">=3.8", ("3.10", "3.11", "3.12", "3.13", "3.14", "3.15")),
        (">=3.11,<3.13", ("3.11", "3.12")),
        ("!=3.11.*,>=3.10", ("3.10", "3.12", "3.13", "3.14", "3.15")),
        (">=3.12.1", ("3.12", "3.13", "3.14", "3.15")),  # a later patch release of 3.12 qualifies
        ("==3.12.*", ("3.12",)),
        ("~=3.10", ("3.10", "3.11", "3.12", "3.13", "3.14", "3.15")),
        ("<3.11", ("3.10",)),
    ],
)
def test_pythons_from_requires_python(requires: str | None, expected: tuple[str, ...]) -> None:
    assert init_mod.pythons_allowed(requires) == expected


@pytest.mark.parametrize("requires", [">=3.16", "<3.10", "not a specifier"])
def test_requires_python_admitting_nothing_is_a_usage_error(requires: str) -> None:
    with pytest.raises(UsageError, match="requires-python") as info:
        init_mod.pythons_allowed(requires)
    assert info.value.exit_code == 2


def test_system_libraries_are_needed_minus_policy_runtime_wheel_and_loader() -> None:
    needed = [
        "libc.so.6", "libstdc++.so.6", "libnuma.so.1", "libamdhip64.so.5", "libcudart.so.13",
        "libkvcore.so.1", "ld-linux-x86-64.so.2", "libibverbs.so.1",
    ]  # fmt: skip
    found = init_mod.system_libraries(
        needed,
        policy_libraries={"libc.so.6", "libstdc++.so.6", "libm.so.6"},
        runtime_globs=["libamdhip64.so*", "libcudart.so*"],
        provided={"libkvcore.so.1", "libkvcore-1a2b3c.so.1"},
    )
    assert found == ("libibverbs.so.1", "libnuma.so.1")


def test_system_libraries_use_auditwheels_manylinux_2_28_policy() -> None:
    policy = scan_mod.policy_libraries("manylinux_2_28_x86_64")
    assert {"libc.so.6", "libstdc++.so.6", "libz.so.1"} <= policy
    assert "libnuma.so.1" not in policy
    found = init_mod.system_libraries(
        ["libz.so.1", "libnuma.so.1"], policy_libraries=policy, runtime_globs=(), provided=()
    )
    assert found == ("libnuma.so.1",)


def test_cmake_backend_switch_is_read_from_the_reference_cmakelists() -> None:
    text = (ROOT / "engine" / "CMakeLists.txt").read_text(encoding="utf-8")
    variable, values = scan_mod.parse_cmake_backend(text)
    assert variable == "XFER_BACKEND"
    assert values == ("cpu", "cuda", "hip", "musa")
    assert [scan_mod.cmake_value(b, values, SPELLINGS) for b in BACKENDS] == ["cpu", "cuda", "hip", "musa"]


def test_cmake_switch_spelled_as_an_option_or_absent() -> None:
    assert scan_mod.parse_cmake_backend('option(KV_BACKEND "gpu runtime" OFF)') == ("KV_BACKEND", ())
    assert scan_mod.parse_cmake_backend("project(x LANGUAGES CXX)") == (None, ())
    assert scan_mod.cmake_value("rocm", (), SPELLINGS) == "rocm"
    assert scan_mod.cmake_value("rocm", ("none", "rocm"), SPELLINGS) == "rocm"


def test_variants_parse_with_a_suggestion_for_typos() -> None:
    assert init_mod.parse_variants("cpu, rocm,cpu", LOADED) == ("cpu", "rocm")
    shuffled = {n: LOADED[n] for n in ("rocm", "musa", "cpu", "cuda")}
    assert init_mod.parse_variants(None, shuffled) == ("cpu", "cuda", "musa", "rocm")
    with pytest.raises(UsageError, match=r"unknown backend 'rcom'; did you mean 'rocm'\?"):
        init_mod.parse_variants("cpu,rcom", LOADED)
    with pytest.raises(UsageError, match="at least one"):
        init_mod.parse_variants(" , ", LOADED)


def test_existing_output_is_refused_without_force(tmp_path: Path) -> None:
    target = tmp_path / "matrix.yaml"
    init_mod.check_output(target, force=False)  # absent: fine
    target.write_text("keep me\n", encoding="utf-8")
    with pytest.raises(UsageError) as info:
        init_mod.check_output(target, force=False)
    assert info.value.exit_code == 2
    assert str(target) in str(info.value) and "--force" in str(info.value)
    init_mod.check_output(target, force=True)


# --- the whole command, in-process -----------------------------------------------------------------

SETUPTOOLS_PYPROJECT = """\
[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "kvmove"
version = "0.2.0"
description = "Moves KV blocks"
requires-python = ">=3.11"

[project.scripts]
kvmove-probe = "kvmove.cli:main"

[tool.setuptools]
packages = ["kvmove", "kvmove.ops"]
"""


def write_project(root: Path, pyproject: str, *, cmake: str | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    if cmake is not None:
        (root / "CMakeLists.txt").write_text(cmake, encoding="utf-8")
    return root


def validate(path: Path) -> dict[str, object]:
    """Loads with the toolkit and validates against the committed JSON Schema."""
    load(path)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    jsonschema.validate(data, json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    assert isinstance(data, dict)
    return data


def test_setuptools_project_gets_no_cmake_defines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = write_project(tmp_path / "kvmove", SETUPTOOLS_PYPROJECT)
    output = tmp_path / "matrix.yaml"
    code = cli.main(["init", str(project), "--variants", "cpu,rocm", "--output", str(output)])
    assert code == 0, capsys.readouterr().err
    text = output.read_text(encoding="utf-8")
    assert text.startswith("# yaml-language-server: $schema=")
    data = validate(output)
    loaded = load(output).matrix
    assert loaded.engine.source == "kvmove"
    assert loaded.engine.import_name == "kvmove"
    assert loaded.engine.version == "0.2.0"
    assert loaded.engine.scripts == ("kvmove-probe",)
    assert loaded.python == ("3.11", "3.12", "3.13", "3.14", "3.15")
    assert {n: v.distribution for n, v in loaded.variants.items()} == {
        "cpu": "kvmove-cpu",
        "rocm": "kvmove-rocm",
    }
    assert loaded.variants["rocm"].exclude == ("libamdhip64.so*", "libhsa-runtime64.so*")
    assert loaded.variants["cpu"].exclude == ()
    assert all(not v.cmake_defines for v in loaded.variants.values())
    assert "cmake_defines" not in text and "prebuild" not in text
    assert loaded.platform.system_libraries == ()
    assert data["images"] == {} and data["hardware"] == {}
    assert "--wheel" in text  # says how to find the system libraries


def test_scikit_build_project_gets_its_cmake_switch(tmp_path: Path) -> None:
    pyproject = """\
[build-system]
requires = ["scikit-build-core"]
build-backend = "scikit_build_core.build"

[project]
name = "ringbuf-engine"
version = "1.0.0"
"""
    cmake = (
        'set(RB_BACKEND cpu CACHE STRING "runtime")\n'
        "set_property(CACHE RB_BACKEND PROPERTY STRINGS cpu hip)\n"
    )
    project = write_project(tmp_path / "src" / "ringbuf", pyproject, cmake=cmake)
    (project / "python" / "ringbuf").mkdir(parents=True)
    (project / "python" / "ringbuf" / "__init__.py").write_text("", encoding="utf-8")
    (project / "tests").mkdir()
    (project / "tests" / "__init__.py").write_text("", encoding="utf-8")
    output = tmp_path / "release" / "matrix.yaml"
    assert cli.main(["init", str(project), "--variants", "rocm,cpu", "--output", str(output)]) == 0
    validate(output)
    loaded = load(output).matrix
    assert loaded.engine.source == "../src/ringbuf"
    assert loaded.engine.import_name == "ringbuf"
    assert list(loaded.variants) == ["rocm", "cpu"]
    assert dict(loaded.variants["rocm"].cmake_defines) == {"RB_BACKEND": "hip"}
    assert dict(loaded.variants["cpu"].cmake_defines) == {"RB_BACKEND": "cpu"}
    assert loaded.variants["rocm"].distribution == "ringbuf-engine-rocm"
    assert "# prebuild:" in output.read_text(encoding="utf-8")


def test_rerun_without_force_exits_2_and_keeps_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = write_project(tmp_path / "kvmove", SETUPTOOLS_PYPROJECT)
    output = tmp_path / "matrix.yaml"
    output.write_text("# mine\n", encoding="utf-8")
    assert cli.main(["init", str(project), "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert str(output) in err and "--force" in err and "Traceback" not in err
    assert output.read_text(encoding="utf-8") == "# mine\n"
    assert cli.main(["init", str(project), "--output", str(output), "--force"]) == 0
    validate(output)


def test_wheel_scripts_packages_and_import_name_override(tmp_path: Path) -> None:
    project = write_project(
        tmp_path / "p",
        '[build-system]\nbuild-backend = "setuptools.build_meta"\n[project]\nname = "Kv.Move"\n',
    )
    wheel = tmp_path / "kv_move-1.0-cp312-cp312-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("kvmove/__init__.py", "")
        zf.writestr("kv_move-1.0.data/scripts/kv-master", "#!/bin/sh\n")
        zf.writestr(
            "kv_move-1.0.dist-info/entry_points.txt", "[console_scripts]\nKv-Probe = kvmove.cli:main\n"
        )
    facts = scan_mod.read_wheels([wheel])
    assert facts.scripts == ("Kv-Probe", "kv-master")
    assert facts.packages == ("kvmove",)
    read = scan_mod.read_project(project)
    assert read.import_name == "kv_move"  # nothing in the tree: the normalized name
    backends = load(ROOT / "matrix.yaml").backends
    plan = init_mod.make_plan(
        read, output=tmp_path / "m.yaml", backends=backends, variants=["cpu"], wheels=facts
    )
    assert plan.project.import_name == "kvmove"  # what the wheel ships wins over the guess
    plan = init_mod.make_plan(
        read, output=tmp_path / "m.yaml", backends=backends, variants=["cpu"], wheels=facts, import_name="kv"
    )
    assert plan.project.import_name == "kv"


@pytest.mark.parametrize(
    ("pyproject", "message"),
    [
        ("[build-system]\nrequires = []\n", "no \\[project\\] name"),
        ("[project\nname = 1", "invalid TOML"),
    ],
)
def test_unusable_pyproject_is_a_usage_error(tmp_path: Path, pyproject: str, message: str) -> None:
    project = write_project(tmp_path / "p", pyproject)
    with pytest.raises(UsageError, match=message):
        scan_mod.read_project(project)


def test_yaml_scalars_never_change_type() -> None:
    for value in ("3.10", "yes", "on", "null", "libcudart.so*", "1.0", "a b", "-x", "x: y", "engine"):
        assert yaml.safe_load(f"k: {init_mod._scalar(value)}") == {"k": value}


# --- the repository init sets up: schema, noxfile, .gitignore, workflows, variant guard -------------

RINGLET_PYPROJECT = """\
[build-system]
requires = ["scikit-build-core>=0.10"]
build-backend = "scikit_build_core.build"

[project]
name = "ringlet"
version = "0.1.0"
readme = "README.md"
requires-python = ">=3.11"

[tool.scikit-build]
wheel.packages = ["src/ringlet"]
"""
RINGLET_CMAKE = """\
cmake_minimum_required(VERSION 3.18)
project(ringlet LANGUAGES CXX)
option(USE_CUDA "Build the CUDA transport" OFF)
option(RINGLET_WITH_HIP
       "Build the HIP transport")
option(USE_CUDA_GRAPHS "Capture transfers in CUDA graphs" ON)
option(RINGLET_BUILD_BENCH "Build the benchmark binary" OFF)
"""
RINGLET_INIT = (
    '"""ringlet: a tiny ring buffer."""\n\nfrom __future__ import annotations\n\n'
    "from ringlet._ringlet import capacity\n"
)


def ringlet(root: Path) -> Path:
    """A repository holding a scikit-build-core engine with a src/ layout and CMake option()s."""
    write_project(root, RINGLET_PYPROJECT, cmake=RINGLET_CMAKE)
    (root / "src" / "ringlet").mkdir(parents=True)
    (root / "src" / "ringlet" / "__init__.py").write_text(RINGLET_INIT, encoding="utf-8")
    return root


def metadata_guard_rule() -> Callable[[str], bool]:
    """The variant-conflict rule's check of an `__init__.py` (a module of the rules package, or
    the rules module, depending on how release.inspect is split)."""
    for name in ("release.inspect.rules.package", "release.inspect.rules"):
        try:
            check: Callable[[str], bool] = importlib.import_module(name).has_metadata_guard
        except (ImportError, AttributeError):
            continue
        return check
    pytest.fail("release.inspect has no has_metadata_guard any more: follow it here")


def init_in(root: Path, *args: str) -> int:
    return cli.main(["init", str(root), "--output", str(root / "matrix.yaml"), *args])


def test_init_sets_up_the_repository(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from release.init import repository

    root = ringlet(tmp_path / "repo")
    (root / ".gitignore").write_text("*.pyc", encoding="utf-8")
    assert init_in(root, "--variants", "cpu,cuda,rocm") == 0
    out = capsys.readouterr().out
    text = (root / "matrix.yaml").read_text(encoding="utf-8")
    assert text.splitlines()[0] == "# yaml-language-server: $schema=.release/matrix.schema.json"
    schema = root / ".release" / "matrix.schema.json"
    assert schema.read_text(encoding="utf-8") == SCHEMA_FILE.read_text(encoding="utf-8")
    validate(root / "matrix.yaml")
    noxfile = (root / "noxfile.py").read_text(encoding="utf-8")
    assert 'register("matrix.yaml")' in noxfile and "from release.nox_sessions import register" in noxfile
    compile(noxfile, "noxfile.py", "exec")
    assert (root / ".gitignore").read_text(encoding="utf-8").splitlines() == [
        "*.pyc", "# release toolkit: build trees and repaired wheels", "/build/", "/wheelhouse/",
    ]  # fmt: skip
    assert not (root / ".github").exists()  # no --ci
    assert "next: " in out and "nox -s build_cpu-3.11 smoke_cpu-3.11" in out
    # a second run changes nothing it does not own
    assert init_in(root, "--variants", "cpu,cuda,rocm", "--force") == 0
    assert (root / "noxfile.py").read_text(encoding="utf-8") == noxfile
    assert repository.gitignore_text((root / ".gitignore").read_text(encoding="utf-8")) is None


def test_cmake_options_become_each_variants_defines(tmp_path: Path) -> None:
    root = ringlet(tmp_path / "repo")
    assert init_in(root, "--variants", "cpu,cuda,rocm") == 0
    loaded = load(root / "matrix.yaml").matrix
    assert {n: dict(v.cmake_defines) for n, v in loaded.variants.items()} == {
        "cpu": {"USE_CUDA": "OFF", "RINGLET_WITH_HIP": "OFF"},
        "cuda": {"USE_CUDA": "ON", "RINGLET_WITH_HIP": "OFF"},
        "rocm": {"USE_CUDA": "OFF", "RINGLET_WITH_HIP": "ON"},
    }
    text = (root / "matrix.yaml").read_text(encoding="utf-8")
    assert "#   USE_CUDA_GRAPHS (default ON): Capture transfers in CUDA graphs" in text
    assert "#   RINGLET_BUILD_BENCH (default OFF): Build the benchmark binary" in text


@pytest.mark.parametrize(
    ("name", "backend"),
    [
        ("USE_CUDA", "cuda"),
        ("WITH_HIP", "rocm"),
        ("MC_ENABLE_MUSA", "musa"),
        ("USE_ROCM", "rocm"),
        ("USE_CUDA_GRAPHS", None),
        ("CUDA", None),
        ("BUILD_TESTS", None),
    ],
)
def test_option_names_that_select_a_runtime(name: str, backend: str | None) -> None:
    assert scan_mod.option_backend(name, SPELLINGS) == backend


def test_cmake_options_parse_across_lines_and_keep_the_first_definition() -> None:
    options = scan_mod.parse_cmake_options(RINGLET_CMAKE + 'option(USE_CUDA "again" ON)\n')
    assert [(o.name, o.default) for o in options] == [
        ("USE_CUDA", "OFF"),
        ("RINGLET_WITH_HIP", "OFF"),
        ("USE_CUDA_GRAPHS", "ON"),
        ("RINGLET_BUILD_BENCH", "OFF"),
    ]
    assert options[1].help == "Build the HIP transport"


def test_variant_guard_is_written_and_passes_the_verify_rule(tmp_path: Path) -> None:

    has_metadata_guard = metadata_guard_rule()

    root = ringlet(tmp_path / "repo")
    assert init_in(root, "--variants", "cpu,rocm") == 0
    source = (root / "src" / "ringlet" / "__init__.py").read_text(encoding="utf-8")
    assert has_metadata_guard(source)
    lines = source.splitlines()
    assert lines[:3] == ['"""ringlet: a tiny ring buffer."""', "", "from __future__ import annotations"]
    assert lines.index(BEGIN) < lines.index("from ringlet._ringlet import capacity")
    assert '["ringlet-cpu", "ringlet-rocm"]' in source
    # again with another variant: the block is replaced, never doubled
    assert init_in(root, "--variants", "cpu,cuda,rocm", "--force") == 0
    again = (root / "src" / "ringlet" / "__init__.py").read_text(encoding="utf-8")
    assert again.count(BEGIN) == 1 and '["ringlet-cpu", "ringlet", "ringlet-rocm"]' in again


def test_variant_guard_refuses_two_variants(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    from release.init.guard import guard_code

    installed = {"kv-cpu", "kv-rocm"}

    def distribution(name: str) -> object:
        if name in installed:
            return object()
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    code = compile(guard_code("kv", ["kv", "kv-cpu", "kv-rocm"]), "kv/__init__.py", "exec")
    refused = r"kv: kv-cpu, kv-rocm are installed together .* pip uninstall kv-rocm"
    with pytest.raises(ImportError, match=refused):
        exec(code, {})
    installed.discard("kv-rocm")
    namespace: dict[str, object] = {}
    exec(code, namespace)
    assert "_refuse_a_second_variant" not in namespace  # leaves nothing behind in the package


def test_one_variant_needs_no_guard_and_a_projects_own_guard_is_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = ringlet(tmp_path / "repo")
    assert init_in(root, "--variants", "cpu") == 0
    assert (root / "src" / "ringlet" / "__init__.py").read_text(encoding="utf-8") == RINGLET_INIT
    own = RINGLET_INIT + "import importlib.metadata\n"
    (root / "src" / "ringlet" / "__init__.py").write_text(own, encoding="utf-8")
    capsys.readouterr()
    assert init_in(root, "--variants", "cpu,rocm", "--force") == 0
    assert "kept (it already checks the installed distributions)" in capsys.readouterr().out
    assert (root / "src" / "ringlet" / "__init__.py").read_text(encoding="utf-8") == own


def test_no_guard_prints_the_code_instead(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = ringlet(tmp_path / "repo")
    assert init_in(root, "--variants", "cpu,rocm", "--no-guard") == 0
    out = capsys.readouterr().out
    assert f"put this at the top of {root / 'src' / 'ringlet' / '__init__.py'}" in out
    assert "def _refuse_a_second_variant" in out
    assert (root / "src" / "ringlet" / "__init__.py").read_text(encoding="utf-8") == RINGLET_INIT


def test_ci_github_writes_workflows_pinned_to_the_toolkit(tmp_path: Path) -> None:
    from release import DISTRIBUTION, __version__

    root = ringlet(tmp_path / "repo")
    assert init_in(root, "--variants", "cpu,rocm", "--ci", "github") == 0
    for name in ("release.yml", "ci.yml", "hardware.yml"):
        text = (root / ".github" / "workflows" / name).read_text(encoding="utf-8")
        doc = yaml.safe_load(text)
        assert doc["env"]["TOOLKIT"] == f"{DISTRIBUTION}=={__version__}", name
        assert "@@" not in text and "pip install ." not in text, name
        runs = [s["run"] for job in doc["jobs"].values() for s in job.get("steps", []) if "run" in s]
        installs = [line for run in runs for line in run.splitlines() if "pip install" in line]
        assert installs and all('"$TOOLKIT"' in line for line in installs), (name, installs)
        assert "scripts/" not in text  # the repository has no scripts/: toolchains come from the toolkit
        # Every run: step fails when any command of a pipe fails (GitHub's `bash -eo pipefail`).
        assert doc["defaults"] == {"run": {"shell": "bash"}}, name
        shells = [s.get("shell") for job in doc["jobs"].values() for s in job.get("steps", [])]
        assert not any(shells) and not any("defaults" in job for job in doc["jobs"].values()), name
    ci = (root / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8")
    assert 'release toolchain install --variant "$VARIANT"' in ci


def test_ci_github_writes_beside_the_project_s_own_workflows_and_never_over_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 58: a project with its own ci.yml gets the toolkit's workflows under names that do not
    collide, one paragraph on what to merge, and its own file untouched; `--force` alone overwrites."""
    root = ringlet(tmp_path / "repo")
    workflow = root / ".github" / "workflows" / "ci.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text("# ours\n", encoding="utf-8")
    assert init_in(root, "--ci", "github") == 0
    said = capsys.readouterr().out
    assert workflow.read_text(encoding="utf-8") == "# ours\n"
    names = sorted(p.name for p in workflow.parent.iterdir())
    assert names == ["ci.yml", "wheels-ci.yml", "wheels-hardware.yml", "wheels-release.yml"]
    release = (workflow.parent / "wheels-release.yml").read_text(encoding="utf-8")
    assert "gh workflow run wheels-hardware.yml" in release and "gh workflow run hardware.yml" not in release
    assert "ci.yml are the project's own and are kept" in said and "To merge:" in said, said
    (root / "matrix.yaml").unlink()
    assert init_in(root, "--ci", "github") == 2  # the beside names are taken too: nothing written
    assert "already exist: pass --force" in capsys.readouterr().err
    assert not (root / "matrix.yaml").exists()
    assert init_in(root, "--ci", "github", "--force") == 0
    assert workflow.read_text(encoding="utf-8") != "# ours\n"


def test_an_existing_noxfile_is_kept_with_the_lines_to_add(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = ringlet(tmp_path / "repo")
    (root / "noxfile.py").write_text("import nox\n", encoding="utf-8")
    assert init_in(root, "--variants", "cpu") == 0
    assert (root / "noxfile.py").read_text(encoding="utf-8") == "import nox\n"
    assert 'from release.nox_sessions import register\n    register("matrix.yaml")' in capsys.readouterr().out


def test_a_project_without_a_readme_is_told_about_twine_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_project(tmp_path / "repo", RINGLET_PYPROJECT.replace('readme = "README.md"\n', ""))
    assert init_in(root, "--variants", "cpu") == 0
    assert "has no `readme`" in capsys.readouterr().out


def test_nox_sessions_come_from_the_toolkit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import nox.registry

    from release import nox_sessions

    monkeypatch.setattr(nox.registry, "_REGISTRY", {})
    monkeypatch.delenv("RELEASE_MATRIX", raising=False)
    root = ringlet(tmp_path / "repo")
    assert init_in(root, "--variants", "cpu,rocm") == 0
    monkeypatch.chdir(root)  # nox runs a noxfile in its directory
    loaded = nox_sessions.register("matrix.yaml")
    pythons = loaded.matrix.python
    expected = {"plan", "verify", "publish", "rehearse"}
    for stage in ("build", "smoke"):
        for variant in ("cpu", "rocm"):
            expected |= {f"{stage}_{variant}", *(f"{stage}_{variant}-{p}" for p in pythons)}
    assert set(nox.registry.get()) == expected
    doc = nox.registry.get()["build_rocm-3.12"].__doc__
    assert doc == "Build, repair and verify the rocm wheel for Python 3.12."
    monkeypatch.setenv("RELEASE_MATRIX", str(tmp_path / "elsewhere.yaml"))
    assert nox_sessions.matrix_file("matrix.yaml") == tmp_path / "elsewhere.yaml"


def test_the_guard_goes_below_a_licence_header_docstring_and_future_imports() -> None:
    from release.init.guard import guard_code, with_guard

    header = ["# Copyright 2026 Ringlet authors", "# SPDX-License-Identifier: Apache-2.0", '"""Doc."""']
    source = "\n".join([*header, "", "import os", ""])
    lines = with_guard(source, guard_code("k", ["k-cpu", "k-rocm"])).splitlines()
    assert lines[:3] == header
    assert lines.index(BEGIN) < lines.index("import os")


@pytest.mark.parametrize(
    "source",
    [
        "import importlib.metadata\n",
        "import importlib_metadata\n",
        "from importlib import metadata\n",
        "from importlib import (\n    metadata,\n)\n",
    ],
)
def test_a_project_guard_is_recognised_in_each_spelling(tmp_path: Path, source: str) -> None:
    """The reference engine checks its installed distributions through `from importlib import
    metadata`: init keeps such a module as it is instead of adding a second guard."""
    init_file = tmp_path / "__init__.py"
    init_file.write_text(source, encoding="utf-8")
    assert write_guard(init_file, "xfer", ["xfer-engine", "xfer-engine-cpu"]).endswith(
        "kept (it already checks the installed distributions)"
    )
    assert init_file.read_text(encoding="utf-8") == source


def test_the_reference_engine_keeps_its_own_guard() -> None:
    source = (Path(__file__).resolve().parents[2] / "engine" / "python" / "xfer" / "__init__.py").read_text(
        encoding="utf-8"
    )
    assert mentions_metadata(source) and BEGIN not in source
