// CUDA backend: the runtime table of GpuBackend (backend_gpu.h) and CUDA's dmabuf export. Links
// only the CUDA runtime (libcudart.so.13); driver functions are fetched at run time with
// cudaGetDriverEntryPointByVersion so libcuda is never a link-time dependency.
#include <cuda.h>  // types and enums only; no cu* function is called directly
#include <cuda_runtime_api.h>
#include <unistd.h>

#include "backend_gpu.h"

namespace xfer {
namespace {

using GetAddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
using GetHandleForAddressRange = CUresult (*)(void*, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long);
using DeviceGetAttribute = CUresult (*)(int*, CUdevice_attribute, CUdevice);
using GetErrorString = CUresult (*)(CUresult, const char**);

struct Cuda {
  XFER_CUDA_SHAPED_RUNTIME(cuda, "cuda", "CUDA")

  struct Driver {
    void init(int devices) {
      if (devices == 0) return;
      get_range = entry<GetAddressRange>("cuMemGetAddressRange");
      get_handle = entry<GetHandleForAddressRange>("cuMemGetHandleForAddressRange");
      get_attr = entry<DeviceGetAttribute>("cuDeviceGetAttribute");
      err_str = entry<GetErrorString>("cuGetErrorString");
    }

    bool address_range(const void* p, uintptr_t* base, size_t* size, std::string* why) {
      CUdeviceptr b = 0;
      if (get_range && get_range(&b, size, reinterpret_cast<CUdeviceptr>(p)) == CUDA_SUCCESS) {
        *base = static_cast<uintptr_t>(b);
        return true;
      }
      *why = "cuMemGetAddressRange unavailable or failed";
      return false;
    }

    bool dmabuf_supported(int device, std::string* reason) {
      if (!get_handle || !get_attr) {
        *reason = "cuMemGetHandleForAddressRange not available from this CUDA driver";
        return false;
      }
      int supported = 0;
      if (get_attr(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, device) != CUDA_SUCCESS || !supported) {
        *reason = "device " + std::to_string(device) + " reports CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0";
        return false;
      }
      return true;
    }

    int export_dmabuf(uintptr_t base, size_t size, std::string* reason) {
      uintptr_t start = 0, end = 0;
      page_span(base, size, static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)), &start, &end);
      int fd = -1;
      CUresult rc = get_handle(&fd, static_cast<CUdeviceptr>(start), end - start, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
      if (rc != CUDA_SUCCESS || fd < 0) {
        const char* s = nullptr;
        if (err_str) err_str(rc, &s);
        *reason = std::string("cuMemGetHandleForAddressRange failed: ") + (s ? s : std::to_string(rc).c_str());
        return -1;
      }
      *reason = "exported dmabuf for the whole allocation (" + std::to_string(end - start) + " bytes)";
      return fd;
    }

    template <typename F>
    static F entry(const char* sym) {
      void* fn = nullptr;
      cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
      if (cudaGetDriverEntryPointByVersion(sym, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
          q != cudaDriverEntryPointSuccess) {
        cudaGetLastError();
        return nullptr;
      }
      return reinterpret_cast<F>(fn);
    }

    GetAddressRange get_range = nullptr;
    GetHandleForAddressRange get_handle = nullptr;
    DeviceGetAttribute get_attr = nullptr;
    GetErrorString err_str = nullptr;
  };
};

}  // namespace

std::unique_ptr<Backend> make_backend() { return make_gpu_backend<Cuda>(); }

}  // namespace xfer
