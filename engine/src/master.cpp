#include "xfer/master.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

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
constexpr size_t kMaxLine = 1 << 20;
constexpr size_t kMaxRegions = 65536;

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 256) return false;
  for (char c : s)
    if (c <= ' ' || c == 0x7f) return false;
  return true;
}
}  // namespace

MasterServer::MasterServer(const std::string& host, uint16_t port) {
  std::string err;
  listen_fd_ = net::listen_tcp(host, port, &port_, &err);
  if (listen_fd_ < 0) throw std::runtime_error("xfer-master: " + err);
  if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    net::close_fd(listen_fd_);
    throw std::runtime_error("xfer-master: pipe failed");
  }
}

MasterServer::~MasterServer() {
  stop();
  if (bg_.joinable()) bg_.join();
  net::close_fd(listen_fd_);
  net::close_fd(wake_pipe_[0]);
  net::close_fd(wake_pipe_[1]);
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
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    int rc = ::poll(fds, 2, -1);
    if (rc < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents) break;
    if (fds[0].revents & POLLIN) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard<std::mutex> lk(conn_mu_);
      conn_fds_.push_back(fd);
      conn_threads_.emplace_back([this, fd] { serve_connection(fd); });
    }
  }
  stopping_ = true;
  // New clients get "connection refused" instead of waiting in the backlog.
  net::close_fd(listen_fd_);
  listen_fd_ = -1;
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lk(conn_mu_);
    for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);
    threads.swap(conn_threads_);
  }
  for (auto& t : threads) t.join();
  std::lock_guard<std::mutex> lk(conn_mu_);
  for (int fd : conn_fds_) net::close_fd(fd);
  conn_fds_.clear();
}

void MasterServer::serve_connection(int fd) {
  std::string line;
  while (!stopping_ && net::read_line(fd, &line, kMaxLine)) {
    std::string reply = handle(line) + "\n";
    if (!net::send_all(fd, reply.data(), reply.size())) break;
  }
  ::shutdown(fd, SHUT_RDWR);
}

std::string MasterServer::handle(const std::string& line) {
  std::istringstream in(line);
  std::string cmd;
  in >> cmd;
  if (cmd == "PING") return std::string("OK xfer-master ") + version() + " " + backend_name();
  if (cmd == "PUT") {
    std::string name;
    SegmentInfo info;
    unsigned port = 0;
    size_t n = 0;
    if (!(in >> name >> info.host >> port >> n) || !valid_name(name) || port == 0 || port > 65535 ||
        n > kMaxRegions)
      return "ERR malformed PUT";
    info.port = static_cast<uint16_t>(port);
    for (size_t i = 0; i < n; ++i) {
      RegionInfo r;
      if (!(in >> r.addr >> r.length >> r.kind)) return "ERR malformed region list";
      info.regions.push_back(r);
    }
    std::lock_guard<std::mutex> lk(mu_);
    segments_[name] = std::move(info);
    return "OK";
  }
  if (cmd == "GET") {
    std::string name;
    if (!(in >> name)) return "ERR malformed GET";
    std::lock_guard<std::mutex> lk(mu_);
    auto it = segments_.find(name);
    if (it == segments_.end()) return "ERR no segment named " + name;
    std::ostringstream out;
    out << "OK " << it->second.host << " " << it->second.port << " " << it->second.regions.size();
    for (auto& r : it->second.regions) out << " " << r.addr << " " << r.length << " " << r.kind;
    return out.str();
  }
  if (cmd == "DEL") {
    std::string name;
    if (!(in >> name)) return "ERR malformed DEL";
    std::lock_guard<std::mutex> lk(mu_);
    segments_.erase(name);
    return "OK";
  }
  if (cmd == "LIST") {
    std::lock_guard<std::mutex> lk(mu_);
    std::ostringstream out;
    out << "OK " << segments_.size();
    for (auto& kv : segments_) out << " " << kv.first;
    return out.str();
  }
  return "ERR unknown command";
}

MasterClient::MasterClient(std::string endpoint) {
  if (!net::split_endpoint(endpoint, &host_, &port_))
    throw std::runtime_error("master endpoint must be host:port, got '" + endpoint + "'");
}

std::string MasterClient::call(const std::string& request) {
  std::string err;
  int fd = net::connect_tcp(host_, port_, &err);
  if (fd < 0) throw std::runtime_error("cannot reach xfer-master: " + err);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  std::string req = request + "\n";
  std::string reply;
  bool ok = net::send_all(fd, req.data(), req.size()) && net::read_line(fd, &reply, kMaxLine);
  net::close_fd(fd);
  if (!ok) throw std::runtime_error("xfer-master closed the connection");
  return reply;
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
    if (!(in >> r.addr >> r.length >> r.kind)) return false;
    info->regions.push_back(r);
  }
  return true;
}

void MasterClient::del(const std::string& name) { call("DEL " + name); }

}  // namespace xfer
