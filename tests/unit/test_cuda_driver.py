"""The CUDA driver library (libcuda.so.1) is the driver's, not a toolkit's (issue 30, item 1): backend
data excludes it by default, the build's requirement table and the import guard that `release init`
writes say the driver is missing when it does not resolve, and smoke expects that refusal."""

from __future__ import annotations

import ctypes
import importlib.metadata
import json
import shutil
from pathlib import Path

import pytest

from release.config.backends import load_backends
from release.config.matrix import loads
from release.errors import MatrixError
from release.init.guard import BEGIN, END, guard_code
from release.plan.resolve import resolve_variant
from release.plan.runtimes import RUNTIME_ENV
from release.smoke.refusal import refusal_problem

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "packaging" / "backends"
STANDIN = ROOT / "tests" / "standins" / "cuda_driver"
CUDA = load_backends(BACKENDS)["cuda"]


def test_the_cuda_backend_excludes_the_driver_by_default() -> None:
    assert CUDA.driver_sonames == ("libcuda.so.1",)
    loaded = loads((STANDIN / "matrix.yaml").read_text(encoding="utf-8"), path=STANDIN / "matrix.yaml")
    variant = resolve_variant(loaded, "cuda")
    # the stand-in's matrix declares no `exclude`: the backend's data keeps the driver bound
    assert "libcuda.so*" in variant.excludes and "libcudart.so*" in variant.excludes
    table = json.loads(variant.build.env[RUNTIME_ENV])
    assert table["libcuda.so.1"]["provided_by"] == "the NVIDIA driver"
    assert "NVIDIA GPU driver" in table["libcuda.so.1"]["install"]
    # the runtime's words name the runtime, the driver's the driver: neither borrows the other's
    assert "driver" not in table["libcudart.so.13"]["install"]
    assert "toolkit or `pip install nvidia-cuda-runtime` does not" in table["libcuda.so.1"]["install"]


def _cuda_with(tmp_path: Path, **changes: object) -> Path:
    directory = tmp_path / "backends"
    shutil.copytree(BACKENDS, directory)
    data = json.loads((directory / "cuda.json").read_text(encoding="utf-8"))
    data.update(changes)
    (directory / "cuda.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    return directory


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"exclude": ["libcudart.so*"]}, "'libcuda.so.1' matches no `exclude` glob: repair would vendor"),
        ({"driver_sonames": ["libcudart.so.13"]}, "'libcudart.so.13' is a runtime soname"),
        ({"driver_hint": ""}, "driver_sonames need a driver_hint"),
        ({"driver_hint": "install {driver}"}, "driver_hint: unknown placeholder {driver}"),
    ],
)
def test_driver_data_that_disagrees_with_itself_is_refused(
    tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    with pytest.raises(MatrixError, match=r"cuda\.json") as caught:
        load_backends(_cuda_with(tmp_path, **changes))
    assert message in str(caught.value)


def _drivers() -> dict[str, tuple[str, str]]:
    return {s: (CUDA.driver_name, CUDA.driver_help(s)) for s in CUDA.driver_sonames}


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Installed distributions (name -> its Requires-External) and a loader that finds no driver."""
    found: dict[str, list[str]] = {}

    class Dist:
        def __init__(self, name: str) -> None:
            self.metadata = {"Requires-External": found[name]}

    class Meta(dict[str, list[str]]):
        def get_all(self, key: str) -> list[str] | None:
            return self.get(key)

    def distribution(name: str) -> object:
        if name not in found:
            raise importlib.metadata.PackageNotFoundError(name)
        dist = Dist(name)
        dist.metadata = Meta(dist.metadata)
        return dist

    def cdll(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("libcuda.so"):
            msg = f"{name}: cannot open shared object file: No such file or directory"
            raise OSError(msg)
        return object()

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    monkeypatch.setattr(ctypes, "CDLL", cdll)
    return found


def test_the_guard_says_the_driver_is_missing(installed: dict[str, list[str]]) -> None:
    code = compile(guard_code("kv", ["kv", "kv-cpu"], _drivers()), "kv/__init__.py", "exec")
    installed["kv"] = ["libcudart.so.13", "libcuda.so.1"]
    with pytest.raises(ImportError) as caught:
        exec(code, {})
    message = str(caught.value)
    assert message.startswith("kv: kv needs libcuda.so.1 (the NVIDIA driver)")
    assert "the GPU driver is missing here, not a toolkit" in message
    assert "install or update the NVIDIA GPU driver" in message
    assert refusal_problem(1, f"ImportError: {message}", ["libcuda.so.1"], driver=True) is None


def test_the_guard_passes_a_wheel_that_binds_no_driver(installed: dict[str, list[str]]) -> None:
    code = compile(guard_code("kv", ["kv", "kv-cpu"], _drivers()), "kv/__init__.py", "exec")
    installed["kv-cpu"] = []  # the cpu wheel: no Requires-External
    namespace: dict[str, object] = {}
    exec(code, namespace)
    assert "_require_the_gpu_driver" not in namespace
    installed.pop("kv-cpu")
    installed["kv"] = ["libcudart.so.13"]  # the runtime is the loader's business, not the guard's
    exec(code, {})


def test_without_driver_libraries_the_guard_is_the_variant_check_alone() -> None:
    assert "_require_the_gpu_driver" not in guard_code("kv", ["kv", "kv-rocm"])
    assert "_require_the_gpu_driver" in guard_code("kv", ["kv"], _drivers())


def test_the_standins_guard_is_the_one_init_writes() -> None:
    source = (STANDIN / "src" / "cuda_driver_standin" / "__init__.py").read_text(encoding="utf-8")
    block = source[source.index(BEGIN) : source.index(END) + len(END)]
    expected = guard_code("cuda_driver_standin", ["cuda-driver-standin"], _drivers()).rstrip("\n")
    assert block == expected, "refresh it: release.init.guard.write_guard (what `release init` runs)"


@pytest.mark.parametrize(
    ("returncode", "message", "problem"),
    [
        (0, "", "the import succeeded without the GPU driver"),
        (
            1,
            "OSError: libcuda.so.1: cannot open shared object file: No such file or directory",
            "bare loader error",
        ),
        (1, "ImportError: kv needs the CUDA runtime (libcudart.so.13)", "does not name libcuda.so.1"),
        (1, "ImportError: kv needs libcuda.so.1: install a CUDA toolkit", "does not say that the GPU driver"),
    ],
)
def test_smoke_refuses_a_refusal_that_does_not_say_the_driver(
    returncode: int, message: str, problem: str
) -> None:
    found = refusal_problem(returncode, message, ["libcuda.so.1"], driver=True)
    assert found is not None and problem in found
