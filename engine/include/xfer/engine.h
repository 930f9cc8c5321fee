// Transfer engine: registers memory, serves it to peers over TCP and issues
// batched reads and writes against peers' registered memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "xfer/master.h"

namespace xfer {

class Backend;
class Rdma;

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class MemKind { kHost, kDevice };

// What registration learnt about one registered range.
struct Region {
  uintptr_t addr = 0;
  size_t length = 0;
  MemKind kind = MemKind::kHost;
  int device = -1;
  uintptr_t alloc_base = 0;  // true allocation base (device memory)
  size_t alloc_size = 0;
  size_t offset = 0;  // addr - alloc_base
  int dmabuf_fd = -1;
  bool dmabuf = false;  // dmabuf for the whole allocation exported
  std::string dmabuf_reason;
  void* mr = nullptr;  // ibv_mr* when registered with an RDMA device
  bool rdma = false;
  std::string rdma_reason;
};

struct Request {
  uintptr_t local = 0;
  std::string segment;
  uint64_t remote = 0;  // remote virtual address inside a registered region
  size_t length = 0;
};

struct EngineOptions {
  std::string host = "127.0.0.1";  // address to listen on and advertise
  uint16_t port = 0;
  size_t chunk_bytes = 4u << 20;   // largest frame the client sends
  int window = 16;                 // frames in flight per connection
};

class Engine {
 public:
  // master: "host:port" of an xfer-master, or "" to run without one (then
  // peers are added with add_peer()).
  Engine(std::string name, std::string master, EngineOptions opts = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const std::string& name() const { return name_; }
  uint16_t port() const { return port_; }
  std::string endpoint() const;
  std::string backend() const;
  std::string runtime_version() const;
  bool gpu_direct() const { return gpu_direct_; }
  const std::string& gpu_direct_reason() const { return gpu_direct_reason_; }
  int device_count() const;

  Region register_memory(uintptr_t addr, size_t length);
  void unregister_memory(uintptr_t addr);
  std::vector<Region> regions() const;

  void add_peer(const std::string& segment, const std::string& host, uint16_t port);
  SegmentInfo peer(const std::string& segment);

  void write(const std::vector<Request>& batch);
  void read(const std::vector<Request>& batch);

  // Device buffers without a framework (self-tests on machines without torch).
  uintptr_t device_alloc(size_t n);
  void device_free(uintptr_t p);
  void copy(uintptr_t dst, uintptr_t src, size_t n);

  void close();

 private:
  struct Conn;
  struct ServerConn;
  struct Peer;

  void publish();
  void accept_loop();
  void serve(ServerConn* sc);
  bool serve_frame(ServerConn* sc);
  void transfer(const std::vector<Request>& batch, bool is_write);
  void run_on_conn(Conn* c, const std::vector<Request>& batch, bool is_write, std::string* first_error);
  Peer* get_peer(const std::string& segment);
  std::unique_ptr<Conn> acquire(Peer* p);
  void release(Peer* p, std::unique_ptr<Conn> c);
  bool local_is_device(uintptr_t addr, size_t len, int* device);

  std::string name_;
  std::string master_;
  EngineOptions opts_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Rdma> rdma_;
  bool dmabuf_enabled_ = false;
  std::string dmabuf_off_reason_;
  bool gpu_direct_ = false;
  std::string gpu_direct_reason_;

  mutable std::shared_mutex regions_mu_;
  std::map<uintptr_t, Region> regions_;

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> closing_{false};
  std::thread accept_thread_;
  std::mutex server_mu_;
  std::vector<std::unique_ptr<ServerConn>> server_conns_;

  std::mutex peers_mu_;
  std::map<std::string, std::unique_ptr<Peer>> peers_;
};

}  // namespace xfer
