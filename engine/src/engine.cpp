#include "xfer/engine.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>

#include "backend.h"
#include "rdma.h"
#include "xfer/net.h"
#include "xfer/wire.h"

namespace xfer {

namespace {

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

bool valid_segment_name(const std::string& s) {
  if (s.empty() || s.size() > 256) return false;
  for (char c : s)
    if (c <= ' ' || c == 0x7f) return false;
  return true;
}

// Region containing [addr, addr + len), or nullptr. Caller holds the lock.
const Region* find_region(const std::map<uintptr_t, Region>& regions, uint64_t addr, uint64_t len) {
  if (len == 0 || addr + len < addr) return nullptr;
  auto it = regions.upper_bound(static_cast<uintptr_t>(addr));
  if (it == regions.begin()) return nullptr;
  --it;
  const Region& r = it->second;
  if (addr < r.addr || addr + len > r.addr + r.length) return nullptr;
  return &r;
}

}  // namespace

struct Engine::Conn {
  Backend* backend = nullptr;
  int fd = -1;
  void* staging = nullptr;
  size_t staging_size = 0;
  bool broken = false;
  ~Conn() {
    net::close_fd(fd);
    if (staging) backend->free_pinned(staging);
  }
  void* stage(size_t n) {
    if (staging_size < n) {
      if (staging) backend->free_pinned(staging);
      staging = backend->alloc_pinned(n);
      staging_size = n;
    }
    return staging;
  }
};

struct Engine::ServerConn {
  int fd = -1;
  std::thread thread;
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
  accept_thread_ = std::thread([this] { accept_loop(); });
  try {
    publish();
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
  if (!master_.empty()) {
    try {
      MasterClient(master_).del(name_);
    } catch (...) {
    }
  }
  if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
  if (accept_thread_.joinable()) accept_thread_.join();
  net::close_fd(listen_fd_);
  listen_fd_ = -1;
  std::vector<std::unique_ptr<ServerConn>> conns;
  {
    std::lock_guard<std::mutex> lk(server_mu_);
    for (auto& sc : server_conns_) ::shutdown(sc->fd, SHUT_RDWR);
    conns.swap(server_conns_);
  }
  for (auto& sc : conns) {
    if (sc->thread.joinable()) sc->thread.join();
    net::close_fd(sc->fd);
    if (sc->staging) backend_->free_pinned(sc->staging);
  }
  {
    std::lock_guard<std::mutex> lk(peers_mu_);
    peers_.clear();
  }
  std::unique_lock<std::shared_mutex> lk(regions_mu_);
  for (auto& kv : regions_) {
    if (kv.second.mr) rdma_->deregister(kv.second.mr);
    net::close_fd(kv.second.dmabuf_fd);
  }
  regions_.clear();
}

// ---------------------------------------------------------------- registration

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
  {
    std::unique_lock<std::shared_mutex> lk(regions_mu_);
    auto it = regions_.lower_bound(addr);
    bool overlap = (it != regions_.end() && it->second.addr < addr + length);
    if (!overlap && it != regions_.begin()) {
      auto prev = std::prev(it);
      overlap = prev->second.addr + prev->second.length > addr;
    }
    if (overlap) {
      if (r.mr) rdma_->deregister(r.mr);
      net::close_fd(r.dmabuf_fd);
      throw Error("register: range overlaps an already registered region");
    }
    regions_[addr] = r;
  }
  publish();
  return r;
}

void Engine::unregister_memory(uintptr_t addr) {
  {
    std::unique_lock<std::shared_mutex> lk(regions_mu_);
    auto it = regions_.find(addr);
    if (it == regions_.end()) throw Error("unregister: no region registered at this address");
    if (it->second.mr) rdma_->deregister(it->second.mr);
    net::close_fd(it->second.dmabuf_fd);
    regions_.erase(it);
  }
  publish();
}

std::vector<Region> Engine::regions() const {
  std::shared_lock<std::shared_mutex> lk(regions_mu_);
  std::vector<Region> out;
  for (auto& kv : regions_) out.push_back(kv.second);
  return out;
}

void Engine::publish() {
  if (master_.empty()) return;
  SegmentInfo info;
  info.host = opts_.host;
  info.port = port_;
  {
    std::shared_lock<std::shared_mutex> lk(regions_mu_);
    for (auto& kv : regions_) {
      RegionInfo ri;
      ri.addr = kv.second.addr;
      ri.length = kv.second.length;
      ri.kind = kv.second.kind == MemKind::kDevice ? "device" : "host";
      info.regions.push_back(ri);
    }
  }
  try {
    MasterClient(master_).put(name_, info);
  } catch (const std::exception& e) {
    throw Error(e.what());
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
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (closing_) break;
      if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) {
        if (errno == EMFILE || errno == ENFILE) ::usleep(10000);
        continue;
      }
      break;
    }
    net::tune_socket(fd);
    std::lock_guard<std::mutex> lk(server_mu_);
    // Reap finished connections.
    for (auto it = server_conns_.begin(); it != server_conns_.end();) {
      if ((*it)->done) {
        (*it)->thread.join();
        net::close_fd((*it)->fd);
        if ((*it)->staging) backend_->free_pinned((*it)->staging);
        it = server_conns_.erase(it);
      } else {
        ++it;
      }
    }
    if (closing_) {
      net::close_fd(fd);
      break;
    }
    std::unique_ptr<ServerConn> sc(new ServerConn());
    sc->fd = fd;
    ServerConn* raw = sc.get();
    server_conns_.push_back(std::move(sc));
    raw->thread = std::thread([this, raw] { serve(raw); });
  }
}

void Engine::serve(ServerConn* sc) {
  while (!closing_ && serve_frame(sc)) {
  }
  ::shutdown(sc->fd, SHUT_RDWR);
  sc->done = true;
}

// One request: false closes the connection (malformed frame, peer gone).
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

  std::shared_lock<std::shared_mutex> lk(regions_mu_);
  const Region* r = find_region(regions_, h.addr, h.length);
  uint32_t status = h.length == 0 ? wire::kInvalid : (r ? wire::kOk : wire::kOutOfBounds);
  const size_t stage_size = std::min<size_t>(opts_.chunk_bytes, h.length == 0 ? 1 : h.length);
  auto staging = [&]() -> char* {
    if (sc->staging_size < stage_size) {
      if (sc->staging) backend_->free_pinned(sc->staging);
      sc->staging = backend_->alloc_pinned(stage_size);
      sc->staging_size = stage_size;
    }
    return static_cast<char*>(sc->staging);
  };

  if (h.opcode == wire::kWrite) {
    if (status == wire::kOk && r->kind == MemKind::kHost) {
      if (!net::recv_all(sc->fd, reinterpret_cast<void*>(h.addr), h.length)) return false;
    } else if (status == wire::kOk) {
      char* buf = staging();
      for (uint64_t done = 0; done < h.length;) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(h.length - done, sc->staging_size));
        if (!net::recv_all(sc->fd, buf, n)) return false;
        if (status == wire::kOk) {
          try {
            backend_->copy(reinterpret_cast<void*>(h.addr + done), buf, n);
          } catch (const std::exception&) {
            status = wire::kDeviceError;
          }
        }
        done += n;
      }
    } else {
      // Refused: consume the payload so the connection stays in sync.
      lk.unlock();
      if (sc->drain.empty()) sc->drain.resize(1 << 20);
      for (uint64_t done = 0; done < h.length;) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(h.length - done, sc->drain.size()));
        if (!net::recv_all(sc->fd, sc->drain.data(), n)) return false;
        done += n;
      }
    }
    resp.status = status;
    wire::encode(resp, rb);
    return net::send_all(sc->fd, rb, sizeof(rb));
  }

  // READ
  if (status != wire::kOk) {
    lk.unlock();
    resp.status = status;
    wire::encode(resp, rb);
    return net::send_all(sc->fd, rb, sizeof(rb));
  }
  if (r->kind == MemKind::kHost) {
    resp.length = h.length;
    wire::encode(resp, rb);
    struct iovec iov[2] = {{rb, sizeof(rb)}, {reinterpret_cast<void*>(h.addr), static_cast<size_t>(h.length)}};
    return net::writev_all(sc->fd, iov, 2);
  }
  char* buf = staging();
  for (uint64_t done = 0; done < h.length;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(h.length - done, sc->staging_size));
    try {
      backend_->copy(buf, reinterpret_cast<const void*>(h.addr + done), n);
    } catch (const std::exception&) {
      if (done != 0) return false;  // header already promised the payload
      resp.status = wire::kDeviceError;
      wire::encode(resp, rb);
      return net::send_all(sc->fd, rb, sizeof(rb));
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
  if (!master_.empty()) {
    if (!MasterClient(master_).get(segment, &info)) throw Error("segment '" + segment + "' is not known to the master");
    return info;
  }
  Peer* p = get_peer(segment);
  std::lock_guard<std::mutex> lk(p->mu);
  info.host = p->host;
  info.port = p->port;
  return info;
}

Engine::Peer* Engine::get_peer(const std::string& segment) {
  std::lock_guard<std::mutex> lk(peers_mu_);
  auto it = peers_.find(segment);
  if (it != peers_.end()) return it->second.get();
  if (master_.empty()) throw Error("unknown segment '" + segment + "' (no master; use add_peer)");
  SegmentInfo info;
  bool found = false;
  try {
    found = MasterClient(master_).get(segment, &info);
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
  if (!found) throw Error("segment '" + segment + "' is not known to the master");
  std::unique_ptr<Peer> p(new Peer());
  p->host = info.host;
  p->port = info.port;
  Peer* raw = p.get();
  peers_[segment] = std::move(p);
  return raw;
}

std::unique_ptr<Engine::Conn> Engine::acquire(Peer* p) {
  std::string host;
  uint16_t port;
  {
    std::lock_guard<std::mutex> lk(p->mu);
    if (!p->idle.empty()) {
      std::unique_ptr<Conn> c = std::move(p->idle.back());
      p->idle.pop_back();
      return c;
    }
    host = p->host;
    port = p->port;
  }
  std::string err;
  int fd = net::connect_tcp(host, port, &err);
  if (fd < 0) throw Error(err);
  std::unique_ptr<Conn> c(new Conn());
  c->backend = backend_.get();
  c->fd = fd;
  return c;
}

void Engine::release(Peer* p, std::unique_ptr<Conn> c) {
  if (!c || c->broken) return;
  std::lock_guard<std::mutex> lk(p->mu);
  if (p->idle.size() < 8) p->idle.push_back(std::move(c));
}

bool Engine::local_is_device(uintptr_t addr, size_t len, int* device) {
  {
    std::shared_lock<std::shared_mutex> lk(regions_mu_);
    const Region* r = find_region(regions_, addr, len);
    if (r) {
      *device = r->device;
      return r->kind == MemKind::kDevice;
    }
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
    std::unique_ptr<Conn> c;
    try {
      c = acquire(p);
    } catch (const Error&) {
      // The peer may have restarted elsewhere: ask the master once more.
      if (master_.empty()) throw;
      SegmentInfo info;
      if (!MasterClient(master_).get(seg, &info)) throw Error("segment '" + seg + "' is gone from the master");
      {
        std::lock_guard<std::mutex> lk(p->mu);
        p->host = info.host;
        p->port = info.port;
      }
      c = acquire(p);
    }
    run_on_conn(c.get(), by_segment[seg], is_write, &first_error);
    release(p, std::move(c));
  }
  if (!first_error.empty()) throw Error(std::string(is_write ? "write" : "read") + " failed: " + first_error);
}

void Engine::run_on_conn(Conn* c, const std::vector<Request>& reqs, bool is_write, std::string* first_error) {
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
    if (first_error->empty()) *first_error = msg;
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
        fail("connection to segment '" + ch.req->segment + "' lost while sending");
        return;
      }
      ++sent;
    }
    const Chunk& ch = chunks[received];
    wire::Header h;
    std::string why;
    if (!net::recv_all(c->fd, hb, sizeof(hb)) || !wire::decode(hb, &h, &why) || h.opcode != wire::kResponse ||
        h.request_id != received) {
      c->broken = true;
      fail("connection to segment '" + ch.req->segment + "' lost or sent a bad response");
      return;
    }
    if (h.status != wire::kOk) {
      fail("segment '" + ch.req->segment + "' remote address 0x" + [&] {
        char b[32];
        std::snprintf(b, sizeof(b), "%llx", static_cast<unsigned long long>(ch.req->remote));
        return std::string(b);
      }() + " length " + std::to_string(ch.req->length) + ": " + wire::status_name(h.status));
      if (h.length != 0) {
        c->broken = true;
        return;
      }
    } else if (!is_write) {
      if (h.length != ch.len) {
        c->broken = true;
        fail("segment '" + ch.req->segment + "' answered with a wrong length");
        return;
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
        return;
      }
    }
    ++received;
  }
}

}  // namespace xfer
