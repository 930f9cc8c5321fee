"""The stable ABI end to end: one abi3 wheel serves every Python from the floor on.

`limapi` is a small engine written for this test: a C extension for the limited API (scikit-build-
core, CMake; `Py_LIMITED_API` set from `SKBUILD_SABI_VERSION`, so the same project builds a
per-Python wheel below the floor) over a core that does not include Python.h. Its matrix says
`stable_abi: "3.12"` for Pythons 3.11, 3.12 and 3.13: `release build` gives a cp311 wheel and one
cp312-abi3 wheel, `release verify --release` passes them (stable-abi audited by abi3audit), `release
smoke` installs the abi3 wheel into fresh 3.12 and 3.13 venvs, and `release publish` uploads to a
loopback pypiserver from which a fresh 3.13 venv installs it. A second build with nothing changed
is a no-op; the build summary's ccache column shows the second Python reusing the core's object.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import textwrap
import zipfile
from pathlib import Path

import pytest

from release.machine.interpreters import find_interpreter

from .conftest import fresh_venv, toolkit
from .publish_support import PASSWORD, USER, IndexServer, index_server

pytestmark = pytest.mark.integration
__all__ = ["index_server"]  # the fixture, imported so pytest sees it

PYTHONS = ("3.11", "3.12", "3.13")
VERSION = "0.0.1"
TAG = f"v{VERSION}"
FLOOR = "manylinux_2_34_x86_64"

if missing := [p for p in PYTHONS if find_interpreter(p) is None]:
    pytest.skip(f"CPython {', '.join(missing)} not found here", allow_module_level=True)
for tool in ("cc", "cmake", "ccache"):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed", allow_module_level=True)

PYPROJECT = """\
[build-system]
requires = ["scikit-build-core>=0.10"]
build-backend = "scikit_build_core.build"

[project]
name = "limapi-engine"
version = "0.0.1"
description = "A limited-API C engine for the release toolkit's stable ABI test"
readme = "README.md"
requires-python = ">=3.11"

[project.scripts]
limapi-info = "limapi.info:main"

[tool.scikit-build]
wheel.packages = ["py/limapi"]
"""

CMAKE = """\
cmake_minimum_required(VERSION 3.18)
project(limapi LANGUAGES C)
find_package(Python REQUIRED COMPONENTS Interpreter Development.Module)
# The core knows nothing of Python: its object is the same for every Python (ccache reuses it).
add_library(limcore STATIC src/core.c)
set_target_properties(limcore PROPERTIES POSITION_INDEPENDENT_CODE ON)
if(SKBUILD_SABI_VERSION)
  string(REPLACE "." ";" sabi "${SKBUILD_SABI_VERSION}")
  list(GET sabi 0 sabi_major)
  list(GET sabi 1 sabi_minor)
  math(EXPR limited "(${sabi_major} << 24) | (${sabi_minor} << 16)" OUTPUT_FORMAT HEXADECIMAL)
  Python_add_library(_limapi MODULE src/module.c)
  target_compile_definitions(_limapi PRIVATE Py_LIMITED_API=${limited})
  set_target_properties(_limapi PROPERTIES SUFFIX ".abi3.so")
else()
  Python_add_library(_limapi MODULE src/module.c WITH_SOABI)
endif()
target_link_libraries(_limapi PRIVATE limcore)
install(TARGETS _limapi LIBRARY DESTINATION limapi)
"""

CORE = """\
/* A Fletcher-32 checksum: the engine's "core", free of Python. */
unsigned long limcore_checksum(const unsigned char *data, long n) {
    unsigned long a = 0xffff, b = 0xffff;
    for (long i = 0; i < n; i++) {
        a = (a + data[i]) % 65535;
        b = (b + a) % 65535;
    }
    return (b << 16) | a;
}
"""

MODULE = """\
#define PY_SSIZE_T_CLEAN
#include <Python.h>

unsigned long limcore_checksum(const unsigned char *data, long n);

static PyObject *checksum(PyObject *self, PyObject *arg) {
    char *data;
    Py_ssize_t size;
    if (PyBytes_AsStringAndSize(arg, &data, &size) < 0) return NULL;
    return PyLong_FromUnsignedLong(limcore_checksum((const unsigned char *)data, (long)size));
}

static PyObject *limited_api(PyObject *self, PyObject *unused) {
#ifdef Py_LIMITED_API
    return PyLong_FromLong(Py_LIMITED_API);
#else
    Py_RETURN_NONE;
#endif
}

static PyMethodDef methods[] = {
    {"checksum", checksum, METH_O, "Fletcher-32 of a bytes object."},
    {"limited_api", limited_api, METH_NOARGS, "Py_LIMITED_API as built, or None."},
    {NULL, NULL, 0, NULL},
};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_limapi", NULL, -1, methods};
PyMODINIT_FUNC PyInit__limapi(void) { return PyModule_Create(&module); }
"""

INFO = """\
import json
import sys

from limapi import _limapi


def fletcher32(data):
    a = b = 0xFFFF
    for byte in data:
        a = (a + byte) % 65535
        b = (b + a) % 65535
    return (b << 16) | a


def main():
    data = bytes(range(256)) * 37
    ok = _limapi.checksum(data) == fletcher32(data)
    limited = _limapi.limited_api()
    print(json.dumps({
        "ok": ok,
        "python": "%d.%d" % sys.version_info[:2],
        "limited_api": None if limited is None else hex(limited),
        "extension": _limapi.__file__.rsplit("/", 1)[-1],
    }))
    sys.exit(0 if ok else 1)
"""


def write_engine(root: Path, repository: str) -> Path:
    project = root / "limapi-src"
    files = {
        "pyproject.toml": PYPROJECT,
        "README.md": "# limapi\n\nOne abi3 wheel for every Python from 3.12 on.\n",
        "CMakeLists.txt": CMAKE,
        "src/core.c": CORE,
        "src/module.c": MODULE,
        "py/limapi/__init__.py": '"""limapi: one variant, so no guard is needed."""\n',
        "py/limapi/info.py": INFO,
    }
    for name, text in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text, encoding="utf-8")
    matrix = root / "matrix.yaml"
    matrix.write_text(
        textwrap.dedent(f"""\
            schema_version: 1
            engine:
              source: limapi-src
              import_name: limapi
              version: "{VERSION}"
              stable_abi: "3.12"
              scripts: [limapi-info]
              smoke:
                commands:
                  - [limapi-info]
            python: [{", ".join(f'"{p}"' for p in PYTHONS)}]
            platform:
              floor: {FLOOR}
            variants:
              cpu:
                distribution: limapi-engine-cpu
                backend: cpu
            publish:
              tag_pattern: "v*"
              repository: "{repository}"
              prerelease: skip
              github_release: false
            """),
        encoding="utf-8",
    )
    return matrix


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "LD_LIBRARY_PATH"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cache_column(stdout: str, wheel: str) -> str:
    """The build summary's ccache column for one wheel ('1/2 (50%)', 'up to date', '-')."""
    header = next(line for line in stdout.splitlines() if "ccache hits" in line)
    row = next(line for line in stdout.splitlines() if line.startswith(wheel))
    start = header.index("ccache hits")
    end = header.index("seconds")
    return row[start:end].strip()


@pytest.mark.slow
def test_one_abi3_wheel_from_build_to_index(tmp_path: Path, index_server: IndexServer) -> None:
    matrix = write_engine(tmp_path, index_server.url)
    wheelhouse = tmp_path / "wheelhouse"
    env = {"CCACHE_DIR": str(tmp_path / "ccache")}
    build_args = (
        "--matrix",
        str(matrix),
        "build",
        "--tag",
        TAG,
        "--wheelhouse",
        str(wheelhouse),
        "--jobs",
        "1",
    )

    # build: a wheel per Python below the floor, one abi3 wheel for the floor and every Python after
    first = toolkit(*build_args, env=env, timeout=1200)
    per_python = f"limapi_engine_cpu-{VERSION}-cp311-cp311-{FLOOR}.whl"
    abi3 = f"limapi_engine_cpu-{VERSION}-cp312-abi3-{FLOOR}.whl"
    wheels = sorted(p.name for p in (wheelhouse / "cpu").glob("*.whl"))
    assert wheels == [per_python, abi3], first.stdout
    with zipfile.ZipFile(wheelhouse / "cpu" / abi3) as zf:
        assert "limapi/_limapi.abi3.so" in zf.namelist()
    with zipfile.ZipFile(wheelhouse / "cpu" / per_python) as zf:
        assert "limapi/_limapi.cpython-311-x86_64-linux-gnu.so" in zf.namelist()

    # the ccache column: the second Python compiled the Python-free core from the cache
    column = _cache_column(first.stdout, abi3)
    hits = re.fullmatch(r"(\d+)/(\d+) \(\d+%\)", column)
    assert hits is not None and int(hits.group(1)) >= 1, (column, first.stdout)
    assert re.fullmatch(r"0/\d+ \(0%\)", _cache_column(first.stdout, per_python)), first.stdout

    # a second build with nothing changed: up to date, the very same files
    before = {name: _sha(wheelhouse / "cpu" / name) for name in wheels}
    second = toolkit(*build_args, env=env, timeout=600)
    assert second.stdout.count("up to date, nothing changed") == 2, second.stdout
    assert _cache_column(second.stdout, abi3) == "up to date"
    assert {name: _sha(wheelhouse / "cpu" / name) for name in wheels} == before

    # verify in release mode: every rule passes, stable-abi audited the abi3 wheel with abi3audit
    verify = toolkit(
        "--matrix", str(matrix), "verify", "--json", "--release", "--write-reports", str(wheelhouse / "cpu")
    )
    reports = {r["wheel"]: r for r in json.loads(verify.stdout)}
    assert set(reports) == {abi3, per_python}
    for name, report in reports.items():
        assert report["ok"] and report["releasable"], (name, report["rules"])
    abi3_rule = next(r for r in reports[abi3]["rules"] if r["id"] == "stable-abi")
    assert abi3_rule["status"] == "pass", abi3_rule
    assert "limited API of Python 3.12 (abi3audit)" in abi3_rule["message"]
    below = next(r for r in reports[per_python]["rules"] if r["id"] == "stable-abi")
    assert below["status"] == "not-applicable" and "below the stable ABI floor 3.12" in below["message"]

    # smoke: the one abi3 wheel in a fresh venv of 3.12 and of 3.13, each reported
    smoke = toolkit("--matrix", str(matrix), "smoke", "--json", "--wheelhouse", str(wheelhouse), timeout=900)
    results = json.loads(smoke.stdout)["results"]
    by_python = {r["python"]: r for r in results}
    assert sorted(by_python) == ["3.11", "3.12", "3.13"], results
    assert all(r["ok"] for r in results), results
    assert {p: by_python[p]["wheel"] for p in ("3.12", "3.13")} == {"3.12": abi3, "3.13": abi3}
    assert by_python["3.11"]["wheel"] == per_python
    for result in results:
        steps = {s["name"]: s for s in result["steps"]}
        assert steps["limapi-info"]["detail"] == "ok: true", result

    # publish to the loopback index; a fresh 3.13 venv installs the abi3 wheel from it
    publish = toolkit(
        "--matrix", str(matrix), "publish", "--tag", TAG, "--repository", index_server.url,
        "--wheelhouse", str(wheelhouse),
        env={"TWINE_USERNAME": USER, "TWINE_PASSWORD": PASSWORD}, timeout=300,
    )  # fmt: skip
    assert sorted(index_server.files()) == sorted([abi3, per_python]), publish.stdout
    clean = _clean_env()
    venv = tmp_path / "venv-313"
    interpreter = find_interpreter("3.13")
    assert interpreter is not None
    fresh_venv(interpreter, venv)
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-cache-dir",
         "--disable-pip-version-check", "--index-url", index_server.simple, f"limapi-engine-cpu=={VERSION}"],
        capture_output=True, text=True, env=clean, check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    assert abi3 in install.stdout, install.stdout
    run = subprocess.run(
        [str(venv / "bin" / "limapi-info")], capture_output=True, text=True, env=clean, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    info = json.loads(run.stdout)
    assert info == {"ok": True, "python": "3.13", "limited_api": "0x30c0000", "extension": "_limapi.abi3.so"}
