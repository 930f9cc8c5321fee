// CUDA backend. Links only the CUDA runtime (libcudart.so.13); driver
// functions are fetched at run time with cudaGetDriverEntryPointByVersion so
// libcuda is never a link-time dependency.
#include <cuda.h>  // types and enums only; no cu* function is called directly
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "backend.h"
#include "xfer/engine.h"

namespace xfer {
namespace {

using GetAddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
using GetHandleForAddressRange = CUresult (*)(void*, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long);
using DeviceGetAttribute = CUresult (*)(int*, CUdevice_attribute, CUdevice);
using GetErrorString = CUresult (*)(CUresult, const char**);

class CudaBackend final : public Backend {
 public:
  std::string name() const override { return "cuda"; }

  std::string runtime_version() override {
    int v = 0;
    if (cudaRuntimeGetVersion(&v) != cudaSuccess) return "unknown";
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  }

  int device_count() override {
    std::call_once(init_, [this] { init(); });
    return devices_;
  }

  PointerInfo query(const void* p, size_t length) override {
    PointerInfo info;
    if (device_count() == 0) {
      info.note = "no CUDA device visible (" + no_device_ + "): host memory";
      return info;
    }
    cudaPointerAttributes a;
    std::memset(&a, 0, sizeof(a));
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();
      return info;
    }
    if (a.type != cudaMemoryTypeDevice) return info;
    info.device = true;
    info.device_id = a.device;
    info.alloc_base = reinterpret_cast<uintptr_t>(p);
    info.alloc_size = length;
    cudaSetDevice(a.device);
    CUdeviceptr base = 0;
    size_t size = 0;
    if (get_range_ && get_range_(&base, &size, reinterpret_cast<CUdeviceptr>(p)) == CUDA_SUCCESS) {
      info.alloc_base = static_cast<uintptr_t>(base);
      info.alloc_size = size;
    } else {
      info.note = "cuMemGetAddressRange unavailable or failed; using the pointer itself as base";
    }
    return info;
  }

  bool dmabuf_supported(std::string* reason) override {
    if (device_count() == 0) {
      *reason = "no CUDA device visible (" + no_device_ + ")";
      return false;
    }
    if (!get_handle_ || !get_attr_) {
      *reason = "cuMemGetHandleForAddressRange not available from this CUDA driver";
      return false;
    }
    int supported = 0;
    if (get_attr_(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, 0) != CUDA_SUCCESS || !supported) {
      *reason = "device 0 reports CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0";
      return false;
    }
    reason->clear();
    return true;
  }

  int export_dmabuf(uintptr_t base, size_t size, int device, std::string* reason) override {
    if (!get_handle_ || !get_attr_) {
      *reason = "cuMemGetHandleForAddressRange not available";
      return -1;
    }
    int supported = 0;
    if (get_attr_(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, device) != CUDA_SUCCESS || !supported) {
      *reason = "device " + std::to_string(device) + " does not support dmabuf";
      return -1;
    }
    cudaSetDevice(device);
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    uintptr_t start = base & ~(page - 1);
    uintptr_t end = (base + size + page - 1) & ~(page - 1);
    int fd = -1;
    CUresult rc = get_handle_(&fd, static_cast<CUdeviceptr>(start), end - start,
                              CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (rc != CUDA_SUCCESS || fd < 0) {
      const char* s = nullptr;
      if (err_str_) err_str_(rc, &s);
      *reason = std::string("cuMemGetHandleForAddressRange failed: ") + (s ? s : std::to_string(rc).c_str());
      return -1;
    }
    *reason = "exported dmabuf for the whole allocation (" + std::to_string(end - start) + " bytes)";
    return fd;
  }

  void* alloc_pinned(size_t n) override {
    void* p = nullptr;
    if (device_count() > 0 && cudaHostAlloc(&p, n, cudaHostAllocDefault) == cudaSuccess) return p;
    cudaGetLastError();
    return heap_.alloc(n);
  }

  void free_pinned(void* p) override {
    if (!heap_.release(p)) cudaFreeHost(p);
  }

  void copy(void* dst, const void* src, size_t n) override {
    cudaError_t rc = cudaMemcpy(dst, src, n, cudaMemcpyDefault);
    if (rc != cudaSuccess) throw Error(std::string("cudaMemcpy: ") + cudaGetErrorString(rc));
  }

  void* alloc_device(size_t n) override {
    void* p = nullptr;
    cudaError_t rc = cudaMalloc(&p, n);
    if (rc != cudaSuccess) throw Error(std::string("cudaMalloc: ") + cudaGetErrorString(rc));
    return p;
  }
  void free_device(void* p) override { cudaFree(p); }

 private:
  template <typename F>
  F entry(const char* sym) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(sym, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return reinterpret_cast<F>(fn);
  }

  void init() {
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess) {
      no_device_ = cudaGetErrorString(rc);
      cudaGetLastError();
      devices_ = 0;
      return;
    }
    devices_ = n;
    if (n == 0) {
      no_device_ = "cudaGetDeviceCount returned 0";
      return;
    }
    get_range_ = entry<GetAddressRange>("cuMemGetAddressRange");
    get_handle_ = entry<GetHandleForAddressRange>("cuMemGetHandleForAddressRange");
    get_attr_ = entry<DeviceGetAttribute>("cuDeviceGetAttribute");
    err_str_ = entry<GetErrorString>("cuGetErrorString");
  }

  std::once_flag init_;
  int devices_ = 0;
  std::string no_device_;
  GetAddressRange get_range_ = nullptr;
  GetHandleForAddressRange get_handle_ = nullptr;
  DeviceGetAttribute get_attr_ = nullptr;
  GetErrorString err_str_ = nullptr;
  HeapFallback heap_;
};

}  // namespace

std::unique_ptr<Backend> make_backend() { return std::unique_ptr<Backend>(new CudaBackend()); }

}  // namespace xfer
