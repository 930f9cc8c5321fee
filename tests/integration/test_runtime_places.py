"""The guard `release init` writes finds a TheRock pip runtime (`rocm_sdk`, a nonce-named library
package, nothing on the loader's path), loads it once whichever of torch and the engine is imported
first, and names every place it looked when the runtime is gone. The HIP runtime here is a stand-in
library compiled with the real soname (libamdhip64.so.7); the SDK is scripts/therock-standin."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from release.smoke.image import Result
from release.smoke.probes import ONE_COPY, TWO_COPIES, two_copies

from .conftest import ROOT, toolkit
from .test_second_engine import needs_cc

_spec = importlib.util.spec_from_file_location(
    "rocm_sdk_standin_wheels", ROOT / "scripts/therock-standin/wheels.py"
)
assert _spec is not None and _spec.loader is not None
standin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(standin)

pytestmark = pytest.mark.integration

PYPROJECT = """\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "kv"
version = "0.1.0"
requires-python = ">=3.10"
"""
MAPPED = (
    "import sys, importlib\n"
    "for m in sys.argv[1:]: importlib.import_module(m)\n"
    "print('\\n'.join(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libamdhip64' in l})))\n"
)


def _stub_runtime(directory: Path) -> Path:
    """A library with HIP's soname (libamdhip64.so.7), compiled into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    stub = directory / "stub.c"
    stub.write_text("int hipGetDeviceCount(int *n) { *n = 0; return 0; }\n", encoding="utf-8")
    lib = directory / "libamdhip64.so.7"
    cc = ["cc", "-shared", "-fPIC", "-Wl,-soname,libamdhip64.so.7", "-o", str(lib), str(stub)]
    subprocess.run(cc, check=True)
    return lib


@needs_cc
def test_a_process_with_two_copies_of_the_runtime_fails_naming_both(tmp_path: Path) -> None:
    """What every smoke leg runs after its imports (`ONE_COPY`), in a process that loads a second
    libamdhip64 on purpose: by path, as a wheel vendoring its own copy beside torch's would."""
    first, second = _stub_runtime(tmp_path / "torch-lib"), _stub_runtime(tmp_path / "engine-lib")
    (tmp_path / "twice.py").write_text(
        f"import ctypes\nctypes.CDLL({str(first)!r})\nctypes.CDLL({str(second)!r})\n", encoding="utf-8"
    )
    (tmp_path / "once.py").write_text(f"import ctypes\nctypes.CDLL({str(first)!r})\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    results = {}
    for module in ("twice", "once"):
        argv = [sys.executable, "-c", ONE_COPY, "libamdhip64,libamd_smi", module]
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        results[module] = Result(tuple(argv), proc.returncode, proc.stdout, proc.stderr, 0.0)
    assert results["once"].returncode == 0, results["once"].stderr
    assert results["twice"].returncode == TWO_COPIES, results["twice"].stderr
    detail = two_copies(results["twice"])
    assert detail == f"two copies of libamdhip64 in one process: {second} and {first}"  # sorted


@needs_cc
def test_the_init_guard_finds_a_therock_pip_runtime(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "src" / "kv").mkdir(parents=True)
    (repo / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (repo / "src" / "kv" / "__init__.py").write_text('"""kv: a key-value mover."""\n', encoding="utf-8")
    toolkit("init", str(repo), "--variants", "cpu,rocm", cwd=repo, env={"PYTHONPATH": str(ROOT)})
    package = (repo / "src" / "kv" / "__init__.py").read_bytes()
    assert b"rocm_sdk" in package

    lib = _stub_runtime(tmp_path / "lib")
    wheels = tmp_path / "wheels"
    sdk = standin.write_wheels(wheels, [lib], torch=True)
    kv = standin.wheel(
        wheels,
        "kv-rocm",
        "0.1.0",
        {"kv/__init__.py": package},
        metadata="Requires-External: libamdhip64.so.7\n",
    )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "-q", "--no-index", "--no-deps", str(kv), *map(str, sdk)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LD_", "PYTHON", "ROCM_SDK"))}
    # No bytecode beside the venv's packages: pip's uninstall (run with this run's PYTHONPYCACHEPREFIX)
    # would leave such a __pycache__, and the SDK's package directory with it, a namespace package.
    env["PYTHONDONTWRITEBYTECODE"] = "1"

    def mapped(*modules: str) -> list[str]:
        proc = subprocess.run(
            [python, "-c", MAPPED, *modules],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()

    engine_first, torch_first = mapped("kv", "torch"), mapped("torch", "kv")
    assert engine_first == torch_first, (engine_first, torch_first)
    (path,) = engine_first  # one copy, in the nonce-named package's lib/
    assert "/site-packages/_rocm_sdk_core_10_0_0/lib/libamdhip64.so.7" in path

    subprocess.run([*pip, "uninstall", "-q", "-y", "rocm-sdk-core"], check=True)
    argv = [python, "-c", "import kv"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode != 0 and "During handling" not in proc.stderr, proc.stderr
    assert last.startswith("ImportError: kv: kv-rocm needs libamdhip64.so.7 (ROCm 7.x or 10.x)"), last
    assert "Missing required rocm libraries" in last and "rocm[libraries]" in last, last
