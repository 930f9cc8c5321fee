// MUSA (Moore Threads) backend: the runtime table of GpuBackend (backend_gpu.h) and MUSA's dmabuf
// export. Links only the MUSA runtime (libmusart); the driver functions (muMemGetAddressRange,
// muMemGetHandleForAddressRange) are resolved at run time from libmusa so the driver is never
// linked. No MUSA SDK was available where this was written: it is compiled with
// -DXFER_BACKEND=musa against a MUSA_HOME installation (and in tests against a stand-in header).
#include <dlfcn.h>
#include <musa_runtime_api.h>
#include <unistd.h>

#include "backend_gpu.h"

namespace xfer {
namespace {

// Driver types mirror CUDA's: MUresult is an int-sized enum, MUdeviceptr an
// unsigned 64-bit address, MU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD == 1.
using MuGetAddressRange = int (*)(unsigned long long*, size_t*, unsigned long long);
using MuGetHandleForAddressRange = int (*)(void*, unsigned long long, size_t, int, unsigned long long);
constexpr int kMuDmaBufFd = 1;

struct Musa {
  XFER_CUDA_SHAPED_RUNTIME(musa, "musa", "MUSA")

  struct Driver {
    void init(int) {
      void* drv = ::dlopen("libmusa.so.1", RTLD_NOW | RTLD_LOCAL);
      if (!drv) drv = ::dlopen("libmusa.so", RTLD_NOW | RTLD_LOCAL);
      if (!drv) return;
      get_range = reinterpret_cast<MuGetAddressRange>(::dlsym(drv, "muMemGetAddressRange"));
      get_handle = reinterpret_cast<MuGetHandleForAddressRange>(::dlsym(drv, "muMemGetHandleForAddressRange"));
    }

    bool address_range(const void* p, uintptr_t* base, size_t* size, std::string* why) {
      unsigned long long b = 0;
      if (get_range && get_range(&b, size, reinterpret_cast<unsigned long long>(p)) == 0) {
        *base = static_cast<uintptr_t>(b);
        return true;
      }
      *why = "muMemGetAddressRange unavailable or failed";
      return false;
    }

    bool dmabuf_supported(int, std::string* reason) {
      if (get_handle) return true;
      *reason = "muMemGetHandleForAddressRange not found in libmusa";
      return false;
    }

    int export_dmabuf(uintptr_t base, size_t size, std::string* reason) {
      uintptr_t start = 0, end = 0;
      page_span(base, size, static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)), &start, &end);
      int fd = -1;
      int rc = get_handle(&fd, start, end - start, kMuDmaBufFd, 0);
      if (rc != 0 || fd < 0) {
        *reason = "muMemGetHandleForAddressRange failed (" + std::to_string(rc) + ")";
        return -1;
      }
      *reason = "exported dmabuf for the whole allocation (" + std::to_string(end - start) + " bytes)";
      return fd;
    }

    MuGetAddressRange get_range = nullptr;
    MuGetHandleForAddressRange get_handle = nullptr;
  };
};

}  // namespace

std::unique_ptr<Backend> make_backend() { return make_gpu_backend<Musa>(); }

}  // namespace xfer
