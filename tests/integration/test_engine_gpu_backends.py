"""The engine's GPU backends share one implementation (engine/src/backend_gpu.h).

Each `backend_<runtime>.cpp` is a table of the runtime's calls and its dmabuf export; the logic
(device discovery, pointer queries, pinned memory with a heap fallback, copies, the dmabuf checks)
is written once. These tests compile every GPU backend where its headers exist, MUSA against a
TEST STAND-IN header (no MUSA SDK exists here), and a made-up fourth CUDA-shaped runtime from its
table alone, so that adding a runtime does not mean copying a backend.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.integration

ENGINE = ROOT / "engine"
CXX = shutil.which("g++") or shutil.which("c++")
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler")

# TEST STAND-IN: the part of a CUDA-shaped runtime API (prefix `<p>`) that GpuBackend calls.
STANDIN_RUNTIME = """\
/* TEST STAND-IN for a CUDA-shaped runtime header: the names backend_gpu.h uses, prefix @P@. */
#pragma once
#include <stddef.h>
typedef enum { @P@Success = 0, @P@ErrorUnknown = 999 } @P@Error_t;
typedef enum { @P@MemoryTypeHost = 1, @P@MemoryTypeDevice = 2 } @P@MemoryType;
typedef enum { @P@MemcpyDefault = 4 } @P@MemcpyKind;
#define @P@HostAllocDefault 0
struct @P@PointerAttributes { @P@MemoryType type; int device; void *devicePointer; void *hostPointer; };
@P@Error_t @P@GetDeviceCount(int *);
const char *@P@GetErrorString(@P@Error_t);
@P@Error_t @P@GetLastError(void);
@P@Error_t @P@RuntimeGetVersion(int *);
@P@Error_t @P@PointerGetAttributes(struct @P@PointerAttributes *, const void *);
@P@Error_t @P@SetDevice(int);
@P@Error_t @P@HostAlloc(void **, size_t, unsigned int);
@P@Error_t @P@FreeHost(void *);
@P@Error_t @P@Memcpy(void *, const void *, size_t, @P@MemcpyKind);
@P@Error_t @P@Malloc(void **, size_t);
@P@Error_t @P@Free(void *);
"""

# A fourth runtime, CUDA-shaped, with no dmabuf export: its whole backend.
TOY_BACKEND = """\
#include "toyrt_runtime_api.h"
#include "backend_gpu.h"

namespace xfer {
namespace {
struct Toy {
  XFER_CUDA_SHAPED_RUNTIME(toyrt, "toy", "ToyRT")
  struct Driver {
    void init(int) {}
    bool address_range(const void*, uintptr_t*, size_t*, std::string* why) {
      *why = "ToyRT has no address ranges";
      return false;
    }
    bool dmabuf_supported(int, std::string* reason) {
      *reason = "ToyRT cannot export dmabufs";
      return false;
    }
    int export_dmabuf(uintptr_t, size_t, std::string*) { return -1; }
  };
};
}  // namespace
std::unique_ptr<Backend> make_backend() { return make_gpu_backend<Toy>(); }
}  // namespace xfer
"""


def compile_backend(source: Path, out: Path, *includes: Path, defines: tuple[str, ...] = ()) -> None:
    assert CXX is not None
    argv = [CXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-c", str(source), "-o", str(out)]
    argv += [f"-I{d}" for d in (*includes, ENGINE / "include", ENGINE / "src")]
    argv += [f"-D{d}" for d in defines]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def symbols(obj: Path) -> str:
    argv = ["nm", "-C", "--undefined-only", str(obj)]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def stand_in_header(directory: Path, prefix: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    header = directory / f"{prefix}_runtime_api.h"
    header.write_text(STANDIN_RUNTIME.replace("@P@", prefix), encoding="utf-8")
    return directory


def test_no_gpu_backend_repeats_the_shared_code() -> None:
    shared = (ENGINE / "src" / "backend_gpu.h").read_text(encoding="utf-8")
    assert "class GpuBackend final : public Backend" in shared
    for name in ("cuda", "hip", "musa"):
        text = (ENGINE / "src" / f"backend_{name}.cpp").read_text(encoding="utf-8")
        assert "make_gpu_backend<" in text, name
        own = re.search(r"class \w+ final : public Backend", text)
        assert own is None, f"backend_{name}.cpp defines its own Backend"
        assert "HeapFallback" not in text and "call_once" not in text, name


@needs_cxx
def test_musa_backend_compiles_from_its_table(tmp_path: Path) -> None:
    include = stand_in_header(tmp_path / "include", "musa")
    obj = tmp_path / "backend_musa.o"
    compile_backend(ENGINE / "src" / "backend_musa.cpp", obj, include)
    undefined = symbols(obj)
    for call in ("GetDeviceCount", "Memcpy", "Malloc", "HostAlloc", "PointerGetAttributes"):
        assert f"musa{call}" in undefined, undefined


@needs_cxx
def test_a_fourth_cuda_shaped_runtime_is_its_table(tmp_path: Path) -> None:
    include = stand_in_header(tmp_path / "include", "toyrt")
    source = tmp_path / "backend_toy.cpp"
    source.write_text(TOY_BACKEND, encoding="utf-8")
    obj = tmp_path / "backend_toy.o"
    compile_backend(source, obj, include)
    undefined = symbols(obj)
    assert "toyrtMemcpy" in undefined and "toyrtGetDeviceCount" in undefined, undefined


@needs_cxx
@pytest.mark.skipif(not Path("/usr/local/cuda-13.0/include/cuda.h").exists(), reason="no CUDA 13.0")
def test_cuda_backend_compiles(tmp_path: Path) -> None:
    obj = tmp_path / "backend_cuda.o"
    compile_backend(ENGINE / "src" / "backend_cuda.cpp", obj, Path("/usr/local/cuda-13.0/include"))
    undefined = symbols(obj)
    assert "cudaGetDriverEntryPointByVersion" in undefined and "cudaMemcpy" in undefined
    assert not re.search(r"\bcu[A-Z]\w+@?", "\n".join(undefined.split())), "a driver call is linked directly"


@needs_cxx
@pytest.mark.skipif(not Path("/usr/include/hip/hip_runtime_api.h").exists(), reason="no HIP headers")
def test_hip_backend_compiles(tmp_path: Path) -> None:
    obj = tmp_path / "backend_hip.o"
    compile_backend(ENGINE / "src" / "backend_hip.cpp", obj, defines=("__HIP_PLATFORM_AMD__",))
    assert "hipMemcpy" in symbols(obj)
