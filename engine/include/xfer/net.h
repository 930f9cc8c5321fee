// Small blocking-socket helpers shared by the engine and the master.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace xfer {
namespace net {

// Listening socket bound to host:port (port 0 picks a free one).
int listen_tcp(const std::string& host, uint16_t port, uint16_t* bound_port, std::string* err);
int connect_tcp(const std::string& host, uint16_t port, std::string* err);
// Same, giving up after timeout_ms (< 0: wait as long as the kernel does).
int connect_tcp(const std::string& host, uint16_t port, std::string* err, int timeout_ms);
// TCP_NODELAY and large socket buffers for bulk transfer.
void tune_socket(int fd);

// Loop until all bytes moved; false on EOF or error.
bool send_all(int fd, const void* buf, size_t n);
bool recv_all(int fd, void* buf, size_t n);
// writev until every iovec is sent (the array is modified).
bool writev_all(int fd, struct iovec* iov, int iovcnt);

bool read_line(int fd, std::string* line, size_t max_len);

// "host:port" -> parts; false when malformed.
bool split_endpoint(const std::string& ep, std::string* host, uint16_t* port);

void close_fd(int fd);

// SO_RCVTIMEO and SO_SNDTIMEO: a blocking call that makes no progress for
// timeout_ms fails (EAGAIN). timeout_ms <= 0 leaves the socket without one.
void set_io_timeout(int fd, int timeout_ms);
bool set_nonblocking(int fd, bool on);
// poll() for `events` (POLLIN, POLLOUT); true when ready (or in error, which
// the next call reports), false on timeout. timeout_ms < 0 waits forever.
bool wait_fd(int fd, short events, int timeout_ms);
// Soft RLIMIT_NOFILE of this process.
long fd_limit();
// A descriptor held in reserve (/dev/null): a server out of descriptors
// (EMFILE) closes it to accept one pending connection, answer it with a
// refusal and close it, instead of leaving it in the backlog and spinning.
int open_spare_fd();

}  // namespace net
}  // namespace xfer
