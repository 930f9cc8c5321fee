// Wire format: encoding, validation, and how a serving engine reacts to
// malformed and truncated frames (it drops that connection, keeps serving).
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "harness.h"
#include "xfer/engine.h"
#include "xfer/net.h"
#include "xfer/wire.h"

using namespace xfer;

namespace {
uintptr_t ptr(std::vector<char>& v) { return reinterpret_cast<uintptr_t>(v.data()); }

int dial(uint16_t port) {
  std::string err;
  int fd = net::connect_tcp("127.0.0.1", port, &err);
  if (fd < 0) throw std::runtime_error(err);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// True when the server closed the connection (EOF) rather than answering.
bool closed_by_peer(int fd) {
  char c;
  ssize_t k = ::recv(fd, &c, 1, 0);
  return k == 0 || (k < 0 && errno == ECONNRESET);
}

// Hangs up the sending side, then waits until the server has dropped the
// connection. The server receives a WRITE's payload straight into the region,
// so until it has given up on a truncated frame its bytes may still land
// there: a probe written before then could be overwritten.
void hang_up_and_wait(int fd) {
  ::shutdown(fd, SHUT_WR);
  CHECK(closed_by_peer(fd));
  ::close(fd);
}

void frame(unsigned char* out, uint8_t op, uint64_t addr, uint64_t len, uint64_t id = 7) {
  wire::Header h;
  h.opcode = op;
  h.addr = addr;
  h.length = len;
  h.request_id = id;
  wire::encode(h, out);
}

// The server still answers a proper client after the abuse.
void still_serving(Engine& srv, std::vector<char>& region) {
  Engine cli("probe", "");
  cli.add_peer("srv", "127.0.0.1", srv.port());
  std::vector<char> src(region.size(), 'k');
  cli.write({{ptr(src), "srv", ptr(region), region.size()}});
  CHECK(region == src);
}
}  // namespace

TEST(header_roundtrip) {
  wire::Header h;
  h.opcode = wire::kRead;
  h.request_id = 0x0102030405060708ull;
  h.addr = 0xdeadbeefcafef00dull;
  h.length = 12345;
  unsigned char b[wire::kHeaderSize];
  wire::encode(h, b);
  CHECK(b[0] == 'X' && b[1] == 'F' && b[2] == 'R' && b[3] == '1');
  wire::Header d;
  std::string why;
  CHECK(wire::decode(b, &d, &why));
  CHECK(d.opcode == h.opcode && d.request_id == h.request_id && d.addr == h.addr && d.length == h.length);
}

TEST(decode_rejects_malformed_headers) {
  unsigned char b[wire::kHeaderSize];
  wire::Header d;
  std::string why;
  frame(b, wire::kWrite, 0, 10);
  b[0] ^= 1;
  CHECK(!wire::decode(b, &d, &why) && why == "bad magic");
  frame(b, wire::kWrite, 0, 10);
  b[4] = 9;
  CHECK(!wire::decode(b, &d, &why));
  frame(b, 42, 0, 10);
  CHECK(!wire::decode(b, &d, &why));
  frame(b, wire::kWrite, 0, wire::kMaxFrame + 1);
  CHECK(!wire::decode(b, &d, &why));
  frame(b, wire::kWrite, 0, 10);
  b[13] = 1;  // reserved
  CHECK(!wire::decode(b, &d, &why));
}

TEST(garbage_closes_connection_server_keeps_serving) {
  Engine srv("srv", "");
  std::vector<char> region(4096, 0);
  srv.register_memory(ptr(region), region.size());
  int fd = dial(srv.port());
  const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n garbage garbage garbage";
  CHECK(net::send_all(fd, junk, sizeof(junk)));
  CHECK(closed_by_peer(fd));
  ::close(fd);
  still_serving(srv, region);
}

TEST(oversized_frame_closes_connection) {
  Engine srv("srv", "");
  std::vector<char> region(4096, 0);
  srv.register_memory(ptr(region), region.size());
  int fd = dial(srv.port());
  unsigned char b[wire::kHeaderSize];
  frame(b, wire::kWrite, ptr(region), 10);
  // Patch the length field past the limit.
  uint64_t big = wire::kMaxFrame * 4;
  for (int i = 0; i < 8; ++i) b[32 + i] = static_cast<unsigned char>(big >> (8 * i));
  CHECK(net::send_all(fd, b, sizeof(b)));
  CHECK(closed_by_peer(fd));
  ::close(fd);
  CHECK(region == std::vector<char>(4096, 0));
  still_serving(srv, region);
}

TEST(response_opcode_from_client_closes_connection) {
  Engine srv("srv", "");
  std::vector<char> region(64, 0);
  srv.register_memory(ptr(region), region.size());
  int fd = dial(srv.port());
  unsigned char b[wire::kHeaderSize];
  frame(b, wire::kResponse, ptr(region), 0);
  CHECK(net::send_all(fd, b, sizeof(b)));
  CHECK(closed_by_peer(fd));
  ::close(fd);
  still_serving(srv, region);
}

TEST(truncated_frames_do_not_hurt_the_server) {
  Engine srv("srv", "");
  std::vector<char> region(4096, 0);
  srv.register_memory(ptr(region), region.size());
  {
    // Half a header, then hang up.
    int fd = dial(srv.port());
    unsigned char b[wire::kHeaderSize];
    frame(b, wire::kWrite, ptr(region), 100);
    CHECK(net::send_all(fd, b, 20));
    hang_up_and_wait(fd);
  }
  {
    // Full header, half the payload, then hang up.
    int fd = dial(srv.port());
    unsigned char b[wire::kHeaderSize];
    frame(b, wire::kWrite, ptr(region), 4096);
    CHECK(net::send_all(fd, b, sizeof(b)));
    std::vector<char> half(2048, 'h');
    CHECK(net::send_all(fd, half.data(), half.size()));
    hang_up_and_wait(fd);
  }
  still_serving(srv, region);
}

TEST(refused_write_keeps_the_stream_in_sync) {
  Engine srv("srv", "");
  std::vector<char> region(4096, 0), unregistered(4096, 'u');
  srv.register_memory(ptr(region), region.size());
  int fd = dial(srv.port());
  unsigned char b[wire::kHeaderSize];
  std::vector<char> payload(4096, 'p');
  frame(b, wire::kWrite, ptr(unregistered), payload.size(), 1);
  CHECK(net::send_all(fd, b, sizeof(b)));
  CHECK(net::send_all(fd, payload.data(), payload.size()));
  wire::Header h;
  std::string why;
  CHECK(net::recv_all(fd, b, sizeof(b)) && wire::decode(b, &h, &why));
  CHECK(h.opcode == wire::kResponse && h.request_id == 1 && h.status == wire::kOutOfBounds);
  CHECK(unregistered == std::vector<char>(4096, 'u'));
  // Same connection, a valid READ now succeeds.
  frame(b, wire::kRead, ptr(region), 16, 2);
  CHECK(net::send_all(fd, b, sizeof(b)));
  CHECK(net::recv_all(fd, b, sizeof(b)) && wire::decode(b, &h, &why));
  CHECK(h.status == wire::kOk && h.length == 16 && h.request_id == 2);
  char got[16];
  CHECK(net::recv_all(fd, got, 16));
  ::close(fd);
}
