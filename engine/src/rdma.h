// Optional RDMA registration of dmabufs through libibverbs, loaded with
// dlopen at run time so it is never a link-time dependency.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace xfer {

class Rdma {
 public:
  Rdma();
  ~Rdma();
  bool available() const { return pd_ != nullptr; }
  const std::string& reason() const { return reason_; }
  // ibv_reg_dmabuf_mr for a dmabuf; returns the ibv_mr* or nullptr with why.
  void* register_dmabuf(int fd, uint64_t offset, size_t length, uint64_t iova, std::string* why);
  void deregister(void* mr);

 private:
  void* lib_ = nullptr;
  void* ctx_ = nullptr;
  void* pd_ = nullptr;
  std::string reason_;
};

}  // namespace xfer
