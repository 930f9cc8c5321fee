"""A new accelerator backend from data alone: no edit under `release/`.

The test writes, into tmp_path, what a maintainer adding an accelerator writes:

- `packaging/backends/toygpu.json` beside the matrix (the project's own backend data, which adds to
  the toolkit's): runtime globs and excludes, the soname per toolkit major (ToyGPU 3.x and 4.x
  both bind `libtoygpurt.so.2`: a soname major is not the toolkit's), toolkit probe with its
  version encoding and the variable the build reads (`TOYGPU_ROOT`), the install script, the
  architecture names and CMake spellings;
- `packaging/install-toygpu.sh`, the install script that the backend data names: it compiles a
  TEST STAND-IN runtime (`libtoygpurt.so.2`, a shared library with a soname, playing a GPU
  runtime) into `<tmp>/opt/toygpu-<version>`;
- a small scikit-build-core engine, `toyxfer` (not the reference engine), whose CMake switch
  `TOYXFER_RUNTIME=toygpu` links that runtime, and `TOYXFER_TRANSPORT=numa` a system library;
- a matrix whose two GPU variants (`toygpu`, and the transport variant `toygpunuma`) are written
  once with a YAML anchor and merge keys, not copied.

Then: plan -> build (first stopped in one line naming the install script, then after running it)
-> repair (runtime excluded; without the excludes it would be vendored, and verify says so) ->
verify (the backend's runtime rules) -> smoke (a simulated image with the runtime under a prefix,
one without it).
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from release.machine.interpreters import find_interpreter

from .conftest import ROOT, toolkit

pytestmark = pytest.mark.integration

PY = "3.12" if find_interpreter("3.12") else f"{sys.version_info[0]}.{sys.version_info[1]}"
TAG = "cp" + PY.replace(".", "")
FLOOR = "manylinux_2_34_x86_64"
SONAME = "libtoygpurt.so.2"  # TEST STAND-IN runtime soname; the toolkit releases are 3.x and 4.x
NUMA = "libnuma.so.1"

needs_tools = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("cc", "cmake")), reason="needs a C compiler and cmake"
)
needs_numa = pytest.mark.skipif(
    not Path("/usr/include/numa.h").exists(), reason="libnuma-dev is not installed (apt install libnuma-dev)"
)
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="simulated images need root (mount namespaces)")


def backend_data(opt: Path, install: Path) -> dict[str, object]:
    return {
        "$schema": str(ROOT / "release" / "config" / "backend.schema.json"),
        "schema_version": 1,
        "name": "toygpu",
        "title": "ToyGPU (TEST STAND-IN)",
        "runtime_libraries": ["libtoygpurt.so*"],
        "exclude": ["libtoygpurt.so*"],
        "requires_runtime_needed": ["libtoygpurt.so"],
        "device_code_sections": [".toy_fatbin"],
        "architectures": "toy[0-9]{2}",
        "cmake_spellings": ["toy"],
        "toolkit": {
            "env": ["TOYGPU_HOME"],
            "prefixes": [f"{opt}/toygpu-*"],
            "marker": "include/toygpurt.h",
            "version_header": "include/toygpurt.h",
            "version_define": "TOYGPU_VERSION",
            "version_places": [1000, 10],
            "export_env": ["TOYGPU_ROOT"],
            "install": f"bash {install}",
        },
        "toolkit_name": "ToyGPU",
        "runtime_hint": "install the ToyGPU runtime that provides {soname} ({releases})",
        "runtime_sonames": {"3": [SONAME], "4": [SONAME]},
    }


# The install script the backend data names: `bash install-toygpu.sh VERSION` puts a toolkit (a
# header with the version macro, and the TEST STAND-IN runtime) under $OPT/toygpu-VERSION.
INSTALL_SCRIPT = """\
#!/bin/bash
# Installs the ToyGPU toolkit (a TEST STAND-IN for a GPU runtime): bash install-toygpu.sh VERSION
set -euo pipefail
version="${1:?usage: install-toygpu.sh VERSION (e.g. 3.1)}"
[[ "$version" =~ ^([0-9]+)\\.([0-9]+)$ ]] || { echo "install-toygpu.sh: bad version $version" >&2; exit 2; }
prefix="@OPT@/toygpu-$version"
mkdir -p "$prefix/include" "$prefix/lib"
number=$(( ${BASH_REMATCH[1]} * 1000 + ${BASH_REMATCH[2]} * 10 ))
cat > "$prefix/include/toygpurt.h" <<EOF
/* ToyGPU runtime API (TEST STAND-IN) */
#pragma once
#define TOYGPU_VERSION $number
#ifdef __cplusplus
extern "C" {
#endif
int toygpu_copy(void *dst, const void *src, unsigned long n);
const char *toygpu_name(void);
#ifdef __cplusplus
}
#endif
EOF
cat > "$prefix/toygpurt.c" <<EOF
#include <string.h>
#include "toygpurt.h"
int toygpu_copy(void *dst, const void *src, unsigned long n) { memcpy(dst, src, n); return 0; }
const char *toygpu_name(void) { return "toygpu $version (TEST STAND-IN)"; }
EOF
cc -shared -fPIC -O2 -Wl,-soname,@SONAME@ -I"$prefix/include" -o "$prefix/lib/@SONAME@" "$prefix/toygpurt.c"
ln -sf @SONAME@ "$prefix/lib/libtoygpurt.so"
echo "ToyGPU $version installed in $prefix"
"""

PYPROJECT = """\
[build-system]
requires = ["scikit-build-core>=0.10"]
build-backend = "scikit_build_core.build"

[project]
name = "toyxfer"
version = "0.0.1"
description = "A small engine for the backend conformance test"
requires-python = ">=3.10"

[project.scripts]
toyxfer-probe = "toyxfer.probe:main"

[tool.scikit-build]
wheel.packages = ["py/toyxfer"]
"""

CMAKE = """\
cmake_minimum_required(VERSION 3.18)
project(toyxfer LANGUAGES CXX)
set(TOYXFER_RUNTIME "none" CACHE STRING "The accelerator runtime: none or toygpu")
set_property(CACHE TOYXFER_RUNTIME PROPERTY STRINGS none toygpu)
set(TOYXFER_TRANSPORT "tcp" CACHE STRING "The transport: tcp or numa")
find_package(Python REQUIRED COMPONENTS Interpreter Development.Module)
Python_add_library(_toyxfer MODULE src/toyxfer.cpp WITH_SOABI)
if(TOYXFER_RUNTIME STREQUAL "toygpu")
  # The toolkit's location comes from the backend data's export_env (TOYGPU_ROOT).
  if(NOT DEFINED ENV{TOYGPU_ROOT})
    message(FATAL_ERROR "TOYGPU_ROOT is not set: the toolkit did not say where ToyGPU is")
  endif()
  target_include_directories(_toyxfer PRIVATE "$ENV{TOYGPU_ROOT}/include")
  target_link_libraries(_toyxfer PRIVATE "$ENV{TOYGPU_ROOT}/lib/libtoygpurt.so")
  target_compile_definitions(_toyxfer PRIVATE TOYXFER_WITH_TOYGPU=1)
endif()
if(TOYXFER_TRANSPORT STREQUAL "numa")
  target_link_libraries(_toyxfer PRIVATE numa)
  target_compile_definitions(_toyxfer PRIVATE TOYXFER_WITH_NUMA=1)
endif()
install(TARGETS _toyxfer LIBRARY DESTINATION toyxfer)
"""

ENGINE_CPP = """\
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string>
#include <vector>
#ifdef TOYXFER_WITH_TOYGPU
#include "toygpurt.h"
#endif
#ifdef TOYXFER_WITH_NUMA
#include <numa.h>
#endif

static PyObject *move(PyObject *, PyObject *args) {
    Py_buffer src;
    if (!PyArg_ParseTuple(args, "y*", &src)) return nullptr;
    std::vector<char> dst(static_cast<size_t>(src.len));
#ifdef TOYXFER_WITH_TOYGPU
    toygpu_copy(dst.data(), src.buf, static_cast<unsigned long>(src.len));
#else
    std::copy(static_cast<const char *>(src.buf), static_cast<const char *>(src.buf) + src.len, dst.begin());
#endif
    PyBuffer_Release(&src);
    return PyBytes_FromStringAndSize(dst.data(), static_cast<Py_ssize_t>(dst.size()));
}

static PyObject *describe(PyObject *, PyObject *) {
#ifdef TOYXFER_WITH_TOYGPU
    std::string runtime = toygpu_name();
#else
    std::string runtime = "none";
#endif
#ifdef TOYXFER_WITH_NUMA
    std::string transport = numa_available() < 0 ? "numa (no NUMA)" : "numa";
#else
    std::string transport = "tcp";
#endif
    return Py_BuildValue("(ss)", runtime.c_str(), transport.c_str());
}

static PyMethodDef methods[] = {
    {"move", move, METH_VARARGS, "Copy bytes through the runtime."},
    {"describe", describe, METH_NOARGS, "(runtime, transport) of this build."},
    {nullptr, nullptr, 0, nullptr},
};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_toyxfer", nullptr, -1, methods};
PyMODINIT_FUNC PyInit__toyxfer(void) { return PyModule_Create(&module); }
"""

INIT = '''\
"""toyxfer: one import package, shipped by toyxfer-cpu, toyxfer-toygpu and toyxfer-toygpu-numa."""

import ctypes
import importlib.metadata

_FAMILY = "toyxfer"
_RUNTIME = "libtoygpurt.so.2"  # TEST STAND-IN runtime soname


def _installed():
    names = importlib.metadata.packages_distributions().get("toyxfer", [])
    canonical = {n.lower().replace("_", "-") for n in names}
    return sorted(n for n in canonical if n.startswith(_FAMILY))


_variants = _installed()
if len(_variants) > 1:
    raise ImportError(f"toyxfer: {', '.join(_variants)} are installed together; keep one of them")
if _variants and not _variants[0].endswith("-cpu"):
    try:
        ctypes.CDLL(_RUNTIME)
    except OSError:
        raise ImportError(
            f"toyxfer ({_variants[0]}) needs the ToyGPU runtime {_RUNTIME}, which the loader cannot "
            f"find: make it visible (ldconfig or LD_LIBRARY_PATH) or install {_FAMILY}-cpu instead"
        ) from None

from toyxfer._toyxfer import describe, move  # noqa: E402

__all__ = ["describe", "move"]
'''

PROBE = """\
import json
import os

import toyxfer


def main():
    payload = os.urandom(1 << 16)
    runtime, transport = toyxfer.describe()
    ok = toyxfer.move(payload) == payload
    print(json.dumps({"ok": ok, "runtime": runtime, "transport": transport}))
    return 0 if ok else 1
"""

# The two GPU variants: written once (an anchor), the transport variant adds its switch (merge keys).
MATRIX = """\
schema_version: 1
engine:
  source: toyxfer-src
  import_name: toyxfer
  version: "0.0.1"
  scripts: [toyxfer-probe]
  smoke:
    commands:
      - [toyxfer-probe]
python: ["@PY@"]
platform:
  floor: @FLOOR@
  system_libraries: ["@NUMA@"]
x-toygpu: &toygpu
  backend: toygpu
  toolkit: "3.1"
  cmake_defines: &toygpu-defines {TOYXFER_RUNTIME: toygpu}
  images: [toygpu-prefix, toygpu-absent]
variants:
  cpu:
    distribution: toyxfer-cpu
    backend: cpu
  toygpu:
    <<: *toygpu
    distribution: toyxfer-toygpu
  toygpunuma:
    <<: *toygpu
    distribution: toyxfer-toygpu-numa
    cmake_defines: {<<: *toygpu-defines, TOYXFER_TRANSPORT: numa}
images:
  toygpu-prefix:
    description: "The ToyGPU runtime under a prefix, found through LD_LIBRARY_PATH only."
    simulate: {runtime: prefix, prefix: /opt/toygpu/lib, via: LD_LIBRARY_PATH}
  toygpu-absent:
    description: "No runtime: import must be refused with the engine's own message."
    simulate: {runtime: absent}
    expect: runtime-missing
"""


def write_project(root: Path) -> tuple[Path, Path]:
    """The engine, the backend data and its install script, and the matrix: (matrix, opt)."""
    opt = root / "opt"
    install = root / "packaging" / "install-toygpu.sh"
    install.parent.mkdir(parents=True)
    install.write_text(
        INSTALL_SCRIPT.replace("@OPT@", str(opt)).replace("@SONAME@", SONAME), encoding="utf-8"
    )
    backends = root / "packaging" / "backends"
    backends.mkdir()
    (backends / "toygpu.json").write_text(json.dumps(backend_data(opt, install), indent=2), encoding="utf-8")
    project = root / "toyxfer-src"
    files = {
        "pyproject.toml": PYPROJECT,
        "CMakeLists.txt": CMAKE,
        "src/toyxfer.cpp": ENGINE_CPP,
        "py/toyxfer/__init__.py": INIT,
        "py/toyxfer/probe.py": PROBE,
    }
    for name, text in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text, encoding="utf-8")
    matrix = root / "matrix.yaml"
    text = MATRIX.replace("@PY@", PY).replace("@FLOOR@", FLOOR).replace("@NUMA@", NUMA)
    matrix.write_text(text, encoding="utf-8")
    return matrix, opt


def needed_of(wheel: Path) -> list[str]:
    """DT_NEEDED of the wheel's extension, read with pyelftools."""
    with zipfile.ZipFile(wheel) as zf:
        member = next(n for n in zf.namelist() if n.startswith("toyxfer/_toyxfer."))
        elf = ELFFile(io.BytesIO(zf.read(member)))
    dynamic = next(s for s in elf.iter_sections() if isinstance(s, DynamicSection))
    return [t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"]


def rules_of(report: dict[str, object]) -> dict[str, dict[str, str]]:
    rules = report["rules"]
    assert isinstance(rules, list)
    return {r["id"]: r for r in rules}


@needs_tools
@needs_numa
@needs_root
@pytest.mark.slow
def test_a_backend_and_a_transport_variant_from_data_alone(tmp_path: Path) -> None:
    matrix, opt = write_project(tmp_path)
    wheelhouse = tmp_path / "wheelhouse"
    args = ("--matrix", str(matrix))
    status = ["git", "status", "--porcelain", "release"]
    before = subprocess.run(status, cwd=ROOT, capture_output=True, text=True, check=True)

    # plan: the backend beside the matrix is known; the anchored variants expand like written ones
    plan = toolkit(*args, "plan")
    for variant in ("cpu", "toygpu", "toygpunuma"):
        row = rf"^{TAG}-{variant}-manylinux_x86_64 .* (cpu|toygpu) "
        assert re.search(row, plan.stdout, re.M), plan.stdout

    # build without the toolkit: one line naming the backend's own install script and version
    missing = toolkit(*args, "build", "--variant", "toygpu", "--wheelhouse", str(wheelhouse), check=False)
    assert missing.returncode == 4, missing.stdout + missing.stderr
    line = missing.stderr.strip().splitlines()[-1]
    assert "ToyGPU (TEST STAND-IN) toolkit not found" in line, missing.stderr
    command = re.search(r"`(bash [^`]*install-toygpu\.sh)`", line)
    assert command is not None, line

    # the install script the data names installs it; the probe reads its version by the data's encoding
    subprocess.run([*shlex.split(command.group(1)), "3.1"], check=True, capture_output=True)
    check = toolkit(*args, "toolchain", "check", check=False)
    assert re.search(rf"toygpu.*3\.1.*{re.escape(str(opt))}/toygpu-3\.1", check.stdout), check.stdout

    # build: compile (TOYGPU_ROOT from the data's export_env), repair with the data's excludes, verify
    for variant in ("cpu", "toygpu", "toygpunuma"):
        built = toolkit(*args, "build", "--variant", variant, "--wheelhouse", str(wheelhouse))
        assert "verify pass" in built.stdout, built.stdout
    wheels = {v: sorted((wheelhouse / v).glob("*.whl")) for v in ("cpu", "toygpu", "toygpunuma")}
    names = {v: [w.name for w in ws] for v, ws in wheels.items()}
    assert names == {
        "cpu": [f"toyxfer_cpu-0.0.1-{TAG}-{TAG}-{FLOOR}.whl"],
        "toygpu": [f"toyxfer_toygpu-0.0.1-{TAG}-{TAG}-{FLOOR}.whl"],
        "toygpunuma": [f"toyxfer_toygpu_numa-0.0.1-{TAG}-{TAG}-{FLOOR}.whl"],
    }
    toy, numa_toy, cpu = wheels["toygpu"][0], wheels["toygpunuma"][0], wheels["cpu"][0]

    # repair: the runtime stays NEEDED and is not in the wheel; the transport's system library too
    assert SONAME in needed_of(toy) and NUMA not in needed_of(toy)
    assert SONAME in needed_of(numa_toy) and NUMA in needed_of(numa_toy)
    assert not any(n.startswith("libtoygpurt") for n in needed_of(cpu))
    for wheel in (toy, numa_toy):
        with zipfile.ZipFile(wheel) as zf:
            assert not [n for n in zf.namelist() if "libtoygpurt" in n or "libnuma" in n], zf.namelist()

    # verify: the backend's runtime rules, from its data: bound (runtime-abi: ToyGPU 3.1 binds .so.2)
    verify = toolkit(*args, "verify", "--json", "--release", "--write-reports", str(wheelhouse))
    reports = {r["wheel"]: r for r in json.loads(verify.stdout)}
    for wheel in (toy, numa_toy, cpu):
        assert reports[wheel.name]["ok"] and reports[wheel.name]["releasable"], reports[wheel.name]["rules"]
    for wheel in (toy, numa_toy):
        rules = rules_of(reports[wheel.name])
        assert rules["runtime-abi"]["status"] == "pass", rules["runtime-abi"]
        assert SONAME in rules["runtime-abi"]["message"]
        assert rules["missing-runtime-needed"]["status"] == "pass"
        assert "libtoygpurt.so" in rules["missing-runtime-needed"]["message"]
        assert rules["vendored-runtime"]["status"] == "pass"
        assert rules["external-dependency"]["status"] == "pass"
        assert SONAME in reports[wheel.name]["runtime_bound"]

    # without the data's excludes, auditwheel vendors the runtime, and verify's rule says so
    raw = sorted((tmp_path / "build" / "toygpu" / "dist").rglob("*.whl"))
    assert raw, "the unrepaired wheel of the build is kept under build/toygpu/dist"
    code = (
        "import sys; from pathlib import Path; from release.builder import repair;"
        f"r = repair.repair_wheel(Path({str(raw[0])!r}), floor={FLOOR!r}, "
        f"dest_dir=Path({str(tmp_path / 'vendored')!r}), excludes=());"
        "print(r.wheel)"
    )
    env = {**os.environ, "LD_LIBRARY_PATH": str(opt / "toygpu-3.1" / "lib")}
    argv = [sys.executable, "-c", code]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, check=True)
    vendored = Path(proc.stdout.strip().splitlines()[-1])
    bad = toolkit(*args, "verify", "--json", "--variant", "toygpu", str(vendored), check=False)
    assert bad.returncode == 6, bad.stdout + bad.stderr
    report = json.loads(bad.stdout)
    rules = rules_of(report[0] if isinstance(report, list) else report)
    assert rules["vendored-runtime"]["status"] == "fail"
    assert "libtoygpurt" in rules["vendored-runtime"]["message"]

    # smoke: the runtime under a prefix (found through LD_LIBRARY_PATH), and absent (import refused)
    smoke = toolkit(
        *args, "smoke", "--json", "--wheelhouse", str(wheelhouse),
        "--variant", "toygpu", "--variant", "toygpunuma",
        "--image", "toygpu-prefix", "--image", "toygpu-absent",
        env={"TOYGPU_HOME": str(opt / "toygpu-3.1")}, timeout=900,
    )  # fmt: skip
    results = json.loads(smoke.stdout)["results"]
    seen = {(r["variant"], r["image"]): r for r in results}
    assert set(seen) == {
        (v, i) for v in ("toygpu", "toygpunuma") for i in ("toygpu-prefix", "toygpu-absent")
    }, seen  # fmt: skip
    assert all(r["ok"] for r in results), results
    for variant in ("toygpu", "toygpunuma"):
        steps = {s["name"]: s for s in seen[(variant, "toygpu-prefix")]["steps"]}
        assert steps["runtime location"]["detail"] == f"/opt/toygpu/lib/{SONAME}", steps
        assert steps["toyxfer-probe"]["detail"] == "ok: true", steps
        absent = seen[(variant, "toygpu-absent")]["steps"]
        refused = next(s for s in absent if s["name"] == "import toyxfer refused")
        assert SONAME in refused["detail"] and "toyxfer-cpu" in refused["detail"], refused

    # and nothing under release/ changed
    after = subprocess.run(status, cwd=ROOT, capture_output=True, text=True, check=True)
    assert after.stdout == before.stdout
