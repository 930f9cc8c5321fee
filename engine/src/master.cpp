#include "xfer/master.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>
#include <sstream>
#include <stdexcept>

#include "xfer/net.h"

#ifndef XFER_VERSION_STRING
#define XFER_VERSION_STRING "0.0.0"
#endif
#ifndef XFER_BACKEND_NAME
#define XFER_BACKEND_NAME "cpu"
#endif

namespace xfer {

const char* version() { return XFER_VERSION_STRING; }
const char* backend_name() { return XFER_BACKEND_NAME; }

namespace {
constexpr size_t kMaxLine = kMasterMaxLine;
constexpr size_t kMaxRegions = 65536;
constexpr size_t kReadChunk = kMasterReadChunk;
// Requests answered per connection per turn of the event loop: no client
// holds the loop longer than this many requests while others wait.
constexpr size_t kBatch = 64;
// A GET reply is produced this many bytes at a time, as the client reads it;
// a LIST reply holds names up to this many bytes (then "MORE").
constexpr size_t kReplyChunk = kMasterReplyChunk;
// Room for one more region (or name) past kReplyChunk: its numbers, and a
// kind of at most 256 bytes.
constexpr size_t kChunkRoom = kReplyChunk + 1024;
// Buffers above this capacity are released once empty.
constexpr size_t kKeepCapacity = kChunkRoom;
// Descriptors kept free for the listening socket, the epoll set, the wake
// pipe, the spare descriptor and whatever the process itself opens.
constexpr long kReservedFds = 32;
constexpr int kAcceptBackoffMs = 100;
constexpr int kTrimEveryMs = 1000;
constexpr int kSendBuffer = 128 << 10;

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 256) return false;
  for (char c : s)
    if (c <= ' ' || c == 0x7f) return false;
  return true;
}

// An unsigned 64-bit number spelled as 1 to 20 ASCII digits, nothing else. An
// istream reads "-1" into a uint64_t as 2^64-1 (strtoull's wrap-around) and takes
// "+7": a negative address or length must be refused, not stored wrapped.
bool read_u64(std::istream& in, uint64_t* out) {
  std::string token;
  if (!(in >> token) || token.empty() || token.size() > 20) return false;
  uint64_t value = 0;
  for (char c : token) {
    if (c < '0' || c > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *out = value;
  return true;
}

bool read_region(std::istream& in, RegionInfo* r) {
  return read_u64(in, &r->addr) && read_u64(in, &r->length) && static_cast<bool>(in >> r->kind);
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

size_t heap_bytes(const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; }

// What one segment holds, as allocated: the map node, the name, the
// endpoint and the region list.
uint64_t segment_bytes(const std::string& name, const SegmentInfo& info) {
  uint64_t b = 128 + heap_bytes(name) + heap_bytes(info.host) + info.regions.capacity() * sizeof(RegionInfo);
  for (auto& r : info.regions) b += heap_bytes(r.kind);
  return b;
}

void release(std::string& s) {
  if (s.capacity() > kKeepCapacity) std::string().swap(s);
  else s.clear();
}
}  // namespace

// One registered segment, shared by the map and by the GET replies that are
// sending it: a replaced or deleted segment lives (and counts in
// registered_bytes_) until the last such reply is sent.
struct MasterServer::Segment {
  SegmentInfo info;
  uint64_t bytes = 0;
};

struct MasterServer::Conn {
  int fd = -1;
  uint64_t id = 0;
  std::string in;        // received; in[in_off:] not yet answered
  size_t in_off = 0;
  std::string out;       // replies; out[out_off:] not yet sent
  size_t out_off = 0;
  int64_t last_ms = 0;   // last completed request (or completed send of replies)
  bool eof = false;      // the client shut down its side
  bool close_after = false;
  bool queued = false;   // in ready_
  uint32_t events = 0;   // what epoll watches
  std::shared_ptr<const Segment> get;  // a GET reply being produced
  size_t get_next = 0;   // its next region
  size_t unsent() const { return out.size() - out_off; }
  bool has_line() const { return in.find('\n', in_off) != std::string::npos; }
};

MasterServer::MasterServer(const std::string& host, uint16_t port, MasterLimits limits) : limits_(limits) {
  ping_reply_ = std::string("OK xfer-master ") + version() + " " + backend_name() + "\n";
  long room = net::fd_limit() - kReservedFds;
  if (room < 1) room = 1;
  if (limits_.max_connections < 1) limits_.max_connections = 1;
  if (limits_.max_connections > room) limits_.max_connections = static_cast<int>(room);
  std::string err;
  listen_fd_ = net::listen_tcp(host, port, &port_, &err);
  if (listen_fd_ < 0) throw std::runtime_error("xfer-master: " + err);
  net::set_nonblocking(listen_fd_, true);
  if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    net::close_fd(listen_fd_);
    throw std::runtime_error("xfer-master: pipe failed");
  }
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) {
    net::close_fd(listen_fd_);
    net::close_fd(wake_pipe_[0]);
    net::close_fd(wake_pipe_[1]);
    throw std::runtime_error(std::string("xfer-master: epoll_create1: ") + std::strerror(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.fd = wake_pipe_[0];
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_pipe_[0], &ev);
  spare_fd_ = net::open_spare_fd();
}

MasterServer::~MasterServer() {
  stop();
  if (bg_.joinable()) bg_.join();
  for (auto& kv : conns_) net::close_fd(kv.first);
  conns_.clear();
  segments_.clear();  // before the counters their deleters update
  net::close_fd(listen_fd_);
  net::close_fd(epoll_fd_);
  net::close_fd(spare_fd_);
  net::close_fd(wake_pipe_[0]);
  net::close_fd(wake_pipe_[1]);
}

MasterStats MasterServer::stats() const {
  MasterStats s;
  s.active = active_;
  s.accepted = accepted_;
  s.refused = refused_;
  s.idle_closed = idle_closed_;
  s.output_closed = output_closed_;
  s.oom = oom_;
  s.segments = segment_count_;
  s.registered_bytes = registered_bytes_;
  return s;
}

void MasterServer::start_background() {
  bg_ = std::thread([this] { serve(); });
}

void MasterServer::stop() {
  if (stopping_.exchange(true)) return;
  char c = 'x';
  ssize_t ignored = ::write(wake_pipe_[1], &c, 1);
  (void)ignored;
}

void MasterServer::serve() {
  const int idle = limits_.idle_timeout_ms;
  // How often idle connections are looked for: a quarter of the timeout, within [10 ms, 1 s].
  const int sweep_every = idle > 0 ? std::max(10, std::min(1000, idle / 4)) : -1;
  int64_t next_sweep = sweep_every > 0 ? now_ms() + sweep_every : 0;
  int64_t next_trim = 0;
  epoll_event events[256];
  while (!stopping_) {
    int timeout = sweep_every;
    if (!ready_.empty()) timeout = 0;
    if (accept_paused_) {
      int64_t left = accept_resume_ms_ - now_ms();
      int t = left < 0 ? 0 : static_cast<int>(left);
      timeout = timeout < 0 ? t : std::min(timeout, t);
    }
    int n = ::epoll_wait(epoll_fd_, events, 256, timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    bool wake = false;
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == wake_pipe_[0]) {
        wake = true;
      } else if (fd == listen_fd_) {
        accept_pending();
      } else {
        try {
          on_event(fd, events[i].events);
        } catch (const std::bad_alloc&) {
          // Out of memory for this client's buffers: it goes, the others stay.
          ++oom_;
          drop(fd);
        }
      }
    }
    if (wake) break;
    run_ready();
    const int64_t now = now_ms();
    if (trim_pending_ && now >= next_trim) {
      // Give the memory of closed connections back to the system.
#ifdef __GLIBC__
      ::malloc_trim(0);
#endif
      trim_pending_ = false;
      next_trim = now + kTrimEveryMs;
    }
    if (accept_paused_ && now >= accept_resume_ms_) pause_accept(false);
    if (sweep_every > 0 && now >= next_sweep) {
      sweep_idle();
      next_sweep = now + sweep_every;
    }
  }
  stopping_ = true;
  // New clients get "connection refused" instead of waiting in the backlog.
  if (listen_fd_ >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
  net::close_fd(listen_fd_);
  listen_fd_ = -1;
  for (auto& kv : conns_) net::close_fd(kv.first);
  conns_.clear();
  active_ = 0;
}

void MasterServer::pause_accept(bool paused) {
  if (accept_paused_ == paused || listen_fd_ < 0) return;
  accept_paused_ = paused;
  epoll_event ev{};
  ev.events = paused ? 0u : static_cast<uint32_t>(EPOLLIN);
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
  if (paused) accept_resume_ms_ = now_ms() + kAcceptBackoffMs;
}

void MasterServer::accept_pending() {
  // A bounded batch per wakeup; level-triggered epoll brings the rest.
  for (int i = 0; i < 64; ++i) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      try {
        admit(fd);
      } catch (const std::bad_alloc&) {
        ++oom_;
        if (conns_.find(fd) == conns_.end()) {
          epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
          net::close_fd(fd);
        } else {
          drop(fd);
        }
      }
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      // Out of descriptors: spend the spare one on answering the oldest
      // pending client, then back off instead of spinning on a ready socket.
      if (spare_fd_ >= 0) {
        net::close_fd(spare_fd_);
        spare_fd_ = -1;
        int pending = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (pending >= 0) refuse(pending, "xfer-master is out of file descriptors; try again later");
        spare_fd_ = net::open_spare_fd();
      }
      pause_accept(true);
    }
    return;  // EAGAIN, or an error that waiting will not fix here
  }
}

void MasterServer::refuse(int fd, const std::string& why) {
  std::string line = "ERR busy: " + why + "\n";
  ssize_t ignored = ::send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)ignored;
  net::close_fd(fd);
  ++refused_;
}

void MasterServer::admit(int fd) {
  if (conns_.size() >= static_cast<size_t>(limits_.max_connections)) {
    refuse(fd, "xfer-master serves at most " + std::to_string(limits_.max_connections) +
                   " connections; try again later");
    return;
  }
  std::unique_ptr<Conn> c(new Conn());
  c->fd = fd;
  c->id = ++next_conn_id_;
  // Replies are small: a fixed kernel send buffer bounds what a client that
  // does not read pins in the kernel (autotuning would let it grow to MBs).
  int sndbuf = kSendBuffer;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
  c->last_ms = now_ms();
  c->events = EPOLLIN;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    refuse(fd, "xfer-master cannot watch another connection");
    return;
  }
  conns_[fd] = std::move(c);
  ++accepted_;
  active_ = conns_.size();
}

void MasterServer::drop(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  net::close_fd(fd);
  conns_.erase(it);
  active_ = conns_.size();
  trim_pending_ = true;
}

void MasterServer::watch(Conn* c, uint32_t events) {
  if (c->events == events) return;
  c->events = events;
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = c->fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
}

void MasterServer::sweep_idle() {
  const int64_t cutoff = now_ms() - limits_.idle_timeout_ms;
  std::vector<int> stale;
  for (auto& kv : conns_)
    if (kv.second->last_ms < cutoff) stale.push_back(kv.first);
  for (int fd : stale) {
    drop(fd);
    ++idle_closed_;
  }
}

void MasterServer::on_event(int fd, uint32_t events) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  Conn* c = it->second.get();
  if ((events & EPOLLERR) || ((events & EPOLLHUP) && !(events & EPOLLIN))) {
    drop(fd);
    return;
  }
  if ((events & EPOLLIN) && !c->eof && !c->close_after && !c->has_line()) {
    read_some(c);
    if (conns_.find(fd) == conns_.end()) return;
  }
  step(c);
}

// One read of at most kReadChunk bytes; called only when every complete
// request already received has been answered.
void MasterServer::read_some(Conn* c) {
  if (c->in_off > 0) {
    c->in.erase(0, c->in_off);
    c->in_off = 0;
  }
  char buf[kReadChunk];
  ssize_t k = ::recv(c->fd, buf, sizeof(buf), 0);
  if (k < 0) {
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) return;
    drop(c->fd);
    return;
  }
  if (k == 0) {
    c->eof = true;
    return;
  }
  c->in.append(buf, static_cast<size_t>(k));
}

void MasterServer::enqueue(Conn* c) {
  if (c->queued) return;
  c->queued = true;
  ready_.emplace_back(c->fd, c->id);
}

// One turn for every connection that still had requests to answer.
void MasterServer::run_ready() {
  for (size_t n = ready_.size(); n > 0 && !ready_.empty(); --n) {
    auto [fd, id] = ready_.front();
    ready_.pop_front();
    auto it = conns_.find(fd);
    if (it == conns_.end() || it->second->id != id) continue;
    it->second->queued = false;
    try {
      step(it->second.get());
    } catch (const std::bad_alloc&) {
      ++oom_;
      drop(fd);
    }
  }
}

// Produces the GET reply in progress while the client takes it: at most
// kReplyChunk bytes unsent at a time, at most kBatch chunks per turn. False
// when the connection was dropped.
bool MasterServer::produce(Conn* c) {
  for (size_t turn = 0; c->get && turn < kBatch; ++turn) {
    if (c->unsent() >= kReplyChunk) return true;  // EPOLLOUT brings the next chunk
    const auto& regions = c->get->info.regions;
    if (c->out_off > 0) {  // at most kReplyChunk unsent bytes move
      c->out.erase(0, c->out_off);
      c->out_off = 0;
    }
    if (c->out.capacity() < kChunkRoom) c->out.reserve(kChunkRoom);  // one allocation, never doubled
    while (c->get_next < regions.size() && c->unsent() < kReplyChunk) {
      const RegionInfo& r = regions[c->get_next++];
      c->out += ' ';
      c->out += std::to_string(r.addr);
      c->out += ' ';
      c->out += std::to_string(r.length);
      c->out += ' ';
      c->out += r.kind;
    }
    if (c->get_next == regions.size()) {
      c->out += '\n';
      c->get.reset();  // a replaced segment is freed here, by its last reader
      c->get_next = 0;
    }
    if (!flush(c)) return false;
  }
  return true;
}

// Sends what it can, answers at most kBatch complete requests, and decides
// what to wait for next: EPOLLOUT while replies are unsent, EPOLLIN once
// every received request is answered, another turn (ready_) otherwise.
// A GET reply is produced as the client reads it; requests after it wait.
void MasterServer::step(Conn* c) {
  const int fd = c->fd;
  if (!flush(c)) return;
  if (!produce(c)) return;
  const uint64_t out_limit = limits_.max_output_bytes;
  for (size_t answered = 0; answered < kBatch && !c->close_after && !c->get; ++answered) {
    size_t nl = c->in.find('\n', c->in_off);
    if (nl == std::string::npos) break;
    if (out_limit > 0 && c->unsent() > out_limit) {
      // Requests keep coming and replies are not read: this client goes.
      ++output_closed_;
      drop(fd);
      return;
    }
    size_t len = nl - c->in_off;
    if (len > 0 && c->in[nl - 1] == '\r') --len;
    if (len == 4 && c->in.compare(c->in_off, 4, "PING") == 0) {
      c->out += ping_reply_;  // the heartbeat, answered without parsing
    } else {
      c->out += handle(c->in.substr(c->in_off, len), &c->get);
      if (!c->get) c->out += '\n';
    }
    c->in_off = nl + 1;
    c->last_ms = now_ms();
    if (c->get && !produce(c)) return;
  }
  if (c->in_off == c->in.size()) {
    release(c->in);
    c->in_off = 0;
  }
  const bool more = c->has_line();
  const bool producing = c->get != nullptr;
  if (!more && !c->close_after && c->in.size() - c->in_off > kMaxLine) {
    c->out += "ERR request line longer than " + std::to_string(kMaxLine) + " bytes\n";
    c->close_after = true;
    release(c->in);
    c->in_off = 0;
  }
  if (!flush(c)) return;
  if (c->unsent() == 0 && !producing && (c->close_after || (c->eof && !more))) {
    drop(fd);
    return;
  }
  if (producing ? c->unsent() == 0 : more && !c->close_after) enqueue(c);
  uint32_t ev = 0;
  if (c->unsent() > 0) ev |= EPOLLOUT;
  if (!more && !producing && !c->eof && !c->close_after) ev |= EPOLLIN;
  watch(c, ev);
}

// Sends pending replies; false when the connection was dropped.
bool MasterServer::flush(Conn* c) {
  if (c->unsent() == 0) return true;
  while (c->out_off < c->out.size()) {
    ssize_t k = ::send(c->fd, c->out.data() + c->out_off, c->out.size() - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      c->out_off += static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (c->out_off > kKeepCapacity && c->out_off * 2 > c->out.size()) {
        c->out.erase(0, c->out_off);
        c->out_off = 0;
      }
      return true;
    }
    drop(c->fd);
    return false;
  }
  release(c->out);
  c->out_off = 0;
  if (!c->get) c->last_ms = now_ms();  // the exchange is complete
  return true;
}

std::string MasterServer::handle(const std::string& line, std::shared_ptr<const Segment>* get) {
  try {
    return handle_impl(line, get);
  } catch (const std::bad_alloc&) {
    ++oom_;
    return "ERR out of memory: xfer-master could not allocate for this request; nothing was changed";
  }
}

std::string MasterServer::handle_impl(const std::string& line, std::shared_ptr<const Segment>* get) {
  if (line == "PING") return std::string("OK xfer-master ") + version() + " " + backend_name();
  std::istringstream in(line);
  std::string cmd;
  in >> cmd;
  if (cmd == "PING") return std::string("OK xfer-master ") + version() + " " + backend_name();
  if (cmd == "PUT") {
    std::string name;
    SegmentInfo info;
    unsigned port = 0;
    size_t n = 0;
    if (!(in >> name >> info.host >> port >> n) || !valid_name(name) || !valid_name(info.host) || port == 0 ||
        port > 65535 || n > kMaxRegions)
      return "ERR malformed PUT";
    info.port = static_cast<uint16_t>(port);
    info.regions.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      RegionInfo r;
      if (!read_region(in, &r) || !valid_name(r.kind)) return "ERR malformed region list";
      info.regions.push_back(std::move(r));
    }
    const uint64_t bytes = 64 + segment_bytes(name, info);  // 64: the shared_ptr's control block
    std::lock_guard<std::mutex> lk(mu_);
    auto it = segments_.find(name);
    // The old version is freed now unless a GET reply is still sending it.
    const uint64_t old = it == segments_.end() || it->second.use_count() > 1 ? 0 : it->second->bytes;
    if (it == segments_.end() && limits_.max_segments > 0 && segments_.size() >= limits_.max_segments)
      return "ERR segment limit: xfer-master holds at most " + std::to_string(limits_.max_segments) +
             " segments (--max-segments); DEL some first";
    const uint64_t held = registered_bytes_ - old;
    if (limits_.max_registered_bytes > 0 && held + bytes > limits_.max_registered_bytes)
      return "ERR registered bytes limit: this segment needs " + std::to_string(bytes) + " bytes and " +
             std::to_string(held) + " of at most " + std::to_string(limits_.max_registered_bytes) +
             " are held (--max-registered-bytes; replaced segments count until the replies sending them are "
             "done); DEL some first";
    std::shared_ptr<const Segment> seg = make_segment(std::move(info), bytes);  // on bad_alloc nothing changed
    if (it == segments_.end()) {
      segments_.emplace(name, std::move(seg));  // strong guarantee: on bad_alloc seg is freed, nothing changed
    } else {
      it->second = std::move(seg);  // frees the old version unless a reply is sending it
    }
    segment_count_ = segments_.size();
    return "OK";
  }
  if (cmd == "GET") {
    std::string name;
    if (!(in >> name) || !valid_name(name)) return "ERR malformed GET";
    std::lock_guard<std::mutex> lk(mu_);
    auto it = segments_.find(name);
    if (it == segments_.end()) return "ERR no segment named " + name;
    const SegmentInfo& info = it->second->info;
    std::string head = "OK " + info.host + " " + std::to_string(info.port) + " " + std::to_string(info.regions.size());
    *get = it->second;  // the regions follow as the client reads them (produce())
    return head;
  }
  if (cmd == "DEL") {
    std::string name;
    if (!(in >> name)) return "ERR malformed DEL";
    std::lock_guard<std::mutex> lk(mu_);
    auto it = segments_.find(name);
    if (it != segments_.end()) {
      segments_.erase(it);  // its bytes are released with the last reference
      segment_count_ = segments_.size();
    }
    return "OK";
  }
  if (cmd == "STATS") {
    MasterStats st = stats();
    std::ostringstream out;
    out << "OK active=" << st.active << " accepted=" << st.accepted << " refused=" << st.refused
        << " idle_closed=" << st.idle_closed << " max_connections=" << limits_.max_connections
        << " idle_timeout_ms=" << limits_.idle_timeout_ms << " output_closed=" << st.output_closed
        << " oom=" << st.oom << " segments=" << st.segments << " registered_bytes=" << st.registered_bytes
        << " max_segments=" << limits_.max_segments << " max_registered_bytes=" << limits_.max_registered_bytes
        << " max_output_bytes=" << limits_.max_output_bytes;
    return out.str();
  }
  if (cmd == "LIST") {
    // One page: names in order, after AFTER when given, up to kReplyChunk
    // bytes; "MORE" after them when names follow ("LIST <last name>" for them).
    std::string after;
    const bool from_start = !(in >> after);
    std::lock_guard<std::mutex> lk(mu_);
    auto it = from_start ? segments_.begin() : segments_.upper_bound(after);
    std::string names;
    size_t n = 0;
    for (; it != segments_.end() && names.size() < kReplyChunk; ++it, ++n) {
      names += ' ';
      names += it->first;
    }
    return "OK " + std::to_string(n) + names + (it == segments_.end() ? "" : " MORE");
  }
  return "ERR unknown command";
}

std::shared_ptr<const MasterServer::Segment> MasterServer::make_segment(SegmentInfo info, uint64_t bytes) {
  registered_bytes_ += bytes;
  Segment* raw = nullptr;
  try {
    raw = new Segment{std::move(info), bytes};
  } catch (...) {
    registered_bytes_ -= bytes;
    throw;
  }
  // On bad_alloc the shared_ptr constructor runs the deleter: the count is undone.
  return std::shared_ptr<const Segment>(raw, [this](const Segment* s) {
    registered_bytes_ -= s->bytes;
    delete s;
  });
}

MasterClient::MasterClient(std::string endpoint, int timeout_ms) : timeout_ms_(timeout_ms) {
  if (!net::split_endpoint(endpoint, &host_, &port_))
    throw std::runtime_error("master endpoint must be host:port, got '" + endpoint + "'");
}

MasterClient::~MasterClient() { net::close_fd(fd_); }

void MasterClient::disconnect() {
  std::lock_guard<std::mutex> lk(mu_);
  net::close_fd(fd_);
  fd_ = -1;
}

std::string MasterClient::call(const std::string& request) {
  std::lock_guard<std::mutex> lk(mu_);
  const std::string req = request + "\n";
  for (int attempt = 0;; ++attempt) {
    const bool fresh = fd_ < 0;
    if (fresh) {
      std::string err;
      fd_ = net::connect_tcp(host_, port_, &err, timeout_ms_);
      if (fd_ < 0) throw std::runtime_error("cannot reach xfer-master: " + err);
      net::set_io_timeout(fd_, timeout_ms_);
      ++opened_;
    }
    std::string reply;
    // A refusal is sent before any request is read: look for it even when the send failed.
    bool sent = net::send_all(fd_, req.data(), req.size());
    bool ok = net::read_line(fd_, &reply, kMaxLine) && sent;
    if (reply.rfind("ERR busy:", 0) == 0) {
      net::close_fd(fd_);
      fd_ = -1;
      throw std::runtime_error("xfer-master at " + host_ + ":" + std::to_string(port_) +
                               " refused the connection: " + reply.substr(10));
    }
    if (ok) return reply;
    net::close_fd(fd_);
    fd_ = -1;
    // A reused connection may have been closed by the master in the meantime
    // (idle timeout, restart): one more try on a fresh one.
    if (fresh || attempt > 0)
      throw std::runtime_error("xfer-master at " + host_ + ":" + std::to_string(port_) + " closed the connection");
  }
}

std::string MasterClient::ping() { return call("PING"); }

void MasterClient::put(const std::string& name, const SegmentInfo& info) {
  std::ostringstream out;
  out << "PUT " << name << " " << info.host << " " << info.port << " " << info.regions.size();
  for (auto& r : info.regions) out << " " << r.addr << " " << r.length << " " << r.kind;
  std::string reply = call(out.str());
  if (reply.rfind("OK", 0) != 0) throw std::runtime_error("xfer-master: " + reply);
}

bool MasterClient::get(const std::string& name, SegmentInfo* info) {
  std::string reply = call("GET " + name);
  if (reply.rfind("OK", 0) != 0) return false;
  std::istringstream in(reply.substr(2));
  unsigned port = 0;
  size_t n = 0;
  if (!(in >> info->host >> port >> n)) return false;
  info->port = static_cast<uint16_t>(port);
  info->regions.clear();
  for (size_t i = 0; i < n; ++i) {
    RegionInfo r;
    if (!read_region(in, &r)) return false;
    info->regions.push_back(r);
  }
  return true;
}

void MasterClient::del(const std::string& name) { call("DEL " + name); }

}  // namespace xfer
