// Metadata service: segment name -> endpoint and registered regions.
//
// Line protocol (one request per line, one reply line):
//   PING                               -> OK xfer-master <version> <backend>
//   PUT <name> <host> <port> <n> (<addr> <len> <kind>)*   -> OK
//   GET <name>                         -> OK <host> <port> <n> (<addr> <len> <kind>)*
//   DEL <name>                         -> OK
//   LIST                               -> OK <n> <name>*
// Errors reply "ERR <reason>". Addresses and lengths are decimal.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace xfer {

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

class MasterServer {
 public:
  MasterServer(const std::string& host, uint16_t port);
  ~MasterServer();
  MasterServer(const MasterServer&) = delete;
  MasterServer& operator=(const MasterServer&) = delete;

  uint16_t port() const { return port_; }
  // Serves until stop() (from another thread or a signal-driven wakeup).
  void serve();
  void start_background();
  void stop();
  // Writing one byte here (async-signal-safe) makes serve() return.
  int wake_fd() const { return wake_pipe_[1]; }

 private:
  std::string handle(const std::string& line);
  void serve_connection(int fd);

  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::map<std::string, SegmentInfo> segments_;
  std::mutex conn_mu_;
  std::vector<int> conn_fds_;
  std::vector<std::thread> conn_threads_;
  std::thread bg_;
};

class MasterClient {
 public:
  explicit MasterClient(std::string endpoint);  // "host:port"
  void put(const std::string& name, const SegmentInfo& info);
  bool get(const std::string& name, SegmentInfo* info);
  void del(const std::string& name);
  std::string ping();

 private:
  std::string call(const std::string& request);
  std::string host_;
  uint16_t port_ = 0;
};

const char* version();
const char* backend_name();

}  // namespace xfer
