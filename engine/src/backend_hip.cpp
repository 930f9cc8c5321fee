// HIP (ROCm) backend. Links only libamdhip64; the HSA dmabuf export
// (hsa_amd_portable_export_dmabuf, ROCm >= 5.6) is looked up with dlsym so the
// same binary runs on older runtimes, with the GPU-direct path reported off.
#include <dlfcn.h>
#include <hip/hip_runtime_api.h>
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

using ExportDmabuf = int (*)(const void*, size_t, int*, uint64_t*);  // returns hsa_status_t

class HipBackend final : public Backend {
 public:
  std::string name() const override { return "hip"; }

  std::string runtime_version() override {
    int v = 0;
    if (hipRuntimeGetVersion(&v) != hipSuccess) return "unknown";
    return std::to_string(v / 10000000) + "." + std::to_string((v / 100000) % 100) + "." +
           std::to_string(v % 100000);
  }

  int device_count() override {
    std::call_once(init_, [this] { init(); });
    return devices_;
  }

  PointerInfo query(const void* p, size_t length) override {
    PointerInfo info;
    // With no GPU, never ask HIP about host pointers.
    if (device_count() == 0) {
      info.note = "no HIP device visible (" + no_device_ + "): host memory";
      return info;
    }
    hipPointerAttribute_t a;
    std::memset(&a, 0, sizeof(a));
    if (hipPointerGetAttributes(&a, p) != hipSuccess) {
      (void)hipGetLastError();
      return info;
    }
#if HIP_VERSION_MAJOR >= 6
    const bool is_device = a.type == hipMemoryTypeDevice;
#else
    const bool is_device = a.memoryType == hipMemoryTypeDevice;
#endif
    if (!is_device) return info;
    info.device = true;
    info.device_id = a.device;
    info.alloc_base = reinterpret_cast<uintptr_t>(p);
    info.alloc_size = length;
    (void)hipSetDevice(a.device);
    hipDeviceptr_t base = nullptr;
    size_t size = 0;
    if (hipMemGetAddressRange(&base, &size, const_cast<void*>(p)) == hipSuccess) {
      info.alloc_base = reinterpret_cast<uintptr_t>(base);
      info.alloc_size = size;
    } else {
      (void)hipGetLastError();
      info.note = "hipMemGetAddressRange failed; using the pointer itself as base";
    }
    return info;
  }

  bool dmabuf_supported(std::string* reason) override {
    if (device_count() == 0) {
      *reason = "no HIP device visible (" + no_device_ + ")";
      return false;
    }
    if (!export_) {
      *reason = "hsa_amd_portable_export_dmabuf not found in the HSA runtime (needs ROCm >= 5.6; this is HIP " +
                runtime_version() + ")";
      return false;
    }
    reason->clear();
    return true;
  }

  int export_dmabuf(uintptr_t base, size_t size, int device, std::string* reason) override {
    if (!export_) {
      *reason = "hsa_amd_portable_export_dmabuf not available";
      return -1;
    }
    (void)hipSetDevice(device);
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

  void* alloc_pinned(size_t n) override {
    void* p = nullptr;
    if (device_count() > 0 && hipHostMalloc(&p, n, 0) == hipSuccess) return p;
    (void)hipGetLastError();
    return heap_.alloc(n);
  }

  void free_pinned(void* p) override {
    if (!heap_.release(p)) (void)hipHostFree(p);
  }

  void copy(void* dst, const void* src, size_t n) override {
    hipError_t rc = hipMemcpy(dst, src, n, hipMemcpyDefault);
    if (rc != hipSuccess) throw Error(std::string("hipMemcpy: ") + hipGetErrorString(rc));
  }

  void* alloc_device(size_t n) override {
    void* p = nullptr;
    hipError_t rc = hipMalloc(&p, n);
    if (rc != hipSuccess) throw Error(std::string("hipMalloc: ") + hipGetErrorString(rc));
    return p;
  }
  void free_device(void* p) override { (void)hipFree(p); }

 private:
  void init() {
    int n = 0;
    hipError_t rc = hipGetDeviceCount(&n);
    if (rc != hipSuccess) {
      no_device_ = hipGetErrorString(rc);
      (void)hipGetLastError();
      devices_ = 0;
    } else {
      devices_ = n;
      if (n == 0) no_device_ = "hipGetDeviceCount returned 0";
    }
    void* fn = ::dlsym(RTLD_DEFAULT, "hsa_amd_portable_export_dmabuf");
    if (!fn) {
      void* hsa = ::dlopen("libhsa-runtime64.so.1", RTLD_NOW | RTLD_NOLOAD);
      if (hsa) fn = ::dlsym(hsa, "hsa_amd_portable_export_dmabuf");
    }
    export_ = reinterpret_cast<ExportDmabuf>(fn);
  }

  std::once_flag init_;
  int devices_ = 0;
  std::string no_device_;
  ExportDmabuf export_ = nullptr;
  HeapFallback heap_;
};

}  // namespace

std::unique_ptr<Backend> make_backend() { return std::unique_ptr<Backend>(new HipBackend()); }

}  // namespace xfer
