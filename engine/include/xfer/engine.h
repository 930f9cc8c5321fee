// Transfer engine: registers memory, serves it to peers over TCP and issues
// batched reads and writes against peers' registered memory.
#pragma once

#include <atomic>
#include <condition_variable>
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
  // Peer connections served at once (one thread each). More are answered
  // with a kBusy frame and closed. 0: $XFER_MAX_CONNECTIONS, else 256;
  // clamped to what RLIMIT_NOFILE leaves room for.
  int max_connections = 0;
  // A connection (served or used) that makes no progress for this long is
  // closed. 0: $XFER_IDLE_TIMEOUT_MS, else 120000; negative: never.
  int idle_timeout_ms = 0;
  // How often the engine checks on the master and re-publishes its segment
  // when the master lost it (restart) or a publish failed. 0:
  // $XFER_MASTER_HEARTBEAT_MS, else 5000; negative: no background check.
  int master_heartbeat_ms = 0;
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

  // Limits in force (defaults and environment resolved).
  const EngineOptions& options() const { return opts_; }
  // Peer connections being served now, and connections refused so far.
  size_t served_connections() const;
  uint64_t refused_connections() const { return refused_; }

 private:
  struct Conn;
  struct ServerConn;
  struct Peer;
  struct RegionEntry;
  using RegionPtr = std::shared_ptr<RegionEntry>;
  enum class Io { kOk, kDead, kLost };

  void publish();
  void keeper_loop();
  RegionPtr find_entry(uint64_t addr, uint64_t len) const;
  void retire(const RegionPtr& e);
  void accept_loop();
  void admit(int fd);
  void refuse(int fd, const std::string& why);
  void reap_locked();
  static void* serve_entry(void* arg);
  void serve(ServerConn* sc);
  bool serve_frame(ServerConn* sc);
  Io recv_to_region(int fd, RegionEntry& e, uint64_t addr, uint64_t len, uint64_t* done);
  Io send_from_region(int fd, RegionEntry& e, uint64_t addr, uint64_t len, const unsigned char* hdr,
                      size_t hdr_len, bool* hdr_sent);
  bool drain(ServerConn* sc, uint64_t n);
  void transfer(const std::vector<Request>& batch, bool is_write);
  size_t run_on_conn(Conn* c, const std::vector<Request>& batch, bool is_write, std::string* error);
  Peer* get_peer(const std::string& segment);
  std::unique_ptr<Conn> connect_peer(Peer* p, const std::string& segment, bool* reused);
  std::unique_ptr<Conn> acquire(Peer* p, bool allow_idle, bool* reused);
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

  // Registered regions. A transfer pins the region it touches only around
  // each non-blocking socket call or local copy (never across a wait for a
  // peer); unregister removes the region from the map, marks it dead and
  // waits for those pins only.
  mutable std::shared_mutex regions_mu_;
  std::map<uintptr_t, RegionPtr> regions_;

  std::unique_ptr<MasterClient> master_client_;  // one connection, reused
  std::mutex publish_mu_;                         // one PUT at a time, newest state
  std::atomic<bool> publish_dirty_{false};        // the master may not have our state
  uint64_t published_generation_ = 0;             // master connection the last PUT went over
  std::thread keeper_thread_;
  std::mutex keeper_mu_;
  std::condition_variable keeper_cv_;

  int listen_fd_ = -1;
  int wake_fd_ = -1;   // eventfd: wakes the accept loop on close()
  int spare_fd_ = -1;  // spent on refusing a connection when out of descriptors
  uint16_t port_ = 0;
  std::atomic<bool> closing_{false};
  std::thread accept_thread_;
  mutable std::mutex server_mu_;
  std::vector<std::unique_ptr<ServerConn>> server_conns_;
  std::atomic<uint64_t> refused_{0};

  std::mutex peers_mu_;
  std::map<std::string, std::unique_ptr<Peer>> peers_;
};

}  // namespace xfer
