// What every GPU backend does, written once: GpuBackend<Runtime> implements Backend over a small
// table of the runtime's calls. A runtime's file (backend_cuda.cpp, backend_hip.cpp,
// backend_musa.cpp) holds only that table and its driver's dmabuf export, the one part that
// differs in substance. A new GPU runtime is one such file; a CUDA-shaped one (cudaMalloc,
// musaMalloc: the same calls under another prefix) writes its table with
// XFER_CUDA_SHAPED_RUNTIME.
//
// A Runtime provides (all static but the driver):
//   using Status;  static constexpr Status kSuccess;
//   static constexpr const char *kName ("cuda": Backend::name), *kTitle ("CUDA": messages),
//                               *kDeviceCount, *kCopy, *kMalloc (call names, for messages);
//   Status device_count(int*); const char* error_string(Status); void clear_error();
//   std::string version();                          // the runtime's version, "13.0"
//   bool device_pointer(const void*, int* device);  // true for device memory (errors cleared)
//   void set_device(int);
//   Status host_alloc(void**, size_t); void host_free(void*);
//   Status copy(void* dst, const void* src, size_t); Status malloc(void**, size_t); void free(void*);
//   struct Driver {                                 // optional entry points, looked up at run time
//     void init(int devices);
//     bool address_range(const void* p, uintptr_t* base, size_t* size, std::string* why);
//     bool dmabuf_supported(int device, std::string* reason);
//     int export_dmabuf(uintptr_t base, size_t size, std::string* reason);  // fd or -1
//   };
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "backend.h"
#include "xfer/engine.h"

namespace xfer {

template <typename Runtime>
class GpuBackend final : public Backend {
 public:
  std::string name() const override { return Runtime::kName; }

  std::string runtime_version() override { return Runtime::version(); }

  int device_count() override {
    std::call_once(init_, [this] { init(); });
    return devices_;
  }

  PointerInfo query(const void* p, size_t length) override {
    PointerInfo info;
    if (device_count() == 0) {  // with no GPU, never ask the runtime about host pointers
      info.note = no_device() + ": host memory";
      return info;
    }
    int device = -1;
    if (!Runtime::device_pointer(p, &device)) return info;
    info.device = true;
    info.device_id = device;
    info.alloc_base = reinterpret_cast<uintptr_t>(p);
    info.alloc_size = length;
    Runtime::set_device(device);
    uintptr_t base = 0;
    size_t size = 0;
    std::string why;
    if (driver_.address_range(p, &base, &size, &why)) {
      info.alloc_base = base;
      info.alloc_size = size;
    } else {
      info.note = why + "; using the pointer itself as base";
    }
    return info;
  }

  bool dmabuf_supported(std::string* reason) override {
    if (device_count() == 0) {
      *reason = no_device();
      return false;
    }
    if (!driver_.dmabuf_supported(0, reason)) return false;
    reason->clear();
    return true;
  }

  int export_dmabuf(uintptr_t base, size_t size, int device, std::string* reason) override {
    if (!driver_.dmabuf_supported(device, reason)) return -1;
    Runtime::set_device(device);
    return driver_.export_dmabuf(base, size, reason);
  }

  void* alloc_pinned(size_t n) override {
    void* p = nullptr;
    if (device_count() > 0 && Runtime::host_alloc(&p, n) == Runtime::kSuccess) return p;
    Runtime::clear_error();
    return heap_.alloc(n);
  }

  void free_pinned(void* p) override {
    if (!heap_.release(p)) Runtime::host_free(p);
  }

  void copy(void* dst, const void* src, size_t n) override {
    auto rc = Runtime::copy(dst, src, n);
    if (rc != Runtime::kSuccess) throw Error(std::string(Runtime::kCopy) + ": " + Runtime::error_string(rc));
  }

  void* alloc_device(size_t n) override {
    void* p = nullptr;
    auto rc = Runtime::malloc(&p, n);
    if (rc != Runtime::kSuccess) throw Error(std::string(Runtime::kMalloc) + ": " + Runtime::error_string(rc));
    return p;
  }

  void free_device(void* p) override { Runtime::free(p); }

 private:
  std::string no_device() const { return std::string("no ") + Runtime::kTitle + " device visible (" + no_device_ + ")"; }

  void init() {
    int n = 0;
    auto rc = Runtime::device_count(&n);
    if (rc != Runtime::kSuccess) {
      no_device_ = Runtime::error_string(rc);
      Runtime::clear_error();
      n = 0;
    } else if (n == 0) {
      no_device_ = std::string(Runtime::kDeviceCount) + " returned 0";
    }
    devices_ = n;
    driver_.init(n);
  }

  std::once_flag init_;
  int devices_ = 0;
  std::string no_device_;
  typename Runtime::Driver driver_;
  HeapFallback heap_;
};

template <typename Runtime>
std::unique_ptr<Backend> make_gpu_backend() {
  return std::unique_ptr<Backend>(new GpuBackend<Runtime>());
}

// Page-aligned [start, end) around [base, base + size): what a dmabuf export covers.
inline void page_span(uintptr_t base, size_t size, uintptr_t page, uintptr_t* start, uintptr_t* end) {
  *start = base & ~(page - 1);
  *end = (base + size + page - 1) & ~(page - 1);
}

}  // namespace xfer

// The runtime table of a CUDA-shaped runtime API: the same calls, types and constants as CUDA's
// runtime under another prefix (cuda -> cudaMalloc, cudaSuccess; musa -> musaMalloc, musaSuccess).
// Used inside the Runtime struct; the struct still declares its Driver.
#define XFER_CUDA_SHAPED_RUNTIME(prefix, name, title)                                            \
  using Status = prefix##Error_t;                                                                \
  static constexpr Status kSuccess = prefix##Success;                                            \
  static constexpr const char* kName = name;                                                     \
  static constexpr const char* kTitle = title;                                                   \
  static constexpr const char* kDeviceCount = #prefix "GetDeviceCount";                          \
  static constexpr const char* kCopy = #prefix "Memcpy";                                         \
  static constexpr const char* kMalloc = #prefix "Malloc";                                       \
  static Status device_count(int* n) { return prefix##GetDeviceCount(n); }                       \
  static const char* error_string(Status rc) { return prefix##GetErrorString(rc); }              \
  static void clear_error() { (void)prefix##GetLastError(); }                                    \
  static std::string version() {                                                                 \
    int v = 0;                                                                                   \
    if (prefix##RuntimeGetVersion(&v) != prefix##Success) return "unknown";                      \
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);                     \
  }                                                                                              \
  static bool device_pointer(const void* p, int* device) {                                       \
    prefix##PointerAttributes a;                                                                 \
    std::memset(&a, 0, sizeof(a));                                                               \
    if (prefix##PointerGetAttributes(&a, p) != prefix##Success) {                                \
      (void)prefix##GetLastError();                                                              \
      return false;                                                                              \
    }                                                                                            \
    *device = a.device;                                                                          \
    return a.type == prefix##MemoryTypeDevice;                                                   \
  }                                                                                              \
  static void set_device(int d) { (void)prefix##SetDevice(d); }                                  \
  static Status host_alloc(void** p, size_t n) { return prefix##HostAlloc(p, n, prefix##HostAllocDefault); } \
  static void host_free(void* p) { (void)prefix##FreeHost(p); }                                  \
  static Status copy(void* d, const void* s, size_t n) { return prefix##Memcpy(d, s, n, prefix##MemcpyDefault); } \
  static Status malloc(void** p, size_t n) { return prefix##Malloc(p, n); }                      \
  static void free(void* p) { (void)prefix##Free(p); }
