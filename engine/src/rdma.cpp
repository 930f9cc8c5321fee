#include "rdma.h"

#include <dlfcn.h>

#include <cstring>

namespace xfer {
namespace {

// The few libibverbs entry points used, declared here so that building needs
// no rdma-core headers. struct ibv_mr's leading layout is part of its ABI.
struct ibv_device;
struct ibv_context;
struct ibv_pd;
struct ibv_mr_prefix {
  ibv_context* context;
  ibv_pd* pd;
  void* addr;
  size_t length;
  uint32_t handle;
  uint32_t lkey;
  uint32_t rkey;
};

using get_device_list_t = ibv_device** (*)(int*);
using free_device_list_t = void (*)(ibv_device**);
using get_device_name_t = const char* (*)(ibv_device*);
using open_device_t = ibv_context* (*)(ibv_device*);
using close_device_t = int (*)(ibv_context*);
using alloc_pd_t = ibv_pd* (*)(ibv_context*);
using dealloc_pd_t = int (*)(ibv_pd*);
using reg_dmabuf_mr_t = void* (*)(ibv_pd*, uint64_t, size_t, uint64_t, int, int);
using dereg_mr_t = int (*)(void*);

constexpr int kAccess = 1 /*LOCAL_WRITE*/ | 2 /*REMOTE_WRITE*/ | 4 /*REMOTE_READ*/;

}  // namespace

Rdma::Rdma() {
  lib_ = ::dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib_) {
    reason_ = "no RDMA device (libibverbs.so.1 not found)";
    return;
  }
  auto get_list = reinterpret_cast<get_device_list_t>(::dlsym(lib_, "ibv_get_device_list"));
  auto free_list = reinterpret_cast<free_device_list_t>(::dlsym(lib_, "ibv_free_device_list"));
  auto dev_name = reinterpret_cast<get_device_name_t>(::dlsym(lib_, "ibv_get_device_name"));
  auto open_dev = reinterpret_cast<open_device_t>(::dlsym(lib_, "ibv_open_device"));
  auto alloc_pd = reinterpret_cast<alloc_pd_t>(::dlsym(lib_, "ibv_alloc_pd"));
  if (!get_list || !free_list || !open_dev || !alloc_pd || !::dlsym(lib_, "ibv_reg_dmabuf_mr")) {
    reason_ = "no RDMA device (libibverbs lacks ibv_reg_dmabuf_mr; rdma-core >= 34 needed)";
    return;
  }
  int n = 0;
  ibv_device** list = get_list(&n);
  if (!list || n == 0) {
    if (list) free_list(list);
    reason_ = "no RDMA device";
    return;
  }
  std::string name = dev_name ? dev_name(list[0]) : "rdma0";
  ibv_context* ctx = open_dev(list[0]);
  free_list(list);
  if (!ctx) {
    reason_ = "no RDMA device (cannot open " + name + ")";
    return;
  }
  ibv_pd* pd = alloc_pd(ctx);
  if (!pd) {
    reinterpret_cast<close_device_t>(::dlsym(lib_, "ibv_close_device"))(ctx);
    reason_ = "no RDMA device (cannot allocate a protection domain on " + name + ")";
    return;
  }
  ctx_ = ctx;
  pd_ = pd;
  reason_ = "RDMA device " + name;
}

Rdma::~Rdma() {
  if (pd_) reinterpret_cast<dealloc_pd_t>(::dlsym(lib_, "ibv_dealloc_pd"))(static_cast<ibv_pd*>(pd_));
  if (ctx_) reinterpret_cast<close_device_t>(::dlsym(lib_, "ibv_close_device"))(static_cast<ibv_context*>(ctx_));
  // lib_ stays loaded: providers register atexit handlers.
}

void* Rdma::register_dmabuf(int fd, uint64_t offset, size_t length, uint64_t iova, std::string* why) {
  if (!pd_) {
    *why = reason_;
    return nullptr;
  }
  auto reg = reinterpret_cast<reg_dmabuf_mr_t>(::dlsym(lib_, "ibv_reg_dmabuf_mr"));
  void* mr = reg(static_cast<ibv_pd*>(pd_), offset, length, iova, fd, kAccess);
  if (!mr) {
    *why = std::string("ibv_reg_dmabuf_mr failed: ") + std::strerror(errno);
    return nullptr;
  }
  *why = "registered with " + reason_ + " (rkey " +
         std::to_string(static_cast<ibv_mr_prefix*>(mr)->rkey) + ")";
  return mr;
}

void Rdma::deregister(void* mr) {
  if (mr && lib_) reinterpret_cast<dereg_mr_t>(::dlsym(lib_, "ibv_dereg_mr"))(mr);
}

}  // namespace xfer
