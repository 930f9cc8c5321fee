// MUSA (Moore Threads) backend. Links only the MUSA runtime (libmusart); the
// driver functions (muMemGetAddressRange, muMemGetHandleForAddressRange) are
// resolved at run time from libmusa so the driver is never linked.
// No MUSA SDK was available where this was written: this file is compiled
// only with -DXFER_BACKEND=musa against a MUSA_HOME installation.
#include <dlfcn.h>
#include <musa_runtime_api.h>
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

// Driver types mirror CUDA's: MUresult is an int-sized enum, MUdeviceptr an
// unsigned 64-bit address, MU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD == 1.
using MuGetAddressRange = int (*)(unsigned long long*, size_t*, unsigned long long);
using MuGetHandleForAddressRange = int (*)(void*, unsigned long long, size_t, int, unsigned long long);
constexpr int kMuDmaBufFd = 1;

class MusaBackend final : public Backend {
 public:
  std::string name() const override { return "musa"; }

  std::string runtime_version() override {
    int v = 0;
    if (musaRuntimeGetVersion(&v) != musaSuccess) return "unknown";
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  }

  int device_count() override {
    std::call_once(init_, [this] { init(); });
    return devices_;
  }

  PointerInfo query(const void* p, size_t length) override {
    PointerInfo info;
    if (device_count() == 0) {
      info.note = "no MUSA device visible: host memory";
      return info;
    }
    musaPointerAttributes a;
    std::memset(&a, 0, sizeof(a));
    if (musaPointerGetAttributes(&a, p) != musaSuccess) {
      musaGetLastError();
      return info;
    }
    if (a.type != musaMemoryTypeDevice) return info;
    info.device = true;
    info.device_id = a.device;
    info.alloc_base = reinterpret_cast<uintptr_t>(p);
    info.alloc_size = length;
    musaSetDevice(a.device);
    unsigned long long base = 0;
    size_t size = 0;
    if (get_range_ && get_range_(&base, &size, reinterpret_cast<unsigned long long>(p)) == 0) {
      info.alloc_base = static_cast<uintptr_t>(base);
      info.alloc_size = size;
    } else {
      info.note = "muMemGetAddressRange unavailable or failed; using the pointer itself as base";
    }
    return info;
  }

  bool dmabuf_supported(std::string* reason) override {
    if (device_count() == 0) {
      *reason = "no MUSA device visible";
      return false;
    }
    if (!get_handle_) {
      *reason = "muMemGetHandleForAddressRange not found in libmusa";
      return false;
    }
    reason->clear();
    return true;
  }

  int export_dmabuf(uintptr_t base, size_t size, int device, std::string* reason) override {
    if (!get_handle_) {
      *reason = "muMemGetHandleForAddressRange not available";
      return -1;
    }
    musaSetDevice(device);
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    uintptr_t start = base & ~(page - 1);
    uintptr_t end = (base + size + page - 1) & ~(page - 1);
    int fd = -1;
    int rc = get_handle_(&fd, start, end - start, kMuDmaBufFd, 0);
    if (rc != 0 || fd < 0) {
      *reason = "muMemGetHandleForAddressRange failed (" + std::to_string(rc) + ")";
      return -1;
    }
    *reason = "exported dmabuf for the whole allocation (" + std::to_string(end - start) + " bytes)";
    return fd;
  }

  void* alloc_pinned(size_t n) override {
    void* p = nullptr;
    if (device_count() > 0 && musaHostAlloc(&p, n, musaHostAllocDefault) == musaSuccess) return p;
    musaGetLastError();
    return heap_.alloc(n);
  }

  void free_pinned(void* p) override {
    if (!heap_.release(p)) musaFreeHost(p);
  }

  void copy(void* dst, const void* src, size_t n) override {
    musaError_t rc = musaMemcpy(dst, src, n, musaMemcpyDefault);
    if (rc != musaSuccess) throw Error(std::string("musaMemcpy: ") + musaGetErrorString(rc));
  }

  void* alloc_device(size_t n) override {
    void* p = nullptr;
    musaError_t rc = musaMalloc(&p, n);
    if (rc != musaSuccess) throw Error(std::string("musaMalloc: ") + musaGetErrorString(rc));
    return p;
  }
  void free_device(void* p) override { musaFree(p); }

 private:
  void init() {
    int n = 0;
    if (musaGetDeviceCount(&n) != musaSuccess) {
      musaGetLastError();
      n = 0;
    }
    devices_ = n;
    void* drv = ::dlopen("libmusa.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!drv) drv = ::dlopen("libmusa.so", RTLD_NOW | RTLD_LOCAL);
    if (drv) {
      get_range_ = reinterpret_cast<MuGetAddressRange>(::dlsym(drv, "muMemGetAddressRange"));
      get_handle_ = reinterpret_cast<MuGetHandleForAddressRange>(::dlsym(drv, "muMemGetHandleForAddressRange"));
    }
  }

  std::once_flag init_;
  int devices_ = 0;
  MuGetAddressRange get_range_ = nullptr;
  MuGetHandleForAddressRange get_handle_ = nullptr;
  HeapFallback heap_;
};

}  // namespace

std::unique_ptr<Backend> make_backend() { return std::unique_ptr<Backend>(new MusaBackend()); }

}  // namespace xfer
