#include "xfer/engine.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <system_error>

#include "backend.h"
#include "rdma.h"
#include "xfer/net.h"
#include "xfer/wire.h"

namespace xfer {

namespace {

constexpr int kDefaultMaxConnections = 256;
constexpr int kDefaultIdleTimeoutMs = 120000;
constexpr int kDefaultHeartbeatMs = 5000;
constexpr int kConnectTimeoutMs = 10000;
// Descriptors left for the listening socket, outgoing connections, the
// master connection, dmabufs and whatever else the process opens.
constexpr long kReservedFds = 64;
// Serving threads need little stack; 2 MiB instead of the usual 8 MiB lets
// an address-space limit admit four times as many before refusals start.
constexpr size_t kServeStack = 2u << 20;
constexpr size_t kDrainChunk = 1u << 20;

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

// Integer from the environment; `fallback` when unset or not an integer.
int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < -(1L << 30) || n > (1L << 30)) return fallback;
  return static_cast<int>(n);
}

bool valid_segment_name(const std::string& s) {
  if (s.empty() || s.size() > 256) return false;
  for (char c : s)
    if (c <= ' ' || c == 0x7f) return false;
  return true;
}

std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace

struct Engine::RegionEntry {
  Region info;
  std::mutex mu;
  std::condition_variable cv;
  int users = 0;      // transfers inside a socket call or copy on this region now
  bool dead = false;  // unregistered: no new pins

  bool pin() {
    std::lock_guard<std::mutex> lk(mu);
    if (dead) return false;
    ++users;
    return true;
  }
  void unpin() {
    std::lock_guard<std::mutex> lk(mu);
    if (--users == 0 && dead) cv.notify_all();
  }
};

struct Engine::Conn {
  Backend* backend = nullptr;
  int fd = -1;
  void* staging = nullptr;
  size_t staging_size = 0;
  bool broken = false;
  bool refused = false;
  ~Conn() {
    net::close_fd(fd);
    if (staging) backend->free_pinned(staging);
  }
  void* stage(size_t n) {
    if (staging_size < n) {
      if (staging) backend->free_pinned(staging);
      staging = nullptr;
      staging_size = 0;
      staging = backend->alloc_pinned(n);
      staging_size = n;
    }
    return staging;
  }
};

struct Engine::ServerConn {
  Engine* engine = nullptr;
  int fd = -1;  // set to -1 (under server_mu_) by the serving thread before it closes it
  pthread_t thread{};
  std::atomic<bool> done{false};
  void* staging = nullptr;
  size_t staging_size = 0;
  std::vector<char> drain;
};

struct Engine::Peer {
  std::mutex mu;
  std::string host;
  uint16_t port = 0;
  std::vector<std::unique_ptr<Conn>> idle;
};

Engine::Engine(std::string name, std::string master, EngineOptions opts)
    : name_(std::move(name)), master_(std::move(master)), opts_(opts) {
  if (!valid_segment_name(name_)) throw Error("engine name must be 1-256 printable characters without spaces");
  if (opts_.chunk_bytes == 0 || opts_.chunk_bytes > wire::kMaxFrame) opts_.chunk_bytes = 4u << 20;
  if (opts_.window < 1) opts_.window = 1;
  if (opts_.max_connections <= 0) opts_.max_connections = env_int("XFER_MAX_CONNECTIONS", kDefaultMaxConnections);
  if (opts_.max_connections <= 0) opts_.max_connections = kDefaultMaxConnections;
  const long room = std::max(1L, net::fd_limit() - kReservedFds);
  if (opts_.max_connections > room) opts_.max_connections = static_cast<int>(room);
  if (opts_.idle_timeout_ms == 0) opts_.idle_timeout_ms = env_int("XFER_IDLE_TIMEOUT_MS", kDefaultIdleTimeoutMs);
  if (opts_.idle_timeout_ms <= 0) opts_.idle_timeout_ms = -1;
  if (opts_.master_heartbeat_ms == 0)
    opts_.master_heartbeat_ms = env_int("XFER_MASTER_HEARTBEAT_MS", kDefaultHeartbeatMs);
  if (opts_.master_heartbeat_ms <= 0) opts_.master_heartbeat_ms = -1;
  if (!master_.empty()) {
    try {
      master_client_.reset(new MasterClient(master_));
    } catch (const std::exception& e) {
      throw Error(e.what());
    }
  }

  backend_ = make_backend();
  if (env_flag("XFER_DISABLE_DMABUF")) {
    dmabuf_enabled_ = false;
    dmabuf_off_reason_ = "dmabuf export disabled by XFER_DISABLE_DMABUF=1";
  } else {
    dmabuf_enabled_ = backend_->dmabuf_supported(&dmabuf_off_reason_);
  }
  rdma_.reset(new Rdma());
  gpu_direct_ = dmabuf_enabled_ && rdma_->available();
  if (!dmabuf_enabled_)
    gpu_direct_reason_ = dmabuf_off_reason_;
  else if (!rdma_->available())
    gpu_direct_reason_ = "dmabuf export available, but " + rdma_->reason();
  else
    gpu_direct_reason_ = "dmabuf export and " + rdma_->reason();

  std::string err;
  listen_fd_ = net::listen_tcp(opts_.host, opts_.port, &port_, &err);
  if (listen_fd_ < 0) throw Error("engine '" + name_ + "': " + err);
  net::set_nonblocking(listen_fd_, true);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    net::close_fd(listen_fd_);
    throw Error("engine '" + name_ + "': eventfd: " + std::strerror(errno));
  }
  spare_fd_ = net::open_spare_fd();
  try {
    accept_thread_ = std::thread([this] { accept_loop(); });
  } catch (const std::system_error& e) {
    net::close_fd(listen_fd_);
    net::close_fd(wake_fd_);
    net::close_fd(spare_fd_);
    throw Error("engine '" + name_ + "': cannot start its accept thread: " + e.what());
  }
  try {
    publish();
    if (master_client_ && opts_.master_heartbeat_ms > 0) keeper_thread_ = std::thread([this] { keeper_loop(); });
  } catch (const std::system_error& e) {
    close();
    throw Error("engine '" + name_ + "': cannot start its master keeper thread: " + e.what());
  } catch (...) {
    close();
    throw;
  }
}

Engine::~Engine() { close(); }

std::string Engine::endpoint() const { return opts_.host + ":" + std::to_string(port_); }
std::string Engine::backend() const { return backend_->name(); }
std::string Engine::runtime_version() const { return backend_->runtime_version(); }
int Engine::device_count() const { return backend_->device_count(); }

void Engine::close() {
  if (closing_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lk(keeper_mu_);
  }
  keeper_cv_.notify_all();
  if (keeper_thread_.joinable()) keeper_thread_.join();
  if (master_client_) {
    try {
      master_client_->del(name_);
    } catch (...) {
    }
    master_client_->disconnect();
  }
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    ssize_t ignored = ::write(wake_fd_, &one, sizeof(one));
    (void)ignored;
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  net::close_fd(listen_fd_);
  listen_fd_ = -1;
  std::vector<std::unique_ptr<ServerConn>> conns;
  {
    std::lock_guard<std::mutex> lk(server_mu_);
    for (auto& sc : server_conns_)
      if (sc->fd >= 0) ::shutdown(sc->fd, SHUT_RDWR);
    conns.swap(server_conns_);
  }
  for (auto& sc : conns) pthread_join(sc->thread, nullptr);  // each closes its own socket
  conns.clear();
  {
    std::lock_guard<std::mutex> lk(peers_mu_);
    peers_.clear();
  }
  std::map<uintptr_t, RegionPtr> regions;
  {
    std::unique_lock<std::shared_mutex> lk(regions_mu_);
    regions.swap(regions_);
  }
  for (auto& kv : regions) retire(kv.second);
  net::close_fd(wake_fd_);
  wake_fd_ = -1;
  net::close_fd(spare_fd_);
  spare_fd_ = -1;
}

size_t Engine::served_connections() const {
  std::lock_guard<std::mutex> lk(server_mu_);
  size_t n = 0;
  for (auto& sc : server_conns_)
    if (!sc->done) ++n;
  return n;
}

// ---------------------------------------------------------------- registration

// Region containing [addr, addr + len), or null.
Engine::RegionPtr Engine::find_entry(uint64_t addr, uint64_t len) const {
  if (len == 0 || addr + len < addr) return nullptr;
  std::shared_lock<std::shared_mutex> lk(regions_mu_);
  auto it = regions_.upper_bound(static_cast<uintptr_t>(addr));
  if (it == regions_.begin()) return nullptr;
  --it;
  const Region& r = it->second->info;
  if (addr < r.addr || addr + len > r.addr + r.length) return nullptr;
  return it->second;
}

// Called once the region is out of the map: no new pins; waits for the
// socket calls and copies in flight on it (each bounded: non-blocking socket
// calls, local memcpy or device copy), then releases what registration took.
void Engine::retire(const RegionPtr& e) {
  {
    std::unique_lock<std::mutex> lk(e->mu);
    e->dead = true;
    e->cv.wait(lk, [&] { return e->users == 0; });
  }
  if (e->info.mr) rdma_->deregister(e->info.mr);
  net::close_fd(e->info.dmabuf_fd);
  e->info.mr = nullptr;
  e->info.dmabuf_fd = -1;
}

Region Engine::register_memory(uintptr_t addr, size_t length) {
  if (closing_) throw Error("engine is closed");
  if (addr == 0 || length == 0) throw Error("register: address and length must be nonzero");
  if (addr + length < addr) throw Error("register: range wraps around the address space");
  Region r;
  r.addr = addr;
  r.length = length;
  PointerInfo info = backend_->query(reinterpret_cast<const void*>(addr), length);
  if (info.device) {
    r.kind = MemKind::kDevice;
    r.device = info.device_id;
    r.alloc_base = info.alloc_base;
    r.alloc_size = info.alloc_size;
    if (addr < r.alloc_base || addr + length > r.alloc_base + r.alloc_size)
      throw Error("register: range extends past its device allocation");
    r.offset = addr - r.alloc_base;
    if (dmabuf_enabled_) {
      r.dmabuf_fd = backend_->export_dmabuf(r.alloc_base, r.alloc_size, r.device, &r.dmabuf_reason);
      r.dmabuf = r.dmabuf_fd >= 0;
    } else {
      r.dmabuf_reason = dmabuf_off_reason_;
    }
    if (r.dmabuf && rdma_->available()) {
      r.mr = rdma_->register_dmabuf(r.dmabuf_fd, 0, r.alloc_size, r.alloc_base, &r.rdma_reason);
      r.rdma = r.mr != nullptr;
    } else {
      r.rdma_reason = r.dmabuf ? rdma_->reason() : "no dmabuf to register";
    }
  } else {
    r.kind = MemKind::kHost;
    r.alloc_base = addr;
    r.alloc_size = length;
    r.dmabuf_reason = "host memory (served directly)";
    r.rdma_reason = info.note.empty() ? "host memory is served over TCP" : info.note;
  }
  RegionPtr entry = std::make_shared<RegionEntry>();
  entry->info = r;
  {
    std::unique_lock<std::shared_mutex> lk(regions_mu_);
    auto it = regions_.lower_bound(addr);
    bool overlap = (it != regions_.end() && it->second->info.addr < addr + length);
    if (!overlap && it != regions_.begin()) {
      auto prev = std::prev(it);
      overlap = prev->second->info.addr + prev->second->info.length > addr;
    }
    if (overlap) {
      if (r.mr) rdma_->deregister(r.mr);
      net::close_fd(r.dmabuf_fd);
      throw Error("register: range overlaps an already registered region");
    }
    regions_[addr] = entry;
  }
  try {
    publish();
  } catch (const Error& e) {
    // Peers find regions through the master: one it does not list is not
    // registered. Roll back; the keeper re-publishes once the master is back.
    {
      std::unique_lock<std::shared_mutex> lk(regions_mu_);
      auto it = regions_.find(addr);
      if (it != regions_.end() && it->second == entry) regions_.erase(it);
    }
    retire(entry);
    throw Error(std::string("register: the region was not registered: ") + e.what());
  }
  return r;
}

void Engine::unregister_memory(uintptr_t addr) {
  RegionPtr entry;
  {
    std::unique_lock<std::shared_mutex> lk(regions_mu_);
    auto it = regions_.find(addr);
    if (it == regions_.end()) throw Error("unregister: no region registered at this address");
    entry = it->second;
    regions_.erase(it);
  }
  retire(entry);
  // The region is no longer served whatever the master says; when the master
  // cannot be told now, the keeper tells it later (publish_dirty_).
  try {
    publish();
  } catch (const Error&) {
  }
}

std::vector<Region> Engine::regions() const {
  std::shared_lock<std::shared_mutex> lk(regions_mu_);
  std::vector<Region> out;
  for (auto& kv : regions_) out.push_back(kv.second->info);
  return out;
}

void Engine::publish() {
  if (!master_client_) return;
  // One PUT at a time, each carrying the state when it is sent: a slower,
  // older snapshot never overwrites a newer one at the master.
  std::lock_guard<std::mutex> plk(publish_mu_);
  SegmentInfo info;
  info.host = opts_.host;
  info.port = port_;
  {
    std::shared_lock<std::shared_mutex> lk(regions_mu_);
    for (auto& kv : regions_) {
      RegionInfo ri;
      ri.addr = kv.second->info.addr;
      ri.length = kv.second->info.length;
      ri.kind = kv.second->info.kind == MemKind::kDevice ? "device" : "host";
      info.regions.push_back(ri);
    }
  }
  try {
    master_client_->put(name_, info);
    published_generation_ = master_client_->connections_opened();
    publish_dirty_ = false;
  } catch (const std::exception& e) {
    publish_dirty_ = true;
    throw Error(e.what());
  }
}

// Every heartbeat: when a publish failed, or the master connection had to be
// re-opened since the last PUT (the master restarted, or closed an idle
// connection), publish again; otherwise a PING keeps the connection alive
// and finds out.
void Engine::keeper_loop() {
  const auto period = std::chrono::milliseconds(opts_.master_heartbeat_ms);
  std::unique_lock<std::mutex> lk(keeper_mu_);
  while (!closing_) {
    if (keeper_cv_.wait_for(lk, period, [&] { return closing_.load(); })) break;
    lk.unlock();
    try {
      bool need = publish_dirty_;
      if (!need) {
        master_client_->ping();
        std::lock_guard<std::mutex> plk(publish_mu_);
        need = master_client_->connections_opened() != published_generation_;
      }
      if (need && !closing_) publish();
    } catch (const std::exception&) {
      publish_dirty_ = true;
    }
    lk.lock();
  }
}

uintptr_t Engine::device_alloc(size_t n) { return reinterpret_cast<uintptr_t>(backend_->alloc_device(n)); }
void Engine::device_free(uintptr_t p) { backend_->free_device(reinterpret_cast<void*>(p)); }
void Engine::copy(uintptr_t dst, uintptr_t src, size_t n) {
  backend_->copy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
}

// ---------------------------------------------------------------- server side

void Engine::accept_loop() {
  while (!closing_) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int rc = ::poll(fds, 2, 1000);
    if (closing_ || (rc > 0 && fds[1].revents)) break;
    {
      std::lock_guard<std::mutex> lk(server_mu_);
      reap_locked();
    }
    if (rc <= 0) continue;
    if (fds[0].revents & (POLLERR | POLLNVAL)) break;
    if (!(fds[0].revents & POLLIN)) continue;
    for (int i = 0; i < 64 && !closing_; ++i) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        admit(fd);
        continue;
      }
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: answer the oldest pending peer with the spare
        // one, then back off instead of spinning on a readable socket.
        if (spare_fd_ >= 0) {
          net::close_fd(spare_fd_);
          spare_fd_ = -1;
          int pending = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
          if (pending >= 0) refuse(pending, "engine '" + name_ + "' is out of file descriptors");
          spare_fd_ = net::open_spare_fd();
        }
        pollfd w{wake_fd_, POLLIN, 0};
        ::poll(&w, 1, 100);
      }
      break;  // EAGAIN: nothing pending
    }
  }
}

void Engine::refuse(int fd, const std::string& why) {
  std::string reason = why.substr(0, wire::kMaxReason);
  wire::Header h;
  h.opcode = wire::kResponse;
  h.status = wire::kBusy;
  h.length = reason.size();
  unsigned char hb[wire::kHeaderSize];
  wire::encode(h, hb);
  std::string msg(reinterpret_cast<const char*>(hb), sizeof(hb));
  msg += reason;
  ssize_t ignored = ::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)ignored;
  net::close_fd(fd);
  ++refused_;
}

void Engine::reap_locked() {
  for (auto it = server_conns_.begin(); it != server_conns_.end();) {
    if ((*it)->done) {
      pthread_join((*it)->thread, nullptr);
      it = server_conns_.erase(it);
    } else {
      ++it;
    }
  }
}

void Engine::admit(int fd) {
  net::tune_socket(fd);
  net::set_io_timeout(fd, opts_.idle_timeout_ms);
  std::string why;
  {
    std::lock_guard<std::mutex> lk(server_mu_);
    reap_locked();
    if (server_conns_.size() >= static_cast<size_t>(opts_.max_connections)) {
      why = "engine '" + name_ + "' serves at most " + std::to_string(opts_.max_connections) +
            " connections; try again later";
    } else {
      std::unique_ptr<ServerConn> sc;
      try {
        sc.reset(new ServerConn());
        server_conns_.reserve(server_conns_.size() + 1);
      } catch (const std::bad_alloc&) {
        why = "engine '" + name_ + "' is out of memory";
      }
      if (sc) {
        sc->engine = this;
        sc->fd = fd;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, kServeStack);
        int err = pthread_create(&sc->thread, &attr, &Engine::serve_entry, sc.get());
        pthread_attr_destroy(&attr);
        if (err == 0) {
          server_conns_.push_back(std::move(sc));
          return;
        }
        why = "engine '" + name_ + "' cannot start a thread to serve this connection: " + std::strerror(err);
      }
    }
  }
  refuse(fd, why);
}

void* Engine::serve_entry(void* arg) {
  ServerConn* sc = static_cast<ServerConn*>(arg);
  sc->engine->serve(sc);
  return nullptr;
}

void Engine::serve(ServerConn* sc) {
  try {
    while (!closing_ && serve_frame(sc)) {
    }
  } catch (...) {
    // Out of memory for staging, a backend that threw: drop this connection only.
  }
  int fd;
  {
    std::lock_guard<std::mutex> lk(server_mu_);
    fd = sc->fd;
    sc->fd = -1;
  }
  net::close_fd(fd);
  if (sc->staging) backend_->free_pinned(sc->staging);
  sc->staging = nullptr;
  sc->staging_size = 0;
  std::vector<char>().swap(sc->drain);
  sc->done = true;
}

// Receives len bytes from fd straight into registered host memory. The region
// is pinned only around each non-blocking recv (a kernel copy of what has
// already arrived); waiting for the peer happens unpinned, in poll().
Engine::Io Engine::recv_to_region(int fd, RegionEntry& e, uint64_t addr, uint64_t len, uint64_t* done) {
  while (*done < len) {
    if (!e.pin()) return Io::kDead;
    ssize_t k = ::recv(fd, reinterpret_cast<char*>(addr + *done), static_cast<size_t>(len - *done), MSG_DONTWAIT);
    int err = errno;
    e.unpin();
    if (k > 0) {
      *done += static_cast<uint64_t>(k);
      continue;
    }
    if (k == 0) return Io::kLost;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) {
      if (!net::wait_fd(fd, POLLIN, opts_.idle_timeout_ms)) return Io::kLost;
      continue;
    }
    return Io::kLost;
  }
  return Io::kOk;
}

// Sends hdr, then len bytes of registered host memory, pinning the region
// only around each non-blocking send.
Engine::Io Engine::send_from_region(int fd, RegionEntry& e, uint64_t addr, uint64_t len, const unsigned char* hdr,
                                    size_t hdr_len, bool* hdr_sent) {
  size_t hdr_left = hdr_len;
  uint64_t done = 0;
  *hdr_sent = false;
  while (hdr_left > 0 || done < len) {
    if (!e.pin()) return Io::kDead;
    struct iovec iov[2];
    int n = 0;
    if (hdr_left > 0) iov[n++] = {const_cast<unsigned char*>(hdr) + (hdr_len - hdr_left), hdr_left};
    if (done < len) iov[n++] = {reinterpret_cast<char*>(addr + done), static_cast<size_t>(len - done)};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t k = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    int err = errno;
    e.unpin();
    if (k > 0) {
      size_t moved = static_cast<size_t>(k);
      size_t h = std::min(moved, hdr_left);
      hdr_left -= h;
      done += moved - h;
      *hdr_sent = true;
      continue;
    }
    if (k < 0 && err == EINTR) continue;
    if (k < 0 && (err == EAGAIN || err == EWOULDBLOCK)) {
      if (!net::wait_fd(fd, POLLOUT, opts_.idle_timeout_ms)) return Io::kLost;
      continue;
    }
    return Io::kLost;
  }
  return Io::kOk;
}

// Consumes a refused WRITE's payload so the connection stays in sync.
bool Engine::drain(ServerConn* sc, uint64_t n) {
  if (n == 0) return true;
  if (sc->drain.empty()) sc->drain.resize(kDrainChunk);
  for (uint64_t done = 0; done < n;) {
    size_t k = static_cast<size_t>(std::min<uint64_t>(n - done, sc->drain.size()));
    if (!net::recv_all(sc->fd, sc->drain.data(), k)) return false;
    done += k;
  }
  return true;
}

// One request: false closes the connection (malformed frame, peer gone or
// silent longer than the idle timeout, region unregistered mid-READ).
// No lock is held while waiting on the peer.
bool Engine::serve_frame(ServerConn* sc) {
  unsigned char hb[wire::kHeaderSize];
  if (!net::recv_all(sc->fd, hb, sizeof(hb))) return false;
  wire::Header h;
  std::string why;
  if (!wire::decode(hb, &h, &why)) return false;
  if ((h.opcode != wire::kWrite && h.opcode != wire::kRead) || h.status != 0) return false;

  wire::Header resp;
  resp.opcode = wire::kResponse;
  resp.request_id = h.request_id;
  resp.addr = h.addr;
  unsigned char rb[wire::kHeaderSize];

  RegionPtr entry = find_entry(h.addr, h.length);
  uint32_t status = h.length == 0 ? wire::kInvalid : (entry ? wire::kOk : wire::kOutOfBounds);
  const bool device = entry && entry->info.kind == MemKind::kDevice;
  auto staging = [&]() -> char* {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(opts_.chunk_bytes, h.length));
    if (sc->staging_size < want) {
      if (sc->staging) backend_->free_pinned(sc->staging);
      sc->staging = nullptr;
      sc->staging_size = 0;
      sc->staging = backend_->alloc_pinned(want);
      sc->staging_size = want;
    }
    return static_cast<char*>(sc->staging);
  };

  if (h.opcode == wire::kWrite) {
    uint64_t done = 0;
    if (status == wire::kOk && !device) {
      Io io = recv_to_region(sc->fd, *entry, h.addr, h.length, &done);
      if (io == Io::kLost) return false;
      if (io == Io::kDead) status = wire::kOutOfBounds;  // unregistered meanwhile
    } else if (status == wire::kOk) {
      char* buf = staging();
      while (done < h.length) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(h.length - done, sc->staging_size));
        if (!net::recv_all(sc->fd, buf, n)) return false;
        if (status == wire::kOk) {
          if (!entry->pin()) {
            status = wire::kOutOfBounds;
          } else {
            try {
              backend_->copy(reinterpret_cast<void*>(h.addr + done), buf, n);
            } catch (const std::exception&) {
              status = wire::kDeviceError;
            }
            entry->unpin();
          }
        }
        done += n;
      }
    }
    if (!drain(sc, h.length - done)) return false;
    resp.status = status;
    wire::encode(resp, rb);
    return net::send_all(sc->fd, rb, sizeof(rb));
  }

  // READ
  auto refuse_read = [&](uint32_t st) {
    resp.status = st;
    resp.length = 0;
    wire::encode(resp, rb);
    return net::send_all(sc->fd, rb, sizeof(rb));
  };
  if (status != wire::kOk) return refuse_read(status);
  if (!device) {
    resp.length = h.length;
    wire::encode(resp, rb);
    bool hdr_sent = false;
    Io io = send_from_region(sc->fd, *entry, h.addr, h.length, rb, sizeof(rb), &hdr_sent);
    if (io == Io::kDead && !hdr_sent) return refuse_read(wire::kOutOfBounds);
    return io == Io::kOk;  // dead after the header promised the payload: close, the reader sees it
  }
  char* buf = staging();
  for (uint64_t done = 0; done < h.length;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(h.length - done, sc->staging_size));
    if (!entry->pin()) {
      if (done != 0) return false;
      return refuse_read(wire::kOutOfBounds);
    }
    bool copied = true;
    try {
      backend_->copy(buf, reinterpret_cast<const void*>(h.addr + done), n);
    } catch (const std::exception&) {
      copied = false;
    }
    entry->unpin();
    if (!copied) {
      if (done != 0) return false;  // header already promised the payload
      return refuse_read(wire::kDeviceError);
    }
    if (done == 0) {
      resp.length = h.length;
      wire::encode(resp, rb);
      struct iovec iov[2] = {{rb, sizeof(rb)}, {buf, n}};
      if (!net::writev_all(sc->fd, iov, 2)) return false;
    } else if (!net::send_all(sc->fd, buf, n)) {
      return false;
    }
    done += n;
  }
  return true;
}

// ---------------------------------------------------------------- client side

void Engine::add_peer(const std::string& segment, const std::string& host, uint16_t port) {
  std::lock_guard<std::mutex> lk(peers_mu_);
  auto& p = peers_[segment];
  if (!p) p.reset(new Peer());
  std::lock_guard<std::mutex> plk(p->mu);
  p->host = host;
  p->port = port;
  p->idle.clear();
}

SegmentInfo Engine::peer(const std::string& segment) {
  SegmentInfo info;
  if (master_client_) {
    bool found = false;
    try {
      found = master_client_->get(segment, &info);
    } catch (const std::exception& e) {
      throw Error(e.what());
    }
    if (!found) throw Error("segment '" + segment + "' is not known to the master");
    return info;
  }
  Peer* p = get_peer(segment);
  std::lock_guard<std::mutex> lk(p->mu);
  info.host = p->host;
  info.port = p->port;
  return info;
}

Engine::Peer* Engine::get_peer(const std::string& segment) {
  {
    std::lock_guard<std::mutex> lk(peers_mu_);
    auto it = peers_.find(segment);
    if (it != peers_.end()) return it->second.get();
    if (!master_client_) throw Error("unknown segment '" + segment + "' (no master; use add_peer)");
  }
  // Ask the master without holding peers_mu_ (other transfers go on).
  SegmentInfo info;
  bool found = false;
  try {
    found = master_client_->get(segment, &info);
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
  if (!found) throw Error("segment '" + segment + "' is not known to the master");
  std::lock_guard<std::mutex> lk(peers_mu_);
  auto& p = peers_[segment];
  if (!p) {
    p.reset(new Peer());
    p->host = info.host;
    p->port = info.port;
  }
  return p.get();
}

std::unique_ptr<Engine::Conn> Engine::acquire(Peer* p, bool allow_idle, bool* reused) {
  std::string host;
  uint16_t port;
  *reused = false;
  std::vector<std::unique_ptr<Conn>> stale;  // closed outside the lock
  {
    std::lock_guard<std::mutex> lk(p->mu);
    while (allow_idle && !p->idle.empty()) {
      std::unique_ptr<Conn> c = std::move(p->idle.back());
      p->idle.pop_back();
      // An idle connection with something to read is stale: the peer closed
      // it (idle timeout, restart) or refused it.
      pollfd pf{c->fd, POLLIN, 0};
      if (::poll(&pf, 1, 0) == 0) {
        *reused = true;
        return c;
      }
      stale.push_back(std::move(c));
    }
    host = p->host;
    port = p->port;
  }
  stale.clear();
  std::string err;
  int fd = net::connect_tcp(host, port, &err, kConnectTimeoutMs);
  if (fd < 0) throw Error(err);
  net::set_io_timeout(fd, opts_.idle_timeout_ms);
  std::unique_ptr<Conn> c(new Conn());
  c->backend = backend_.get();
  c->fd = fd;
  return c;
}

std::unique_ptr<Engine::Conn> Engine::connect_peer(Peer* p, const std::string& seg, bool* reused) {
  try {
    return acquire(p, true, reused);
  } catch (const Error&) {
    // The peer may have restarted elsewhere: ask the master once more.
    if (!master_client_) throw;
    SegmentInfo info;
    bool found = false;
    try {
      found = master_client_->get(seg, &info);
    } catch (const std::exception& e) {
      throw Error(e.what());
    }
    if (!found) throw Error("segment '" + seg + "' is gone from the master");
    {
      std::lock_guard<std::mutex> lk(p->mu);
      p->host = info.host;
      p->port = info.port;
    }
    return acquire(p, false, reused);
  }
}

void Engine::release(Peer* p, std::unique_ptr<Conn> c) {
  if (!c || c->broken) return;
  std::lock_guard<std::mutex> lk(p->mu);
  if (p->idle.size() < 8) p->idle.push_back(std::move(c));
}

bool Engine::local_is_device(uintptr_t addr, size_t len, int* device) {
  if (RegionPtr e = find_entry(addr, len)) {
    *device = e->info.device;
    return e->info.kind == MemKind::kDevice;
  }
  PointerInfo info = backend_->query(reinterpret_cast<const void*>(addr), len);
  *device = info.device_id;
  return info.device;
}

void Engine::write(const std::vector<Request>& batch) { transfer(batch, true); }
void Engine::read(const std::vector<Request>& batch) { transfer(batch, false); }

void Engine::transfer(const std::vector<Request>& batch, bool is_write) {
  if (closing_) throw Error("engine is closed");
  // Keep the caller's order within each segment; segments go one after another.
  std::vector<std::string> order;
  std::map<std::string, std::vector<Request>> by_segment;
  for (const Request& r : batch) {
    if (r.length == 0) continue;
    if (r.local == 0) throw Error("transfer: local pointer is null");
    auto& v = by_segment[r.segment];
    if (v.empty()) order.push_back(r.segment);
    v.push_back(r);
  }
  std::string first_error;
  for (const std::string& seg : order) {
    Peer* p = get_peer(seg);
    bool reused = false;
    std::unique_ptr<Conn> c = connect_peer(p, seg, &reused);
    std::string error;
    size_t answered = run_on_conn(c.get(), by_segment[seg], is_write, &error);
    if (c->broken && reused && answered == 0 && !c->refused) {
      // A pooled connection the peer had closed: once more on a fresh one
      // (reads and writes are idempotent).
      error.clear();
      c = acquire(p, false, &reused);
      run_on_conn(c.get(), by_segment[seg], is_write, &error);
    }
    if (!error.empty() && first_error.empty()) first_error = error;
    release(p, std::move(c));
  }
  if (!first_error.empty()) throw Error(std::string(is_write ? "write" : "read") + " failed: " + first_error);
}

namespace {

// After a failed send: a refusing engine wrote a kBusy frame before closing.
bool read_refusal(int fd, std::string* reason) {
  if (!net::wait_fd(fd, POLLIN, 200)) return false;
  unsigned char hb[wire::kHeaderSize];
  ssize_t k = ::recv(fd, hb, sizeof(hb), MSG_WAITALL | MSG_DONTWAIT);
  if (k != static_cast<ssize_t>(sizeof(hb))) return false;
  wire::Header h;
  std::string why;
  if (!wire::decode(hb, &h, &why) || h.opcode != wire::kResponse || h.status != wire::kBusy) return false;
  std::string text(static_cast<size_t>(std::min<uint64_t>(h.length, wire::kMaxReason)), '\0');
  k = ::recv(fd, &text[0], text.size(), MSG_DONTWAIT);
  text.resize(k > 0 ? static_cast<size_t>(k) : 0);
  *reason = text;
  return true;
}

}  // namespace

// Runs one segment's requests on c; returns how many responses arrived.
size_t Engine::run_on_conn(Conn* c, const std::vector<Request>& reqs, bool is_write, std::string* error) {
  struct Chunk {
    uintptr_t local;
    uint64_t remote;
    size_t len;
    bool device;
    const Request* req;
  };
  std::vector<Chunk> chunks;
  for (const Request& r : reqs) {
    int dev = -1;
    bool device = local_is_device(r.local, r.length, &dev);
    for (size_t off = 0; off < r.length; off += opts_.chunk_bytes) {
      size_t n = std::min(opts_.chunk_bytes, r.length - off);
      chunks.push_back({r.local + off, r.remote + off, n, device, &r});
    }
  }
  auto fail = [&](const std::string& msg) {
    if (error->empty()) *error = msg;
  };
  auto refused = [&](const std::string& seg, const std::string& reason) {
    c->broken = true;
    c->refused = true;
    fail("segment '" + seg + "' refused the connection: " + reason);
  };
  size_t sent = 0, received = 0;
  const size_t window = static_cast<size_t>(opts_.window);
  unsigned char hb[wire::kHeaderSize];
  while (received < chunks.size()) {
    while (sent < chunks.size() && sent - received < window) {
      const Chunk& ch = chunks[sent];
      wire::Header h;
      h.opcode = is_write ? wire::kWrite : wire::kRead;
      h.request_id = sent;
      h.addr = ch.remote;
      h.length = ch.len;
      wire::encode(h, hb);
      bool ok;
      if (is_write) {
        void* src = reinterpret_cast<void*>(ch.local);
        if (ch.device) {
          void* st = c->stage(opts_.chunk_bytes);
          try {
            backend_->copy(st, src, ch.len);
          } catch (const std::exception& e) {
            // Keep the stream in sync: send the frame anyway, report the failure.
            fail(std::string("local device copy failed: ") + e.what());
          }
          src = st;
        }
        struct iovec iov[2] = {{hb, sizeof(hb)}, {src, ch.len}};
        ok = net::writev_all(c->fd, iov, 2);
      } else {
        ok = net::send_all(c->fd, hb, sizeof(hb));
      }
      if (!ok) {
        c->broken = true;
        std::string reason;
        if (received == 0 && read_refusal(c->fd, &reason))
          refused(ch.req->segment, reason);
        else
          fail("connection to segment '" + ch.req->segment + "' lost while sending");
        return received;
      }
      ++sent;
    }
    const Chunk& ch = chunks[received];
    wire::Header h;
    std::string why;
    if (!net::recv_all(c->fd, hb, sizeof(hb)) || !wire::decode(hb, &h, &why) || h.opcode != wire::kResponse) {
      c->broken = true;
      fail("connection to segment '" + ch.req->segment + "' lost or sent a bad response");
      return received;
    }
    if (h.status == wire::kBusy) {
      std::string reason(static_cast<size_t>(std::min<uint64_t>(h.length, wire::kMaxReason)), '\0');
      if (!net::recv_all(c->fd, &reason[0], reason.size())) reason = "(no reason given)";
      refused(ch.req->segment, reason);
      return received;
    }
    if (h.request_id != received) {
      c->broken = true;
      fail("connection to segment '" + ch.req->segment + "' lost or sent a bad response");
      return received;
    }
    if (h.status != wire::kOk) {
      fail("segment '" + ch.req->segment + "' remote address " + hex(ch.req->remote) + " length " +
           std::to_string(ch.req->length) + ": " + wire::status_name(h.status));
      if (h.length != 0) {
        c->broken = true;
        return received + 1;
      }
    } else if (!is_write) {
      if (h.length != ch.len) {
        c->broken = true;
        fail("segment '" + ch.req->segment + "' answered with a wrong length");
        return received + 1;
      }
      bool ok;
      if (ch.device) {
        void* st = c->stage(opts_.chunk_bytes);
        ok = net::recv_all(c->fd, st, ch.len);
        if (ok) {
          try {
            backend_->copy(reinterpret_cast<void*>(ch.local), st, ch.len);
          } catch (const std::exception& e) {
            fail(std::string("local device copy failed: ") + e.what());
          }
        }
      } else {
        ok = net::recv_all(c->fd, reinterpret_cast<void*>(ch.local), ch.len);
      }
      if (!ok) {
        c->broken = true;
        fail("connection to segment '" + ch.req->segment + "' lost while receiving");
        return received + 1;
      }
    }
    ++received;
  }
  return received;
}

}  // namespace xfer
