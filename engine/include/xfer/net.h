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

}  // namespace net
}  // namespace xfer
