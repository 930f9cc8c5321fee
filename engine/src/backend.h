// The one internal interface every accelerator runtime sits behind. Exactly
// one implementation (backend_<name>.cpp) is compiled in, chosen by CMake.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace xfer {

struct PointerInfo {
  bool device = false;
  int device_id = -1;
  uintptr_t alloc_base = 0;
  size_t alloc_size = 0;
  std::string note;  // why the lookup fell back to "host"
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual std::string runtime_version() = 0;
  virtual int device_count() = 0;
  // Classifies a pointer; for device memory also resolves the allocation
  // that contains it (caching allocators hand out interior pointers).
  virtual PointerInfo query(const void* p, size_t length) = 0;
  // Whether this runtime can export dmabufs at all (symbol present, device
  // attribute set); reason says why not.
  virtual bool dmabuf_supported(std::string* reason) = 0;
  // dmabuf fd for [base, base + size) on device, or -1 with a reason.
  virtual int export_dmabuf(uintptr_t base, size_t size, int device, std::string* reason) = 0;
  virtual void* alloc_pinned(size_t n) = 0;
  virtual void free_pinned(void* p) = 0;
  // Any-direction copy (unified addressing); throws xfer::Error on failure.
  virtual void copy(void* dst, const void* src, size_t n) = 0;
  virtual void* alloc_device(size_t n) = 0;
  virtual void free_device(void* p) = 0;
};

// Staging memory where a GPU runtime cannot pin (no device visible): page-aligned heap memory,
// remembered so that free_pinned can tell it from the runtime's pinned buffers.
class HeapFallback {
 public:
  void* alloc(size_t n) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, n) != 0) throw std::bad_alloc();
    std::lock_guard<std::mutex> lk(mu_);
    blocks_.push_back(p);
    return p;
  }
  // Frees p and returns true when it came from alloc(); false means it is the runtime's.
  bool release(void* p) {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
      if (*it == p) {
        blocks_.erase(it);
        std::free(p);
        return true;
      }
    }
    return false;
  }

 private:
  std::mutex mu_;
  std::vector<void*> blocks_;
};

std::unique_ptr<Backend> make_backend();

}  // namespace xfer
