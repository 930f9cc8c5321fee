"""A generated engine WITHOUT a prebuild step, for the build benchmark: a C++ core of heavy
translation units (templates and constexpr evaluation, no Python.h), a small CPython-API binding,
and a scikit-build-core project that sets the Python include directories the way many real projects
do, globally (`include_directories(${Python_INCLUDE_DIRS})`), so every core TU is compiled with a
per-Python `-I`. Each Python's build compiles the whole core again; only ccache can share it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import yaml

# One unit's cost: a std::visit over two variants of ALTERNATIVES types (ALTERNATIVES² lambda
# instantiations, each inlined at -O2) and a constexpr table of TABLE entries.
ALTERNATIVES = 12
TABLE = 1500

_UNIT = """\
// Generated: heavy unit {i}. No Python header: identical for every Python.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "heavy/core.h"

namespace heavy {{
namespace u{i} {{

template <int K>
struct Cell {{
  std::uint64_t v;
  std::string tag;
  std::vector<std::tuple<int, double, std::string>> rows;
}};

using Value = std::variant<{cells}>;

constexpr std::uint64_t mix(std::uint64_t x) {{
  for (int r = 0; r < {rounds}; ++r) {{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL + {i};
    x ^= x >> 29;
  }}
  return x;
}}

template <std::size_t... I>
constexpr std::array<std::uint64_t, sizeof...(I)> table(std::index_sequence<I...>) {{
  return {{mix(I + {seed}ULL)...}};
}}

constexpr auto kTable = table(std::make_index_sequence<{table}>{{}});

template <int K>
Value make(std::uint64_t seed) {{
  Cell<K> c{{seed + K, std::to_string(seed * K), {{}}}};
  for (int j = 0; j < K + 1; ++j) c.rows.emplace_back(j, seed * 0.5, c.tag);
  return c;
}}

template <std::size_t... K>
Value pick(std::uint64_t seed, std::index_sequence<K...>) {{
  using Maker = Value (*)(std::uint64_t);
  static constexpr Maker makers[] = {{&make<static_cast<int>(K)>...}};
  return makers[seed % sizeof...(K)](seed);
}}

}}  // namespace u{i}

std::uint64_t unit_{i}(std::uint64_t seed) {{
  using namespace u{i};
  std::map<std::string, std::uint64_t> seen;
  std::uint64_t acc = kTable[seed % kTable.size()];
  for (int n = 0; n < 8; ++n) {{
    Value a = pick(seed + n, std::make_index_sequence<{alternatives}>{{}});
    Value b = pick(seed * 3 + n, std::make_index_sequence<{alternatives}>{{}});
    acc += std::visit(
        [&](const auto& x, const auto& y) -> std::uint64_t {{
          seen[x.tag + y.tag] += x.rows.size() * y.rows.size();
          std::uint64_t s = x.v ^ (y.v << 1);
          for (const auto& [i, d, t] : x.rows) s += static_cast<std::uint64_t>(i + d) + t.size();
          return s;
        }},
        a, b);
  }}
  return acc + seen.size();
}}

}}  // namespace heavy
"""

_BINDING = """\
// Generated: the small binding, plain CPython API. heavy._heavy.checksum(seed) -> int.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "heavy/core.h"

static PyObject* checksum(PyObject*, PyObject* arg) {
  unsigned long long seed = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return nullptr;
  return PyLong_FromUnsignedLongLong(heavy::checksum(seed));
}

static PyMethodDef methods[] = {
    {"checksum", checksum, METH_O, "checksum(seed) -> int"},
    {nullptr, nullptr, 0, nullptr},
};
static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_heavy", nullptr, -1, methods};

PyMODINIT_FUNC PyInit__heavy() { return PyModule_Create(&module); }
"""

_CMAKE = """\
cmake_minimum_required(VERSION 3.18)
project(heavy LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
find_package(Python 3.10 COMPONENTS Interpreter Development.Module REQUIRED)
# As many projects do: the Python headers for every target, so the core TUs get a per-Python -I.
include_directories(${Python_INCLUDE_DIRS} include)
file(GLOB _units CONFIGURE_DEPENDS src/unit_*.cpp)
add_library(heavy_core STATIC ${_units} src/checksum.cpp)
python_add_library(_heavy MODULE WITH_SOABI python/binding.cpp)
target_link_libraries(_heavy PRIVATE heavy_core)
install(TARGETS _heavy LIBRARY DESTINATION heavy)
"""

_PYPROJECT = """\
[build-system]
requires = ["scikit-build-core>=0.10"]
build-backend = "scikit_build_core.build"

[project]
name = "heavy-engine"
version = "0.0.1"
requires-python = ">=3.10"

[tool.scikit-build]
cmake.build-type = "Release"
wheel.packages = ["python/heavy"]
"""


def write_engine(root: Path, units: int, rounds: int = 40) -> Path:
    """The engine's source tree under `root` (units heavy TUs); returns `root`."""
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "include" / "heavy").mkdir(parents=True, exist_ok=True)
    (root / "python" / "heavy").mkdir(parents=True, exist_ok=True)
    cells = ", ".join(f"Cell<{k}>" for k in range(ALTERNATIVES))
    declarations = "\n".join(f"std::uint64_t unit_{i}(std::uint64_t seed);" for i in range(units))
    (root / "include" / "heavy" / "core.h").write_text(
        f"#pragma once\n#include <cstdint>\nnamespace heavy {{\n{declarations}\n"
        "std::uint64_t checksum(std::uint64_t seed);\n}  // namespace heavy\n",
        encoding="utf-8",
    )
    for i in range(units):
        text = _UNIT.format(
            i=i, cells=cells, rounds=rounds, seed=1000 * i, table=TABLE, alternatives=ALTERNATIVES
        )
        (root / "src" / f"unit_{i:03d}.cpp").write_text(text, encoding="utf-8")
    calls = " ^ ".join(f"unit_{i}(seed)" for i in range(units))
    (root / "src" / "checksum.cpp").write_text(
        '#include "heavy/core.h"\nnamespace heavy {\n'
        f"std::uint64_t checksum(std::uint64_t seed) {{ return {calls}; }}\n}}  // namespace heavy\n",
        encoding="utf-8",
    )
    (root / "python" / "binding.cpp").write_text(_BINDING, encoding="utf-8")
    (root / "python" / "heavy" / "__init__.py").write_text(
        '"""Generated benchmark engine."""\n\nfrom ._heavy import checksum\n\n__all__ = ["checksum"]\n',
        encoding="utf-8",
    )
    (root / "CMakeLists.txt").write_text(_CMAKE, encoding="utf-8")
    (root / "pyproject.toml").write_text(_PYPROJECT, encoding="utf-8")
    return root


def write_matrix(directory: Path, engine: Path, pythons: list[str], floor: str) -> Path:
    """A one-variant (cpu) matrix for the generated engine; no prebuild, no stable ABI."""
    data = {
        "schema_version": 1,
        "engine": {"source": str(engine), "import_name": "heavy", "version": "0.0.1"},
        "python": pythons,
        "platform": {"floor": floor},
        "variants": {"cpu": {"distribution": "heavy-engine-cpu", "backend": "cpu"}},
    }
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "matrix.yaml"
    path.write_text(textwrap.dedent(yaml.safe_dump(data, sort_keys=False)), encoding="utf-8")
    return path
