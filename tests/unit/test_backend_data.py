"""Backends are data: `packaging/backends/*.json` has a committed schema, is checked when loaded
(file:line errors), and drives what used to be backend-specific code (architecture names, version
encoding, toolkit variables, CMake spellings) with no backend name in `release/`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from release import cli
from release.config import backends as backends_mod
from release.config.backends import Backend, load_backends
from release.config.dataschema import spec
from release.config.matrix import loads
from release.config.resources import default_backends_dir, toolkit_backends
from release.errors import MatrixError
from release.init import scan
from release.machine.toolchain import decode_version, find_toolchain, read_version

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "packaging" / "backends"

# A made-up accelerator (an NPU-like one) described by data alone.
NPU: dict[str, Any] = {
    "$schema": "../../release/config/backend.schema.json",
    "schema_version": 1,
    "name": "npu",
    "title": "Example NPU",
    "runtime_libraries": ["libnpurt.so*"],
    "exclude": ["libnpurt.so*"],
    "requires_runtime_needed": ["libnpurt.so"],
    "device_code_sections": [".npu_fatbin"],
    "architectures": "ascend[0-9]{3}[a-z]?",
    "cmake_spellings": ["ascend", "cann"],
    "toolkit": {
        "env": ["NPU_HOME"],
        "prefixes": ["/nonexistent/npu-*"],
        "marker": "include/npurt.h",
        "version_header": "include/npurt.h",
        "version_define": "NPURT_VERSION",
        "version_places": [10000, 100, 1],
        "export_env": ["NPU_TOOLKIT_ROOT", "ASCEND_HOME_PATH"],
        "install": "bash install-npu.sh",
    },
    "toolkit_name": "NPU",
    "runtime_hint": "install the NPU runtime that provides {soname} ({releases})",
    "runtime_sonames": {"8": ["libnpurt.so.1"], "9": ["libnpurt.so.1"], "10": ["libnpurt.so.2"]},
}


def _schema() -> dict[str, Any]:
    result: dict[str, Any] = json.loads(backends_mod.SCHEMA_FILE.read_text(encoding="utf-8"))
    return result


def _write(directory: Path, data: dict[str, Any], name: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name or data['name']}.json"
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def test_committed_backend_schema_is_the_generated_one() -> None:
    assert backends_mod.SCHEMA_FILE.read_text(encoding="utf-8") == backends_mod.schema_text()
    jsonschema.Draft202012Validator.check_schema(_schema())


@pytest.mark.parametrize("file", sorted(BACKENDS.glob("*.json")), ids=lambda f: f.name)
def test_every_backend_file_validates_against_the_schema_it_names(file: Path) -> None:
    data = json.loads(file.read_text(encoding="utf-8"))
    assert (file.parent / data["$schema"]).resolve() == backends_mod.SCHEMA_FILE
    jsonschema.validate(data, _schema())


def test_a_new_backend_is_a_json_file(tmp_path: Path) -> None:
    jsonschema.validate(NPU, _schema())
    loaded = load_backends(_write(tmp_path, NPU).parent)["npu"]
    assert loaded.spellings == ("npu", "ascend", "cann")
    assert loaded.sonames_for("9.0") == ("libnpurt.so.1",)  # a soname major is not the toolkit's
    assert loaded.majors_providing("libnpurt.so.1") == ("8", "9")
    assert loaded.releases_providing("libnpurt.so.1") == "NPU 8.x or 9.x"


@pytest.mark.parametrize(
    ("change", "key", "line_has", "says", "schema_too"),
    [
        ({"architectures": "gfx[0-9"}, "architectures", '"architectures"', "not a regular expression", False),
        ({"architectures": "x?"}, "architectures", '"architectures"', "matches the empty string", False),
        ({"architekturen": "gfx"}, "architekturen", '"architekturen"', "did you mean 'architectures'", True),
        ({"cmake_spellings": "ascend"}, "cmake_spellings", '"cmake_spellings"', "expected a list", True),
        (
            {"toolkit": {**NPU["toolkit"], "version_places": [10, 1000]}},
            "toolkit.version_places", '"version_places"', "largest first", False,
        ),
        ({"toolkit": {**NPU["toolkit"], "export_env": [1]}}, "toolkit.export_env", "1", "", True),
    ],
)  # fmt: skip
def test_a_bad_backend_file_is_named_with_its_line(
    tmp_path: Path, *, change: dict[str, Any], key: str, line_has: str, says: str, schema_too: bool
) -> None:
    data = {**NPU, **change}
    path = _write(tmp_path, data)
    with pytest.raises(MatrixError) as caught:
        load_backends(path.parent)
    (problem,) = caught.value.problems
    assert problem.file == str(path)
    assert problem.key.startswith(key)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert problem.line is not None
    assert line_has in lines[problem.line - 1], lines[problem.line - 1]
    assert says.lower() in problem.message.lower()
    assert re.match(rf"{re.escape(str(path))}:\d+: {re.escape(problem.key)}: ", str(problem))
    if schema_too:  # what the model's types refuse, the committed schema refuses as well
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(data, _schema())


def test_the_file_name_must_be_the_backend_name(tmp_path: Path) -> None:
    path = _write(tmp_path, NPU, name="ascend")
    with pytest.raises(MatrixError, match=r"ascend\.json:\d+: name: must be 'ascend'"):
        load_backends(path.parent)


@pytest.mark.parametrize(
    ("number", "places", "version"),
    [(13000, (1000, 10), "13.0"), (12080, (1000, 10), "12.8"), (80302, (10000, 100, 1), "8.3.2")],
)
def test_a_version_macro_is_read_by_its_place_values(
    number: int, places: tuple[int, ...], version: str
) -> None:
    assert decode_version(number, places) == version


def test_toolkit_found_by_data_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = tmp_path / "npu-8.3"
    (prefix / "include").mkdir(parents=True)
    (prefix / "include" / "npurt.h").write_text("#define NPURT_VERSION 80302\n", encoding="utf-8")
    backend = load_backends(_write(tmp_path / "data", NPU).parent)["npu"]
    assert backend.toolkit is not None
    assert read_version(prefix, backend.toolkit) == "8.3.2"
    monkeypatch.setenv("NPU_HOME", str(prefix))
    found = find_toolchain(backend)
    assert (found.prefix, found.version, found.found_by) == (prefix, "8.3.2", "$NPU_HOME")
    assert found.env == dict.fromkeys(("NPU_HOME", "NPU_TOOLKIT_ROOT", "ASCEND_HOME_PATH"), str(prefix))


def test_the_reference_backends_keep_their_facts() -> None:
    backends = load_backends(BACKENDS)
    cuda, rocm = backends["cuda"], backends["rocm"]
    assert cuda.toolkit is not None and cuda.toolkit.export_env == ("CUDAToolkit_ROOT",)
    assert cuda.toolkit.version_places == (1000, 10)
    assert rocm.spellings == ("rocm", "hip", "amd")
    assert rocm.sonames_for("10.0") == ("libamdhip64.so.7",)  # HIP's soname follows HIP, not ROCm
    assert {n: b.architectures is not None for n, b in backends.items()} == {
        "cpu": False, "cuda": True, "musa": True, "rocm": True
    }  # fmt: skip


def test_cmake_spellings_come_from_the_data(tmp_path: Path) -> None:
    backends = load_backends([BACKENDS, _write(tmp_path, NPU).parent])
    spellings = {n: b.spellings for n, b in backends.items()}
    assert scan.option_backend("USE_CANN", spellings) == "npu"
    assert scan.option_backend("WITH_HIP", spellings) == "rocm"
    assert scan.cmake_value("npu", ("cpu", "ascend"), spellings) == "ascend"


def test_no_backend_name_in_the_code_that_used_to_know_them() -> None:
    modules = ("machine/toolchain.py", "init/scan.py", "init/scaffold.py", "inspect/devicecode.py")
    for module in (f"release/{m}" for m in modules):
        text = (ROOT / module).read_text(encoding="utf-8")
        for word in ('"cuda"', '"rocm"', '"musa"', '"hip"', "CUDAToolkit_ROOT", "gfx\\d", "sm_\\d"):
            assert word not in text, (module, word)


def test_a_project_adds_backends_beside_its_matrix(tmp_path: Path) -> None:
    _write(tmp_path / "packaging" / "backends", NPU)
    matrix = tmp_path / "matrix.yaml"
    assert default_backends_dir(matrix) == (toolkit_backends(), tmp_path / "packaging" / "backends")
    text = (
        "schema_version: 1\n"
        "engine: {source: ., import_name: npux, version: '1.0'}\n"
        "python: ['3.12']\n"
        "platform: {floor: manylinux_2_28_x86_64}\n"
        "variants:\n"
        "  cpu: {distribution: npux-cpu, backend: cpu}\n"
        "  npu: {distribution: npux, backend: npu, toolkit: '9.0'}\n"
    )
    loaded = loads(text, path=matrix)
    assert set(loaded.backends) == {"cpu", "cuda", "musa", "rocm", "npu"}
    assert isinstance(loaded.backends["npu"], Backend)
    # the reference repository's own matrix loads its backends once, not twice
    assert default_backends_dir(ROOT / "matrix.yaml") == (toolkit_backends(),)


def test_a_backend_model_change_is_caught_as_drift(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["schema", "--backend"]) == 0
    assert json.loads(capsys.readouterr().out) == _schema()

    @dataclass(frozen=True, kw_only=True)
    class Drifted(Backend):
        npu_only: str = spec("A key the committed schema does not know.", default="")

    Drifted.__name__ = "Backend"
    Drifted.__module__ = backends_mod.__name__
    monkeypatch.setattr(backends_mod, "Backend", Drifted)
    assert cli.main(["schema", "--check"]) == 1
    assert "backend.schema.json is out of date with release/config/backends.py" in capsys.readouterr().err


def test_a_cuda_host_build_links_the_driver_stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Engines that link a bare `-lcuda` (no CMake `CUDA::cuda_driver`) find the toolkit's stub
    through LIBRARY_PATH, ahead of what the caller had there; LD_LIBRARY_PATH is left alone."""
    prefix = tmp_path / "cuda-13.0"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "nvcc").write_text("", encoding="utf-8")
    monkeypatch.setenv("CUDA_HOME", str(prefix))
    monkeypatch.setenv("LIBRARY_PATH", "/opt/other/lib")
    found = find_toolchain(load_backends(BACKENDS)["cuda"])
    assert found.env["LIBRARY_PATH"] == f"{prefix}/lib64/stubs:/opt/other/lib"
    assert "LD_LIBRARY_PATH" not in found.env
    monkeypatch.delenv("LIBRARY_PATH")
    assert find_toolchain(load_backends(BACKENDS)["cuda"]).env["LIBRARY_PATH"] == f"{prefix}/lib64/stubs"


def test_backends_without_link_dirs_leave_library_path_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = tmp_path / "npu-8.3"
    (prefix / "include").mkdir(parents=True)
    (prefix / "include" / "npurt.h").write_text("#define NPURT_VERSION 80302\n", encoding="utf-8")
    monkeypatch.setenv("NPU_HOME", str(prefix))
    backend = load_backends(_write(tmp_path / "data", NPU).parent)["npu"]
    assert "LIBRARY_PATH" not in find_toolchain(backend).env
