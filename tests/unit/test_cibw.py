"""`release cibuildwheel-config`: the cibuildwheel settings a variant of the matrix produces."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

import pytest
import tomlkit

from release import cli
from release.builder import cibw
from release.commands import cibuildwheel_config
from release.config.matrix import LoadedMatrix, load, loads
from release.errors import UsageError
from release.plan.runtimes import RUNTIME_ENV
from release.plan.steps import make_plan

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "packaging" / "backends"


@pytest.fixture(scope="module")
def loaded() -> LoadedMatrix:
    return load(ROOT / "matrix.yaml")


def _opts(loaded: LoadedMatrix, variant: str, pythons: tuple[str, ...]) -> dict[str, str]:
    steps = make_plan(loaded, variants=(variant,), include_held_back=True).builds_of(variant)
    # the x86_64 steps: cibuildwheel builds one machine at a time (test_plan_machines: aarch64's)
    order = [s for s in steps if (not pythons or s.python in pythons) and s.identifier.endswith("_x86_64")]
    return cibw.cibuildwheel_options(tuple(order))


def _env(loaded: LoadedMatrix, variant: str, pythons: tuple[str, ...]) -> dict[str, str]:
    return {cibw.env_name(k): v for k, v in _opts(loaded, variant, pythons).items()}


def _with_extra_settings(tmp_path: Path) -> LoadedMatrix:
    """The real matrix with a variant that has env, config settings and awkward values."""
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    extra = (
        "  odd:\n"
        "    distribution: xfer-engine-odd\n"
        "    backend: rocm\n"
        '    cmake_defines: {XFER_BACKEND: hip, XFER_FLAGS: "-O2 -g0"}\n'
        '    config_settings: {build-dir: "build/{wheel_tag}"}\n'
        '    env: {ROCM_PATH: /opt/rocm, NOTE: "it\'s $HOME \\"quoted\\""}\n'
        "\n"
    )
    text = text.replace("\nimages:\n", "\n" + extra + "images:\n", 1)
    text = text.replace("source: engine", f"source: {ROOT / 'engine'}", 1)
    return loads(text, path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)


def test_rocm_options_follow_the_matrix(loaded: LoadedMatrix) -> None:
    opts = _opts(loaded, "rocm", ("3.12",))
    assert opts["build"] == "cp312-manylinux_x86_64"
    assert opts["archs"] == "x86_64"
    assert opts["manylinux-x86_64-image"] == "manylinux_2_28"
    assert opts["build-frontend"] == "build[uv]"
    assert opts["skip"] == "*-musllinux_*"
    assert opts["before-all"] == "bash scripts/install-rocm.sh 7.2"
    assert opts["repair-wheel-command"] == (
        "python -m release repair --plat manylinux_2_28_x86_64 --exclude 'libamdhip64.so*' "
        "--exclude 'libhsa-runtime64.so*' --toolkit rocm=7.2 -w {dest_dir} {wheel}"
    )
    assert opts["config-settings"] == "cmake.define.XFER_BACKEND=hip"
    # The one variable: what the engine's import guard says when the runtime is missing.
    name, _, value = opts["environment"].partition("=")
    assert name == RUNTIME_ENV, "CMake variables travel once, as config settings"
    (unquoted,) = shlex.split(value)
    required = json.loads(unquoted)["libamdhip64.so.7"]
    assert required["provided_by"] == "ROCm 7.x or 10.x"
    assert "`apt install -t experimental libamdhip64-7`" in required["install"]
    assert opts["test-command"] == "python -c 'import xfer'"


def test_all_pythons_by_default_in_matrix_order(loaded: LoadedMatrix) -> None:
    opts = _opts(loaded, "cuda", ())
    expected = [f"cp{py.replace('.', '')}-manylinux_x86_64" for py in loaded.matrix.python]
    assert opts["build"].split() == expected
    picked = _opts(loaded, "cuda", ("3.13", "3.10"))
    assert picked["build"] == "cp310-manylinux_x86_64 cp313-manylinux_x86_64"


def test_cpu_installs_no_toolchain(loaded: LoadedMatrix) -> None:
    opts = _opts(loaded, "cpu", ())
    assert "before-all" not in opts
    assert opts["config-settings"] == "cmake.define.XFER_BACKEND=cpu"


@pytest.mark.parametrize("variant", ["cpu", "cuda", "rocm", "musa"])
def test_before_all_is_the_backend_install_command(loaded: LoadedMatrix, variant: str) -> None:
    backend = loaded.backends[loaded.variant(variant).backend]
    opts = _opts(loaded, variant, ())
    if backend.toolkit is None:
        assert "before-all" not in opts
    else:
        # The scripts take the declared toolkit version (tests/integration/test_install_scripts.py
        # runs this exact command against matching and mismatching installs).
        toolkit = loaded.variant(variant).toolkit
        assert opts["before-all"] == f"bash scripts/install-{backend.name}.sh {toolkit}"
        passed = opts["environment-pass"].split()
        assert passed == ["SOURCE_DATE_EPOCH", *backend.toolkit.install_env]
    excludes = make_plan(loaded, variants=(variant,), include_held_back=True).variant(variant).excludes
    for pattern in excludes:
        assert f"--exclude {shlex.quote(pattern)}" in opts["repair-wheel-command"]


def test_the_musa_installer_location_reaches_before_all_in_the_container(loaded: LoadedMatrix) -> None:
    assert _opts(loaded, "musa", ())["environment-pass"] == "SOURCE_DATE_EPOCH MUSA_INSTALLER"


def test_env_names_are_cibuildwheel_variables(loaded: LoadedMatrix) -> None:
    env = _env(loaded, "rocm", ("3.12",))
    assert env["CIBW_BUILD"] == "cp312-manylinux_x86_64"
    assert env["CIBW_MANYLINUX_X86_64_IMAGE"] == "manylinux_2_28"
    assert env["CIBW_BEFORE_ALL"] == "bash scripts/install-rocm.sh 7.2"
    assert env["CIBW_ENVIRONMENT_PASS"] == "SOURCE_DATE_EPOCH"
    assert env["CIBW_REPAIR_WHEEL_COMMAND"].startswith(
        "python -m release repair --plat manylinux_2_28_x86_64"
    )
    assert env["CIBW_CONFIG_SETTINGS"] == "cmake.define.XFER_BACKEND=hip"
    assert all(name.startswith("CIBW_") for name in env)


def test_options_are_valid_for_cibuildwheel(loaded: LoadedMatrix) -> None:
    """Every key and value type is accepted by the schema cibuildwheel ships."""
    jsonschema = pytest.importorskip("jsonschema")
    package = pytest.importorskip("cibuildwheel")
    schema_file = Path(package.__file__).parent / "resources" / "cibuildwheel.schema.json"
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    for variant in loaded.matrix.variants:
        jsonschema.validate(_opts(loaded, variant, ()), schema)


def test_awkward_values_survive_cibuildwheel_parsers(tmp_path: Path) -> None:
    """`environment` goes through cibuildwheel's bashlex evaluator, `config-settings` through shlex."""
    environment = pytest.importorskip("cibuildwheel.environment")
    odd = _with_extra_settings(tmp_path)
    opts = _opts(odd, "odd", ())
    parsed = environment.parse_environment(opts["environment"]).as_dictionary({})
    assert parsed == {
        "ROCM_PATH": "/opt/rocm",
        "NOTE": 'it\'s $HOME "quoted"',
    }
    pairs = dict(token.split("=", 1) for token in shlex.split(opts["config-settings"]))
    assert pairs == {
        "cmake.define.XFER_BACKEND": "hip",
        "cmake.define.XFER_FLAGS": "-O2 -g0",
        "build-dir": "build/{wheel_tag}",
    }


@pytest.mark.parametrize("value", ["plain", "A=B", "a b", "", "it's", '"$x" `y` \\ z'])
def test_quote_round_trips_through_bashlex(value: str) -> None:
    environment = pytest.importorskip("cibuildwheel.environment")
    parsed = environment.parse_environment(f"K={cibw.quote(value)}").as_dictionary({})
    assert parsed == {"K": value}


def test_toml_is_a_tool_cibuildwheel_table(loaded: LoadedMatrix) -> None:
    opts = _opts(loaded, "rocm", ())
    doc = tomlkit.parse(cibw.render(opts, "toml")).unwrap()
    assert doc == {"tool": {"cibuildwheel": opts}}


def test_env_format_is_one_variable_a_line(loaded: LoadedMatrix) -> None:
    opts = _opts(loaded, "rocm", ())
    lines = cibw.render(opts, "env").splitlines()
    assert dict(line.split("=", 1) for line in lines) == _env(loaded, "rocm", ())


def test_unknown_python_and_variant_are_usage_errors(loaded: LoadedMatrix) -> None:
    with pytest.raises(UsageError, match=r"Python 3\.9 is not in the matrix"):
        _command(loaded, "--variant", "rocm", "--python", "3.9")
    with pytest.raises(UsageError, match="did you mean 'rocm'"):
        _command(loaded, "--variant", "roc")


def _command(loaded: LoadedMatrix, *argv: str) -> int:
    parser = argparse.ArgumentParser()
    cibuildwheel_config.add_arguments(parser)
    return cibuildwheel_config.run(parser.parse_args(argv), loaded)


def test_command_prints_each_format(loaded: LoadedMatrix, capsys: pytest.CaptureFixture[str]) -> None:
    assert _command(loaded, "--variant", "rocm", "--format", "json") == 0
    assert json.loads(capsys.readouterr().out)["before-all"] == "bash scripts/install-rocm.sh 7.2"
    two_pythons = ("--python", "3.12", "--python", "3.13")
    assert _command(loaded, "--variant", "cpu", *two_pythons, "--format", "env") == 0
    assert "CIBW_BUILD=cp312-manylinux_x86_64 cp313-manylinux_x86_64\n" in capsys.readouterr().out
    assert _command(loaded, "--variant", "cpu") == 0
    assert capsys.readouterr().out.startswith("[tool.cibuildwheel]\n")


def test_command_is_registered() -> None:
    assert cli.COMMANDS["cibuildwheel-config"][0] == "cibuildwheel_config"


def test_a_prebuilt_toolkit_image_replaces_the_manylinux_image(tmp_path: Path) -> None:
    """matrix.yaml may name a manylinux_2_28 image with the CUDA toolkit already in it; before-all
    stays, and finds the declared toolkit there (install-cuda.sh: 'nothing to do')."""
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    image = "ghcr.io/example/manylinux_2_28_x86_64-cuda:13.0"
    old = "    build_image:                      # release CI: manylinux_2_28 + `install-cuda.sh 13.0`"
    assert text.count(old) == 1, "matrix.yaml's cuda build_image line moved"
    text = text.replace(old, f"    build_image:\n      release: {image!r}\n    # release CI:", 1)
    text = text.replace("source: engine", f"source: {ROOT / 'engine'}", 1)
    loaded = loads(text, path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)
    opts = _opts(loaded, "cuda", ("3.12",))
    assert opts["manylinux-x86_64-image"] == image
    assert opts["before-all"] == "bash scripts/install-cuda.sh 13.0"


def _stable_abi(tmp_path: Path) -> LoadedMatrix:
    """The real matrix with `stable_abi: "3.12"`: cp310, cp311 and one cp312-abi3 step a variant."""
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    text = text.replace("source: engine", f"source: {ROOT / 'engine'}\n  stable_abi: \"3.12\"", 1)
    return loads(text, path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)


def test_a_variant_mixing_abi3_and_per_python_steps_gets_an_override(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What ci.yml asks for (no --python): every identifier built, the abi3 one with the limited
    API through cibuildwheel's overrides, valid against cibuildwheel's own schema."""
    loaded = _stable_abi(tmp_path)
    assert _command(loaded, "--variant", "rocm", "--format", "json") == 0
    data = json.loads(capsys.readouterr().out)
    per_python = (
        "cp310-manylinux_x86_64 cp311-manylinux_x86_64 cp314t-manylinux_x86_64 cp315t-manylinux_x86_64"
    )
    assert data["build"] == f"{per_python} cp312-manylinux_x86_64"  # the t builds keep a wheel each
    assert "wheel.py-api" not in data["config-settings"]
    assert data["overrides"] == [
        {
            "select": "cp312-manylinux_x86_64",
            "config-settings": "cmake.define.XFER_BACKEND=hip wheel.py-api=cp312",
        }
    ]
    jsonschema = pytest.importorskip("jsonschema")
    package = pytest.importorskip("cibuildwheel")
    schema_file = Path(package.__file__).parent / "resources" / "cibuildwheel.schema.json"
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    jsonschema.validate(data, schema)
    assert _command(loaded, "--variant", "rocm") == 0
    toml = tomlkit.parse(capsys.readouterr().out).unwrap()
    assert toml["tool"]["cibuildwheel"]["overrides"] == data["overrides"]
    with pytest.raises(UsageError, match="CIBW_\\* variables cannot say"):
        _command(loaded, "--variant", "rocm", "--format", "env")
    # One group at a time is plain: the abi3 step alone, or the per-Python steps alone.
    assert _command(loaded, "--variant", "rocm", "--python", "3.12", "--format", "env") == 0
    assert "wheel.py-api=cp312" in capsys.readouterr().out


def _import_test(loaded: LoadedMatrix, variant: str) -> str:
    """The Python that cibuildwheel's test command runs (`python -c '...'`)."""
    argv = shlex.split(_opts(loaded, variant, ("3.12",))["test-command"])
    assert argv[:2] == ["python", "-c"]
    return argv[2]


def test_the_import_test_of_a_driver_backend_takes_the_guards_refusal(
    loaded: LoadedMatrix, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No GPU driver in a build container: a cuda wheel that binds libcuda.so.1 may only refuse in
    its own words, naming the library and the driver; a bare loader error still fails."""
    import ctypes
    import sys

    code = _import_test(loaded, "cuda")
    assert "libcuda.so.1" in code

    def no_driver(name: str, *args: object, **kwargs: object) -> object:
        raise OSError(name)

    monkeypatch.setattr(ctypes, "CDLL", no_driver)

    def importing(message: str) -> None:
        class Finder:
            @staticmethod
            def find_spec(fullname: str, *args: object) -> None:
                if fullname == "xfer":
                    raise ImportError(message)

        monkeypatch.setattr(sys, "meta_path", [Finder(), *sys.meta_path])
        monkeypatch.delitem(sys.modules, "xfer", raising=False)

    importing("xfer: xfer-engine needs libcuda.so.1 (the NVIDIA driver): the GPU driver is missing here")
    exec(code, {})
    assert "import xfer refused without the GPU driver, as it must" in capsys.readouterr().out
    importing("libcuda.so.1: cannot open shared object file: No such file or directory")
    with pytest.raises(ImportError, match="cannot open shared object file"):
        exec(code, {})
    # the rocm backend has no driver library: a plain import
    assert _import_test(loaded, "rocm") == "import xfer"


def test_a_cuda_container_build_links_the_driver_stub(loaded: LoadedMatrix) -> None:
    """The container's toolkit is where the install command puts the declared version; its
    driver stub is on the linker's path there (a bare `-lcuda` links), as on the host."""
    environment = pytest.importorskip("cibuildwheel.environment")
    opts = _opts(loaded, "cuda", ("3.12",))
    parsed = environment.parse_environment(opts["environment"]).as_dictionary({})
    assert parsed["LIBRARY_PATH"] == "/usr/local/cuda-13.0/lib64/stubs"
    rocm = environment.parse_environment(_opts(loaded, "rocm", ("3.12",))["environment"])
    assert "LIBRARY_PATH" not in rocm.as_dictionary({})


def test_a_variants_own_library_path_wins_in_the_container(tmp_path: Path) -> None:
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    text = text.replace(
        "    cmake_defines: {XFER_BACKEND: cuda}\n",
        "    cmake_defines: {XFER_BACKEND: cuda}\n    env: {LIBRARY_PATH: /mine}\n",
        1,
    )
    text = text.replace("source: engine", f"source: {ROOT / 'engine'}", 1)
    loaded = loads(text, path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)
    assert "LIBRARY_PATH=/mine" in _opts(loaded, "cuda", ("3.12",))["environment"].split()
