// Metadata service: segment name -> endpoint and registered regions.
//
// Line protocol (one request per line, one reply line):
//   PING                               -> OK xfer-master <version> <backend>
//   PUT <name> <host> <port> <n> (<addr> <len> <kind>)*   -> OK
//   GET <name>                         -> OK <host> <port> <n> (<addr> <len> <kind>)*
//   DEL <name>                         -> OK
//   LIST [<after>]                     -> OK <n> <name>{n} [MORE]
//       names in order (those after <after> when given), at most 64 KiB of
//       them a reply; MORE: names follow, ask "LIST <last name>" for them.
//   STATS                              -> OK active=<n> accepted=<n> refused=<n> idle_closed=<n>
//                                            max_connections=<n> idle_timeout_ms=<n> output_closed=<n>
//                                            oom=<n> segments=<n> registered_bytes=<n> max_segments=<n>
//                                            max_registered_bytes=<n> max_output_bytes=<n>
// Errors reply "ERR <reason>". Addresses and lengths are decimal.
// A connection over the server's limit gets one line, "ERR busy: <why>",
// before any request, and is closed.
//
// One thread serves every connection (epoll): the master holds one
// descriptor per open connection and nothing per request, closes a
// connection when the client does, when it has not completed a request
// within the idle timeout (bytes of an unfinished line do not count), when
// its unsent replies exceed the output limit, or when it breaks the protocol.
//
// Bounds: segments and the metadata bytes they hold are capped (a PUT over
// a cap, or one that runs out of memory, is answered "ERR ..." and changes
// nothing). A GET reply is produced 64 KiB at a time as its client reads it,
// from the segment as it was when the GET was answered: a segment replaced
// or deleted meanwhile stays, and counts in the registered bytes, until the
// last reply sending it is done (or its connection is closed). So memory is
// the registered bytes plus, per connection, one request line (at most
// 1 MiB, plus one 64 KiB read) and at most max_output_bytes + 64 KiB of
// unsent replies, whatever the replies' sizes and however slowly they are read. Each connection is answered at most kBatch requests per turn of
// the event loop, so a request waits for at most one turn: at most
// kBatch requests (and one 64 KiB read) of every other connection.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace xfer {

// What one connection may make the master hold: a request line of at most
// kMasterMaxLine bytes (plus one read of kMasterReadChunk), and unsent
// replies up to MasterLimits::max_output_bytes plus one kMasterReplyChunk.
constexpr size_t kMasterMaxLine = 1 << 20;
constexpr size_t kMasterReadChunk = 64 << 10;
constexpr size_t kMasterReplyChunk = 64 << 10;

struct RegionInfo {
  uint64_t addr = 0;
  uint64_t length = 0;
  std::string kind;  // "host" or "device"
};

struct SegmentInfo {
  std::string host;
  uint16_t port = 0;
  std::vector<RegionInfo> regions;
};

struct MasterLimits {
  // Concurrent client connections; more are answered "ERR busy: ..." and closed.
  // Clamped to what RLIMIT_NOFILE leaves room for.
  int max_connections = 1024;
  // A connection without traffic for this long is closed; <= 0 never.
  // A connection that has not completed a request (nor finished receiving
  // its replies) for this long is closed, whatever bytes it drips; <= 0 never.
  int idle_timeout_ms = 60000;
  // Segments held; a PUT of a new name beyond it is refused. 0: no limit.
  uint64_t max_segments = 65536;
  // Metadata bytes the segments hold (names, endpoints, region lists, as
  // allocated); a PUT that would exceed it is refused. 0: no limit.
  uint64_t max_registered_bytes = 256ull << 20;
  // Unsent reply bytes a connection may hold before its next request is
  // answered; over it, the client is not reading and is disconnected. 0: no limit.
  uint64_t max_output_bytes = 256ull << 10;
};

struct MasterStats {
  uint64_t active = 0;
  uint64_t accepted = 0;
  uint64_t refused = 0;
  uint64_t idle_closed = 0;
  uint64_t output_closed = 0;  // disconnected over the output limit
  uint64_t oom = 0;            // allocation failures answered or dropped
  uint64_t segments = 0;
  uint64_t registered_bytes = 0;
};

class MasterServer {
 public:
  MasterServer(const std::string& host, uint16_t port, MasterLimits limits = {});
  ~MasterServer();
  MasterServer(const MasterServer&) = delete;
  MasterServer& operator=(const MasterServer&) = delete;

  uint16_t port() const { return port_; }
  const MasterLimits& limits() const { return limits_; }
  MasterStats stats() const;
  // Serves until stop() (from another thread or a signal-driven wakeup).
  void serve();
  void start_background();
  void stop();
  // Writing one byte here (async-signal-safe) makes serve() return.
  int wake_fd() const { return wake_pipe_[1]; }

 private:
  struct Conn;
  struct Segment;
  std::string handle(const std::string& line, std::shared_ptr<const Segment>* get);
  std::string handle_impl(const std::string& line, std::shared_ptr<const Segment>* get);
  std::shared_ptr<const Segment> make_segment(SegmentInfo info, uint64_t bytes);
  bool produce(Conn* c);
  void accept_pending();
  void admit(int fd);
  void refuse(int fd, const std::string& why);
  void on_event(int fd, uint32_t events);
  void read_some(Conn* c);
  void step(Conn* c);
  void run_ready();
  void enqueue(Conn* c);
  bool flush(Conn* c);
  void watch(Conn* c, uint32_t events);
  void drop(int fd);
  void sweep_idle();
  void pause_accept(bool paused);

  MasterLimits limits_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int spare_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  uint16_t port_ = 0;
  bool accept_paused_ = false;
  int64_t accept_resume_ms_ = 0;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Segment>> segments_;
  std::map<int, std::unique_ptr<Conn>> conns_;  // touched by the serving thread only
  std::deque<std::pair<int, uint64_t>> ready_;   // connections with requests left to answer
  uint64_t next_conn_id_ = 0;
  bool trim_pending_ = false;
  std::string ping_reply_;
  std::atomic<uint64_t> active_{0}, accepted_{0}, refused_{0}, idle_closed_{0};
  std::atomic<uint64_t> output_closed_{0}, oom_{0}, segment_count_{0}, registered_bytes_{0};
  std::thread bg_;
};

// A client that keeps one connection to the master and reuses it for every
// call (calls are serialized). A call on a connection the master has since
// closed (idle timeout, restart) is retried once on a fresh connection; all
// requests are idempotent.
class MasterClient {
 public:
  explicit MasterClient(std::string endpoint, int timeout_ms = 10000);  // "host:port"
  ~MasterClient();
  MasterClient(const MasterClient&) = delete;
  MasterClient& operator=(const MasterClient&) = delete;

  void put(const std::string& name, const SegmentInfo& info);
  bool get(const std::string& name, SegmentInfo* info);
  void del(const std::string& name);
  std::string ping();
  // Any request line; returns the reply line (which may start with "ERR").
  std::string call(const std::string& request);
  // Connections opened so far: a change means the master may have restarted
  // (and forgotten what was published on the old connection).
  uint64_t connections_opened() const { return opened_; }
  void disconnect();

 private:
  std::string host_;
  uint16_t port_ = 0;
  int timeout_ms_ = 10000;
  std::mutex mu_;
  int fd_ = -1;
  std::atomic<uint64_t> opened_{0};
};

const char* version();
const char* backend_name();

}  // namespace xfer
