"""Any engine by editing matrix.yaml only: two engines shaped unlike the reference one.

Each test writes a small C++ extension project into tmp_path, a matrix file for it and (for the
first) a backend data file beside it, then drives `python -m release` with NO change to
`release/`. What the toolkit could silently assume about the reference engine differs here on
purpose:

- `kvmove` (setuptools): import `kvmove`, distributions `kvmove-standin` / `kvmove-standin-cpu`,
  a `setup.py` build through `setuptools.build_meta`, plain CPython API (no pybind11), no core
  prebuild, a `[project.scripts]` console script, a runtime library linked by the extension and
  excluded by the matrix (a TEST STAND-IN built here: `libstandinrt.so.2`, taught to the toolkit as
  `packaging/backends/standin.json`), and a real system library outside the manylinux policy
  (`libnuma.so.1`, declared in `platform.system_libraries`). Build, verify, smoke (simulated
  images included), publish to a loopback pypiserver and install from it.
- `ringbuf` (scikit-build-core, CMake) without a prebuild step, built twice with ccache on: the
  second build is served from the cache.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from release.machine.interpreters import find_interpreter
from release.smoke.image import distribution_libdir

from .conftest import ROOT, fresh_venv, toolkit
from .publish_support import PASSWORD, USER, IndexServer, index_server

pytestmark = pytest.mark.integration
__all__ = ["index_server"]  # the fixture, imported so pytest sees it

PY = "3.12" if find_interpreter("3.12") else f"{sys.version_info[0]}.{sys.version_info[1]}"
TAG = "v0.3.1"
VERSION = "0.3.1"
HOST_FLOOR = "manylinux_2_34_x86_64"
STANDIN_SONAME = "libstandinrt.so.2"  # TEST STAND-IN for a GPU runtime's soname (like libamdhip64.so.5)
NUMA = "libnuma.so.1"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="simulated images need root (mount namespaces)")
needs_numa = pytest.mark.skipif(
    not Path("/usr/include/numa.h").exists(), reason="libnuma-dev is not installed (apt install libnuma-dev)"
)
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")


# --- the TEST STAND-IN runtime ---------------------------------------------------------------------

STANDIN_HEADER = """\
/* TEST STAND-IN runtime API: plays the part of a GPU runtime (libamdhip64, libcudart) in tests. */
#pragma once
#ifdef __cplusplus
extern "C" {
#endif
int standin_copy(void *dst, const void *src, unsigned long n);
const char *standin_runtime_name(void);
#ifdef __cplusplus
}
#endif
"""

STANDIN_SOURCE = """\
/* TEST STAND-IN: not a real runtime. A shared library with a runtime-like soname that the
   extension links and the matrix excludes, so the toolkit must bind it, never vendor it. */
#include <string.h>
#include "standinrt.h"
int standin_copy(void *dst, const void *src, unsigned long n) { memcpy(dst, src, n); return 0; }
const char *standin_runtime_name(void) { return "standinrt 2 (TEST STAND-IN)"; }
"""

STANDIN_BACKEND = {
    "schema_version": 1,
    "name": "standin",
    "title": "Stand-in runtime (TEST STAND-IN)",
    "runtime_libraries": ["libstandinrt.so*"],
    "exclude": ["libstandinrt.so*"],
    "requires_runtime_needed": ["libstandinrt.so"],
    "device_code_sections": [],
    "toolkit": None,
    "runtime_hint": "put the TEST STAND-IN runtime libstandinrt.so.2 where the loader finds it",
}


def build_standin_runtime(root: Path) -> Path:
    """Compile the TEST STAND-IN runtime into root/{include,lib}; return root."""
    (root / "include").mkdir(parents=True)
    (root / "lib").mkdir()
    (root / "include" / "standinrt.h").write_text(STANDIN_HEADER, encoding="utf-8")
    source = root / "standinrt_TEST_STANDIN.c"
    source.write_text(STANDIN_SOURCE, encoding="utf-8")
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-O2", f"-Wl,-soname,{STANDIN_SONAME}", f"-I{root / 'include'}",
         "-o", str(root / "lib" / STANDIN_SONAME), str(source)],
        check=True,
    )  # fmt: skip
    (root / "lib" / "libstandinrt.so").symlink_to(STANDIN_SONAME)
    return root


# --- engine 1: kvmove, a setuptools project ------------------------------------------------------

KVMOVE_PYPROJECT = """\
[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "kvmove"
version = "0.0.1"
description = "A second engine shape for the release toolkit's tests"
readme = "README.md"
requires-python = ">=3.10"
license = {text = "Apache-2.0"}

[project.scripts]
kvmove-probe = "kvmove.cli:main"

[tool.setuptools]
packages = ["kvmove"]
"""

KVMOVE_SETUP = """\
import os

from setuptools import Extension, setup

# The variant's `env` in the matrix picks the runtime: nothing else tells this build about variants.
runtime = os.environ.get("KVMOVE_RUNTIME", "none")
libraries, library_dirs, include_dirs, macros = ["numa"], [], [], []
if runtime == "standin":
    root = os.environ["KVMOVE_STANDIN_ROOT"]
    libraries.append("standinrt")
    library_dirs.append(os.path.join(root, "lib"))
    include_dirs.append(os.path.join(root, "include"))
    macros.append(("KVMOVE_WITH_STANDIN", "1"))

setup(
    ext_modules=[
        Extension(
            "kvmove._kvmove",
            ["src/kvmove.cpp"],
            language="c++",
            libraries=libraries,
            library_dirs=library_dirs,
            include_dirs=include_dirs,
            define_macros=macros,
            extra_compile_args=["-std=c++17"],
        )
    ]
)
"""

KVMOVE_CPP = """\
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <numa.h>
#include <string>
#include <vector>
#ifdef KVMOVE_WITH_STANDIN
#include "standinrt.h"
#endif

static PyObject *move(PyObject *, PyObject *args) {
    Py_buffer src;
    if (!PyArg_ParseTuple(args, "y*", &src)) return nullptr;
    std::vector<char> dst(static_cast<size_t>(src.len));
#ifdef KVMOVE_WITH_STANDIN
    standin_copy(dst.data(), src.buf, static_cast<unsigned long>(src.len));
#else
    std::copy(static_cast<const char *>(src.buf), static_cast<const char *>(src.buf) + src.len, dst.begin());
#endif
    PyBuffer_Release(&src);
    return PyBytes_FromStringAndSize(dst.data(), static_cast<Py_ssize_t>(dst.size()));
}

static PyObject *runtime(PyObject *, PyObject *) {
#ifdef KVMOVE_WITH_STANDIN
    std::string name = standin_runtime_name();
#else
    std::string name = "none";
#endif
    return PyUnicode_FromString(name.c_str());
}

static PyObject *numa_nodes(PyObject *, PyObject *) {
    return PyLong_FromLong(numa_available() < 0 ? 1 : numa_max_node() + 1);
}

static PyMethodDef methods[] = {
    {"move", move, METH_VARARGS, "Copy bytes through the runtime."},
    {"runtime", runtime, METH_NOARGS, "The runtime this build binds."},
    {"numa_nodes", numa_nodes, METH_NOARGS, "NUMA nodes (libnuma)."},
    {nullptr, nullptr, 0, nullptr},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kvmove", nullptr, -1, methods};

PyMODINIT_FUNC PyInit__kvmove(void) { return PyModule_Create(&module); }
"""

KVMOVE_INIT = '''\
"""kvmove: one import package, shipped by kvmove-standin and kvmove-standin-cpu."""

import ctypes
import importlib.metadata

_FAMILY = "kvmove-standin"
_RUNTIME = "libstandinrt.so.2"  # TEST STAND-IN runtime soname


def _installed():
    names = importlib.metadata.packages_distributions().get("kvmove", [])
    canonical = {n.lower().replace("_", "-") for n in names}
    return sorted(n for n in canonical if n.startswith(_FAMILY))


_variants = _installed()
if len(_variants) > 1:
    raise ImportError(f"kvmove: {', '.join(_variants)} are installed together; keep one of them")
if _variants and not _variants[0].endswith("-cpu"):
    try:
        ctypes.CDLL(_RUNTIME)
    except OSError:
        raise ImportError(
            f"kvmove ({_variants[0]}) needs the stand-in runtime {_RUNTIME}, which the loader cannot "
            f"find: make it visible (ldconfig or LD_LIBRARY_PATH) or install {_FAMILY}-cpu instead"
        ) from None

from kvmove._kvmove import move, numa_nodes, runtime  # noqa: E402

__all__ = ["move", "numa_nodes", "runtime"]
'''

KVMOVE_CLI = """\
import argparse
import json
import os

import kvmove


def main():
    parser = argparse.ArgumentParser(prog="kvmove-probe")
    parser.add_argument("--version", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.version:
        print("kvmove-probe 0.3.1")
        return 0
    payload = os.urandom(1 << 16)
    moved = kvmove.move(payload)
    print(json.dumps({"ok": moved == payload, "runtime": kvmove.runtime(), "bytes": len(moved),
                      "numa_nodes": kvmove.numa_nodes()}))
    return 0 if moved == payload else 1
"""


def write_kvmove(root: Path) -> Path:
    project = root / "kvmove-src"
    (project / "src").mkdir(parents=True)
    (project / "kvmove").mkdir()
    files = {
        "pyproject.toml": KVMOVE_PYPROJECT,
        "setup.py": KVMOVE_SETUP,
        "README.md": "# kvmove\n\nA second engine shape for the release toolkit's tests.\n",
        "src/kvmove.cpp": KVMOVE_CPP,
        "kvmove/__init__.py": KVMOVE_INIT,
        "kvmove/cli.py": KVMOVE_CLI,
    }
    for name, text in files.items():
        (project / name).write_text(text, encoding="utf-8")
    return project


def kvmove_matrix(root: Path, standin: Path) -> Path:
    """The kvmove matrix, and the backend data beside it that teaches the toolkit the stand-in."""
    backends = root / "packaging" / "backends"
    backends.mkdir(parents=True)
    for real in (ROOT / "packaging" / "backends").glob("*.json"):
        shutil.copy(real, backends / real.name)
    (backends / "standin.json").write_text(json.dumps(STANDIN_BACKEND, indent=2), encoding="utf-8")
    text = f"""\
        # yaml-language-server: $schema={ROOT / "release" / "config" / "matrix.schema.json"}
        schema_version: 1
        engine:
          source: kvmove-src
          import_name: kvmove
          version: "0.0.1"
          scripts: [kvmove-probe]
          smoke:
            commands:
              - [kvmove-probe, --version]
              - [kvmove-probe, --json]
        python: ["{PY}"]
        platform:
          floor: {HOST_FLOOR}
          system_libraries: ["{NUMA}"]
        variants:
          cpu:
            distribution: kvmove-standin-cpu
            backend: cpu
            env: {{KVMOVE_RUNTIME: none}}
          standin:
            distribution: kvmove-standin
            backend: standin
            env: {{KVMOVE_RUNTIME: standin, KVMOVE_STANDIN_ROOT: "{standin}"}}
            exclude: ["libstandinrt.so*"]
            runtime_needed: ["libstandinrt.so"]
            images: [standin-ld-library-path, standin-absent]
        images:
          standin-ld-library-path:
            description: "The stand-in runtime under a prefix, found through LD_LIBRARY_PATH only."
            simulate: {{runtime: prefix, prefix: /opt/standinrt/lib, via: LD_LIBRARY_PATH}}
          standin-absent:
            description: "No runtime: import must be refused with the engine's own message."
            simulate: {{runtime: absent}}
            expect: runtime-missing
        publish:
          tag_pattern: "v*"
          repository: "http://127.0.0.1:9/"
          prerelease: skip
          github_release: false
        """
    path = root / "matrix.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def with_runtime_in_libdir(runtime_lib: Path, argv: list[str], stage: Path) -> list[str]:
    """`argv` run in a private mount namespace whose distribution library directory also holds the
    TEST STAND-IN runtime (an overlay: the host's directory is never touched). That is where
    `release smoke` looks for a variant's runtime on the host, as it does for Debian's HIP."""
    libdir = distribution_libdir()
    stage.mkdir(parents=True, exist_ok=True)
    script = stage.with_suffix(".sh")
    script.write_text(
        textwrap.dedent(f"""\
            set -eu
            mount -t tmpfs standin-stage '{stage}'
            mkdir '{stage}/up' '{stage}/work'
            cp -a '{runtime_lib}' '{stage}/up/'
            mount -t overlay standin-libdir -o 'lowerdir={libdir},upperdir={stage}/up,workdir={stage}/work' \\
              '{libdir}'
            exec "$@"
            """),
        encoding="utf-8",
    )
    return ["unshare", "--mount", "--propagation", "private", "/bin/sh", str(script), *argv]


def needed_of(wheel: Path, member_suffix: str) -> tuple[str, list[str]]:
    """(member name, DT_NEEDED) of the one ELF member ending with `member_suffix`, read with pyelftools."""
    with zipfile.ZipFile(wheel) as zf:
        member = next(n for n in zf.namelist() if n.endswith(member_suffix) or member_suffix in n)
        data = zf.read(member)
    elf = ELFFile(io.BytesIO(data))
    dynamic = next(s for s in elf.iter_sections() if isinstance(s, DynamicSection))
    return member, [t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"]


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "LD_LIBRARY_PATH"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


@needs_root
@needs_numa
@needs_cc
@pytest.mark.slow
def test_setuptools_engine_with_excluded_runtime_and_system_library(
    tmp_path: Path, index_server: IndexServer
) -> None:
    standin = build_standin_runtime(tmp_path / "standin-runtime")
    write_kvmove(tmp_path)
    matrix = kvmove_matrix(tmp_path, standin)
    wheelhouse = tmp_path / "wheelhouse"
    tag = "cp" + PY.replace(".", "")

    # build: both variants, through setup.py, with the version of the tag
    for variant in ("cpu", "standin"):
        built = toolkit(
            "--matrix",
            str(matrix),
            "build",
            "--variant",
            variant,
            "--tag",
            TAG,
            "--wheelhouse",
            str(wheelhouse),
        )
        assert "verify pass" in built.stdout, built.stdout
    wheels = {v: sorted((wheelhouse / v).glob("*.whl")) for v in ("cpu", "standin")}
    assert [w.name for w in wheels["cpu"]] == [f"kvmove_standin_cpu-{VERSION}-{tag}-{tag}-{HOST_FLOOR}.whl"]
    assert [w.name for w in wheels["standin"]] == [f"kvmove_standin-{VERSION}-{tag}-{tag}-{HOST_FLOOR}.whl"]
    standin_wheel, cpu_wheel = wheels["standin"][0], wheels["cpu"][0]

    # the runtime is bound (NEEDED), not vendored; the system library too; the console script ships
    member, needed = needed_of(standin_wheel, "kvmove/_kvmove.")
    assert STANDIN_SONAME in needed, (member, needed)
    assert NUMA in needed, (member, needed)
    _, cpu_needed = needed_of(cpu_wheel, "kvmove/_kvmove.")
    assert NUMA in cpu_needed
    assert not any(n.startswith("libstandinrt") for n in cpu_needed)
    for wheel in (standin_wheel, cpu_wheel):
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
            entry_points = zf.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt")))
        assert not [n for n in names if "libstandinrt" in n or "libnuma" in n], names
        assert b"kvmove-probe = kvmove.cli:main" in entry_points

    # verify: every rule passes in release mode; the system library is declared, the runtime bound
    verify = toolkit(
        "--matrix", str(matrix), "verify", "--json", "--release", "--write-reports", str(wheelhouse)
    )
    reports = {r["wheel"]: r for r in json.loads(verify.stdout)}
    for wheel in (standin_wheel, cpu_wheel):
        report = reports[wheel.name]
        assert report["ok"] and report["releasable"], report["rules"]
        rules = {r["id"]: r for r in report["rules"]}
        assert rules["external-dependency"]["status"] == "pass", rules["external-dependency"]
        assert rules["vendored-runtime"]["status"] == "pass"
        assert rules["variant-conflict"]["status"] == "pass"  # kvmove/__init__.py checks the metadata
    standin_rules = {r["id"]: r for r in reports[standin_wheel.name]["rules"]}
    assert standin_rules["missing-runtime-needed"]["status"] == "pass"
    assert "libstandinrt.so" in standin_rules["missing-runtime-needed"]["message"]
    assert reports[standin_wheel.name]["variant"] == "standin"

    # smoke: fresh venvs on the host (runtime in the distribution's directory), under a prefix
    # found through LD_LIBRARY_PATH, and absent (import refused with the engine's own message)
    argv = [sys.executable, "-m", "release", "--matrix", str(matrix), "smoke", "--json",
            "--wheelhouse", str(wheelhouse)]  # fmt: skip
    smoke = subprocess.run(
        with_runtime_in_libdir(standin / "lib" / STANDIN_SONAME, argv, tmp_path / "ns"),
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=900, check=False,
    )  # fmt: skip
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    results = json.loads(smoke.stdout)["results"]
    seen = {(r["variant"], r["image"]): r for r in results}
    assert set(seen) == {
        ("cpu", "host"),
        ("standin", "host"),
        ("standin", "standin-ld-library-path"),
        ("standin", "standin-absent"),
    }
    assert all(r["ok"] for r in results), results
    host_steps = {s["name"]: s for s in seen[("standin", "host")]["steps"]}
    assert host_steps["runtime location"]["detail"] == str(distribution_libdir() / STANDIN_SONAME)
    assert host_steps["kvmove-probe --json"]["detail"] == "ok: true"
    prefix_steps = {s["name"]: s for s in seen[("standin", "standin-ld-library-path")]["steps"]}
    assert prefix_steps["runtime location"]["detail"] == f"/opt/standinrt/lib/{STANDIN_SONAME}"
    refused = next(
        s for s in seen[("standin", "standin-absent")]["steps"] if s["name"] == "import kvmove refused"
    )
    assert "libstandinrt.so.2" in refused["detail"] and "kvmove-standin-cpu" in refused["detail"]

    # publish to the loopback index, then install from it into a fresh venv and use it
    publish = toolkit(
        "--matrix", str(matrix), "publish", "--tag", TAG, "--repository", index_server.url,
        "--wheelhouse", str(wheelhouse),
        env={"TWINE_USERNAME": USER, "TWINE_PASSWORD": PASSWORD}, timeout=300,
    )  # fmt: skip
    assert sorted(index_server.files()) == sorted([standin_wheel.name, cpu_wheel.name]), publish.stdout
    env = clean_env()
    venv = tmp_path / "venv-from-index"
    interpreter = find_interpreter(PY)
    assert interpreter is not None
    fresh_venv(interpreter, venv)
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-cache-dir",
         "--disable-pip-version-check", "--index-url", index_server.simple, f"kvmove-standin=={VERSION}"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    probe = venv / "bin" / "kvmove-probe"
    without = subprocess.run([str(probe), "--json"], capture_output=True, text=True, env=env, check=False)
    assert without.returncode != 0
    assert "needs the stand-in runtime libstandinrt.so.2" in without.stderr, without.stderr
    with_runtime = subprocess.run(
        [str(probe), "--json"], capture_output=True, text=True, check=False,
        env={**env, "LD_LIBRARY_PATH": str(standin / "lib")},
    )  # fmt: skip
    assert with_runtime.returncode == 0, with_runtime.stderr
    result = json.loads(with_runtime.stdout)
    assert result["ok"] is True and "TEST STAND-IN" in result["runtime"], result


# --- engine 2: ringbuf, scikit-build-core without a prebuild, ccache on -------------------------

RINGBUF_PYPROJECT = """\
[build-system]
requires = ["scikit-build-core>=0.10"]
build-backend = "scikit_build_core.build"

[project]
name = "ringbuf-engine"
version = "0.0.1"
description = "A CMake engine without a core prebuild, for the release toolkit's tests"
requires-python = ">=3.10"

[project.scripts]
ringbuf-info = "ringbuf.info:main"

[tool.scikit-build]
wheel.packages = ["py/ringbuf"]
"""

RINGBUF_CMAKE = """\
cmake_minimum_required(VERSION 3.18)
project(ringbuf LANGUAGES CXX)
set(RINGBUF_FLAVOR "none" CACHE STRING "Set by the matrix's cmake_defines")
if(NOT RINGBUF_FLAVOR STREQUAL "plain")
  message(FATAL_ERROR "RINGBUF_FLAVOR must come from the matrix (got '${RINGBUF_FLAVOR}')")
endif()
find_package(Python REQUIRED COMPONENTS Interpreter Development.Module)
Python_add_library(_ringbuf MODULE src/ringbuf.cpp WITH_SOABI)
target_compile_definitions(_ringbuf PRIVATE RINGBUF_FLAVOR="${RINGBUF_FLAVOR}")
install(TARGETS _ringbuf LIBRARY DESTINATION ringbuf)
"""

RINGBUF_CPP = """\
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string>

static PyObject *flavor(PyObject *, PyObject *) {
    return PyUnicode_FromString(std::string(RINGBUF_FLAVOR).c_str());
}

static PyMethodDef methods[] = {
    {"flavor", flavor, METH_NOARGS, "Build flavor."},
    {nullptr, nullptr, 0, nullptr},
};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ringbuf", nullptr, -1, methods};
PyMODINIT_FUNC PyInit__ringbuf(void) { return PyModule_Create(&module); }
"""

RINGBUF_INFO = """\
import json

from ringbuf._ringbuf import flavor


def main():
    print(json.dumps({"ok": flavor() == "plain", "flavor": flavor()}))
"""


def write_ringbuf(root: Path) -> Path:
    project = root / "ringbuf-src"
    (project / "src").mkdir(parents=True)
    (project / "py" / "ringbuf").mkdir(parents=True)
    files = {
        "pyproject.toml": RINGBUF_PYPROJECT,
        "CMakeLists.txt": RINGBUF_CMAKE,
        "src/ringbuf.cpp": RINGBUF_CPP,
        "py/ringbuf/__init__.py": '"""ringbuf: one variant, so no guard is needed."""\n',
        "py/ringbuf/info.py": RINGBUF_INFO,
    }
    for name, text in files.items():
        (project / name).write_text(text, encoding="utf-8")
    (root / "matrix.yaml").write_text(
        textwrap.dedent(f"""\
            schema_version: 1
            engine:
              source: ringbuf-src
              import_name: ringbuf
              version: "0.0.1"
              scripts: [ringbuf-info]
              smoke:
                commands:
                  - [ringbuf-info]
            python: ["{PY}"]
            platform:
              floor: {HOST_FLOOR}
            variants:
              cpu:
                distribution: ringbuf-engine-cpu
                backend: cpu
                cmake_defines: {{RINGBUF_FLAVOR: plain}}
            """),
        encoding="utf-8",
    )
    return root / "matrix.yaml"


def ccache_stats(env: dict[str, str]) -> dict[str, int]:
    out = subprocess.run(
        ["ccache", "--print-stats"], capture_output=True, text=True, env=env, check=True
    ).stdout
    stats: dict[str, int] = {}
    for line in out.splitlines():
        key, _, value = line.partition("\t")
        if value.strip().isdigit():
            stats[key] = int(value)
    return stats


@needs_cc
@pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is not installed (apt install ccache)")
@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
@pytest.mark.slow
def test_scikit_build_engine_without_prebuild_uses_ccache(tmp_path: Path) -> None:
    matrix = write_ringbuf(tmp_path)
    wheelhouse = tmp_path / "wheelhouse"
    cache = tmp_path / "ccache"
    env = {"CCACHE_DIR": str(cache)}
    stats_env = {**os.environ, **env}
    subprocess.run(["ccache", "--zero-stats"], env=stats_env, check=True, capture_output=True)
    args = ("--matrix", str(matrix), "build", "--variant", "cpu", "--wheelhouse", str(wheelhouse))

    first = toolkit(*args, env=env)
    assert "core:" not in first.stdout  # no prebuild declared, none run
    tag = "cp" + PY.replace(".", "")
    wheels = sorted((wheelhouse / "cpu").glob("*.whl"))
    assert [w.name for w in wheels] == [f"ringbuf_engine_cpu-0.0.1-{tag}-{tag}-{HOST_FLOOR}.whl"]
    after_first = ccache_stats(stats_env)
    assert any(cache.rglob("*")), "ccache wrote nothing: the compiler launcher was not used"
    misses = after_first.get("cache_miss", 0) + after_first.get("direct_cache_miss", 0)
    assert misses >= 1, after_first

    # A clean build tree (a fresh CI runner with its ccache restored) compiles again: from the cache.
    shutil.rmtree(tmp_path / "build" / "cpu")
    second = toolkit(*args, env=env)
    assert "verify pass" in second.stdout
    after_second = ccache_stats(stats_env)
    hits = sum(after_second.get(k, 0) for k in ("direct_cache_hit", "preprocessed_cache_hit"))
    assert hits >= 1, after_second

    verify = toolkit("--matrix", str(matrix), "verify", "--json", "--release", str(wheels[0]))
    assert json.loads(verify.stdout)["ok"] is True
    if os.geteuid() == 0:
        smoke = toolkit(
            "--matrix", str(matrix), "smoke", "--json", "--wheelhouse", str(wheelhouse), timeout=600
        )
        results = json.loads(smoke.stdout)["results"]
        assert [r["image"] for r in results] == ["host"] and results[0]["ok"], results
