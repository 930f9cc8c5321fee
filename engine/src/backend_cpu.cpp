// CPU backend: host memory only, no runtime library.
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend.h"
#include "xfer/engine.h"

namespace xfer {
namespace {

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::string runtime_version() override { return "none"; }
  int device_count() override { return 0; }
  PointerInfo query(const void*, size_t) override {
    PointerInfo info;
    info.note = "CPU build: all memory is host memory";
    return info;
  }
  bool dmabuf_supported(std::string* reason) override {
    *reason = "CPU build: no device memory, no dmabuf export";
    return false;
  }
  int export_dmabuf(uintptr_t, size_t, int, std::string* reason) override {
    *reason = "CPU build";
    return -1;
  }
  void* alloc_pinned(size_t n) override {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, n) != 0) throw std::bad_alloc();
    return p;
  }
  void free_pinned(void* p) override { std::free(p); }
  void copy(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void* alloc_device(size_t) override { throw Error("CPU build has no device memory"); }
  void free_device(void*) override {}
};

}  // namespace

std::unique_ptr<Backend> make_backend() { return std::unique_ptr<Backend>(new CpuBackend()); }

}  // namespace xfer
