#include "xfer/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>

#include <cstring>

namespace xfer {
namespace net {
namespace {

bool resolve(const std::string& host, uint16_t port, sockaddr_in* sa, std::string* err) {
  std::memset(sa, 0, sizeof(*sa));
  sa->sin_family = AF_INET;
  sa->sin_port = htons(port);
  const std::string h = host.empty() ? "0.0.0.0" : host;
  if (inet_pton(AF_INET, h.c_str(), &sa->sin_addr) == 1) return true;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (getaddrinfo(h.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) {
    if (err) *err = "cannot resolve host '" + h + "'";
    return false;
  }
  sa->sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return true;
}

}  // namespace

void tune_socket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  int buf = 8 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
}

int listen_tcp(const std::string& host, uint16_t port, uint16_t* bound_port, std::string* err) {
  sockaddr_in sa;
  if (!resolve(host, port, &sa, err)) return -1;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    if (err) *err = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    if (err) *err = "bind/listen " + host + ":" + std::to_string(port) + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  socklen_t len = sizeof(sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  if (bound_port) *bound_port = ntohs(sa.sin_port);
  return fd;
}

int connect_tcp(const std::string& host, uint16_t port, std::string* err) {
  return connect_tcp(host, port, err, -1);
}

int connect_tcp(const std::string& host, uint16_t port, std::string* err, int timeout_ms) {
  sockaddr_in sa;
  if (!resolve(host, port, &sa, err)) return -1;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    if (err) *err = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  tune_socket(fd);
  const std::string where = "connect " + host + ":" + std::to_string(port) + ": ";
  if (timeout_ms >= 0) set_nonblocking(fd, true);
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && timeout_ms >= 0 && errno == EINPROGRESS) {
    if (!wait_fd(fd, POLLOUT, timeout_ms)) {
      if (err) *err = where + "timed out after " + std::to_string(timeout_ms) + " ms";
      ::close(fd);
      return -1;
    }
    int soerr = 0;
    socklen_t len = sizeof(soerr);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
    rc = soerr == 0 ? 0 : -1;
    errno = soerr;
  }
  if (rc != 0) {
    if (err) *err = where + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  if (timeout_ms >= 0) set_nonblocking(fd, false);
  return fd;
}

bool send_all(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool recv_all(int fd, void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t k = ::recv(fd, p, n, MSG_WAITALL);
    if (k < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (k == 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool writev_all(int fd, struct iovec* iov, int iovcnt) {
  while (iovcnt > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(iovcnt);
    ssize_t k = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    size_t left = static_cast<size_t>(k);
    while (iovcnt > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --iovcnt;
    }
    if (iovcnt > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return true;
}

bool read_line(int fd, std::string* line, size_t max_len) {
  line->clear();
  char c;
  while (true) {
    ssize_t k = ::recv(fd, &c, 1, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    if (c == '\n') return true;
    if (line->size() >= max_len) return false;
    line->push_back(c);
  }
}

bool split_endpoint(const std::string& ep, std::string* host, uint16_t* port) {
  auto pos = ep.rfind(':');
  if (pos == std::string::npos || pos + 1 >= ep.size()) return false;
  *host = ep.substr(0, pos);
  unsigned long v = 0;
  for (size_t i = pos + 1; i < ep.size(); ++i) {
    if (ep[i] < '0' || ep[i] > '9') return false;
    v = v * 10 + static_cast<unsigned long>(ep[i] - '0');
    if (v > 65535) return false;
  }
  *port = static_cast<uint16_t>(v);
  return true;
}

void close_fd(int fd) {
  if (fd >= 0) ::close(fd);
}

void set_io_timeout(int fd, int timeout_ms) {
  if (timeout_ms <= 0) return;
  timeval tv;
  tv.tv_sec = timeout_ms / 1000;
  tv.tv_usec = (timeout_ms % 1000) * 1000;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

bool set_nonblocking(int fd, bool on) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0) return false;
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  return ::fcntl(fd, F_SETFL, flags) == 0;
}

bool wait_fd(int fd, short events, int timeout_ms) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  while (true) {
    int left = -1;
    if (timeout_ms >= 0) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
      left = ms < 0 ? 0 : static_cast<int>(ms);
    }
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, left);
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return true;  // let the next socket call report the error
  }
}

long fd_limit() {
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 1L << 20;
  return static_cast<long>(rl.rlim_cur);
}

int open_spare_fd() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

}  // namespace net
}  // namespace xfer
