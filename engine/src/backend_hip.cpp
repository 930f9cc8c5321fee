// HIP (ROCm) backend: the runtime table of GpuBackend (backend_gpu.h) and HIP's dmabuf export.
// Links only libamdhip64; the HSA dmabuf export (hsa_amd_portable_export_dmabuf, ROCm >= 5.6) is
// looked up with dlsym so the same binary runs on older runtimes, with the GPU-direct path
// reported off.
#include <dlfcn.h>
#include <hip/hip_runtime_api.h>

#include "backend_gpu.h"

namespace xfer {
namespace {

using ExportDmabuf = int (*)(const void*, size_t, int*, uint64_t*);  // returns hsa_status_t

struct Hip {
  using Status = hipError_t;
  static constexpr Status kSuccess = hipSuccess;
  static constexpr const char* kName = "hip";
  static constexpr const char* kTitle = "HIP";
  static constexpr const char* kDeviceCount = "hipGetDeviceCount";
  static constexpr const char* kCopy = "hipMemcpy";
  static constexpr const char* kMalloc = "hipMalloc";

  static Status device_count(int* n) { return hipGetDeviceCount(n); }
  static const char* error_string(Status rc) { return hipGetErrorString(rc); }
  static void clear_error() { (void)hipGetLastError(); }
  static std::string version() {
    int v = 0;
    if (hipRuntimeGetVersion(&v) != hipSuccess) return "unknown";
    return std::to_string(v / 10000000) + "." + std::to_string((v / 100000) % 100) + "." + std::to_string(v % 100000);
  }
  static bool device_pointer(const void* p, int* device) {
    hipPointerAttribute_t a;
    std::memset(&a, 0, sizeof(a));
    if (hipPointerGetAttributes(&a, p) != hipSuccess) {
      (void)hipGetLastError();
      return false;
    }
    *device = a.device;
#if HIP_VERSION_MAJOR >= 6
    return a.type == hipMemoryTypeDevice;
#else
    return a.memoryType == hipMemoryTypeDevice;
#endif
  }
  static void set_device(int d) { (void)hipSetDevice(d); }
  static Status host_alloc(void** p, size_t n) { return hipHostMalloc(p, n, 0); }
  static void host_free(void* p) { (void)hipHostFree(p); }
  static Status copy(void* d, const void* s, size_t n) { return hipMemcpy(d, s, n, hipMemcpyDefault); }
  static Status malloc(void** p, size_t n) { return hipMalloc(p, n); }
  static void free(void* p) { (void)hipFree(p); }

  struct Driver {
    void init(int) {
      void* fn = ::dlsym(RTLD_DEFAULT, "hsa_amd_portable_export_dmabuf");
      if (!fn) {
        void* hsa = ::dlopen("libhsa-runtime64.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (hsa) fn = ::dlsym(hsa, "hsa_amd_portable_export_dmabuf");
      }
      export_ = reinterpret_cast<ExportDmabuf>(fn);
    }

    bool address_range(const void* p, uintptr_t* base, size_t* size, std::string* why) {
      hipDeviceptr_t b = nullptr;
      if (hipMemGetAddressRange(&b, size, const_cast<void*>(p)) == hipSuccess) {
        *base = reinterpret_cast<uintptr_t>(b);
        return true;
      }
      (void)hipGetLastError();
      *why = "hipMemGetAddressRange failed";
      return false;
    }

    bool dmabuf_supported(int, std::string* reason) {
      if (export_) return true;
      *reason = "hsa_amd_portable_export_dmabuf not found in the HSA runtime (needs ROCm >= 5.6; this is HIP " +
                version() + ")";
      return false;
    }

    int export_dmabuf(uintptr_t base, size_t size, std::string* reason) {
      int fd = -1;
      uint64_t off = 0;
      int rc = export_(reinterpret_cast<const void*>(base), size, &fd, &off);
      if (rc != 0 || fd < 0) {
        *reason = "hsa_amd_portable_export_dmabuf failed (status " + std::to_string(rc) + ")";
        return -1;
      }
      *reason = "exported dmabuf for the whole allocation (" + std::to_string(size) + " bytes, dmabuf offset " +
                std::to_string(off) + ")";
      return fd;
    }

    ExportDmabuf export_ = nullptr;
  };
};

}  // namespace

std::unique_ptr<Backend> make_backend() { return make_gpu_backend<Hip>(); }

}  // namespace xfer
