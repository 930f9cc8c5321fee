// Bounded servers: the master and the engine close and reap every
// connection, refuse connections over their limits with a one-line reason,
// time out idle connections, and registration never waits on a peer.
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "xfer/engine.h"
#include "xfer/master.h"
#include "xfer/net.h"
#include "xfer/wire.h"

using namespace xfer;
using Clock = std::chrono::steady_clock;

namespace {

uintptr_t ptr(std::vector<char>& v) { return reinterpret_cast<uintptr_t>(v.data()); }

int open_fds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (readdir(d)) ++n;
  closedir(d);
  return n - 3;  // ".", ".." and the DIR's own descriptor
}

int dial(uint16_t port) {
  std::string err;
  int fd = net::connect_tcp("127.0.0.1", port, &err, 5000);
  if (fd < 0) throw std::runtime_error(err);
  net::set_io_timeout(fd, 5000);
  return fd;
}

// Waits until pred() holds, up to ms; returns pred().
template <class F>
bool eventually(F pred, int ms = 5000) {
  auto until = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

std::string line_from(int fd) {
  std::string line;
  net::read_line(fd, &line, 4096);
  return line;
}

// The kBusy frame a refusing engine sends, or "" when something else came.
std::string engine_refusal(int fd) {
  unsigned char hb[wire::kHeaderSize];
  if (!net::recv_all(fd, hb, sizeof(hb))) return "";
  wire::Header h;
  std::string why;
  if (!wire::decode(hb, &h, &why) || h.status != wire::kBusy) return "";
  std::string text(static_cast<size_t>(h.length), '\0');
  if (!net::recv_all(fd, &text[0], text.size())) return "";
  return text;
}

bool closed_by_peer(int fd) {
  char c;
  ssize_t k = ::recv(fd, &c, 1, 0);
  return k == 0 || (k < 0 && errno == ECONNRESET);
}

void frame(unsigned char* out, uint8_t op, uint64_t addr, uint64_t len, uint64_t id = 1) {
  wire::Header h;
  h.opcode = op;
  h.addr = addr;
  h.length = len;
  h.request_id = id;
  wire::encode(h, out);
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

TEST(master_client_reuses_one_connection) {
  MasterServer m("127.0.0.1", 0);
  m.start_background();
  MasterClient c("127.0.0.1:" + std::to_string(m.port()));
  SegmentInfo info;
  info.host = "h";
  info.port = 1;
  for (int i = 0; i < 500; ++i) {
    c.ping();
    c.put("seg", info);
  }
  CHECK(c.connections_opened() == 1);
  CHECK(m.stats().accepted == 1 && m.stats().active == 1);
  c.disconnect();
  CHECK(eventually([&] { return m.stats().active == 0; }));
  m.stop();
}

TEST(master_closes_every_finished_connection) {
  MasterServer m("127.0.0.1", 0);
  m.start_background();
  const int before = open_fds();
  for (int i = 0; i < 300; ++i) {
    MasterClient c("127.0.0.1:" + std::to_string(m.port()));
    CHECK(c.ping().rfind("OK xfer-master", 0) == 0);
  }
  CHECK(eventually([&] { return m.stats().active == 0; }));
  CHECK(m.stats().accepted == 300);
  // Client and server sides both gone: the process holds what it held before.
  CHECK(eventually([&] { return open_fds() == before; }));
  m.stop();
}

TEST(master_refuses_connections_over_its_limit) {
  MasterLimits lim;
  lim.max_connections = 4;
  MasterServer m("127.0.0.1", 0, lim);
  m.start_background();
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) held.push_back(dial(m.port()));
  CHECK(eventually([&] { return m.stats().active == 4; }));
  int extra = dial(m.port());
  std::string refusal = line_from(extra);
  CHECK(refusal.rfind("ERR busy: ", 0) == 0);
  CHECK(refusal.find("at most 4 connections") != std::string::npos);
  CHECK(closed_by_peer(extra));
  net::close_fd(extra);
  MasterClient c("127.0.0.1:" + std::to_string(m.port()));
  bool refused = false;
  try {
    c.ping();
  } catch (const std::exception& e) {
    refused = std::string(e.what()).find("refused the connection") != std::string::npos;
  }
  CHECK(refused);
  for (int fd : held) net::close_fd(fd);
  CHECK(eventually([&] { return m.stats().active == 0; }));
  CHECK(c.ping().rfind("OK", 0) == 0);  // served again once there is room
  CHECK(m.stats().refused == 2);
  m.stop();
}

TEST(master_closes_idle_connections_and_clients_reconnect) {
  MasterLimits lim;
  lim.idle_timeout_ms = 150;
  MasterServer m("127.0.0.1", 0, lim);
  m.start_background();
  int idle = dial(m.port());
  auto t0 = Clock::now();
  CHECK(closed_by_peer(idle));
  CHECK(ms_since(t0) < 3000);
  net::close_fd(idle);
  MasterClient c("127.0.0.1:" + std::to_string(m.port()));
  c.ping();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  CHECK(m.stats().idle_closed >= 2);
  CHECK(c.ping().rfind("OK", 0) == 0);  // the stale connection is replaced transparently
  CHECK(c.connections_opened() == 2);
  m.stop();
}

TEST(master_answers_pipelined_and_half_closed_requests) {
  MasterServer m("127.0.0.1", 0);
  m.start_background();
  int fd = dial(m.port());
  std::string req = "PING\nLIST\nPING\n";
  CHECK(net::send_all(fd, req.data(), req.size()));
  ::shutdown(fd, SHUT_WR);
  CHECK(line_from(fd).rfind("OK xfer-master", 0) == 0);
  CHECK(line_from(fd) == "OK 0");
  CHECK(line_from(fd).rfind("OK xfer-master", 0) == 0);
  CHECK(closed_by_peer(fd));
  net::close_fd(fd);
  m.stop();
}

TEST(master_streams_get_pages_list_and_counts_replaced_segments) {
  MasterServer m("127.0.0.1", 0);
  m.start_background();
  MasterClient c("127.0.0.1:" + std::to_string(m.port()));
  SegmentInfo big;
  big.host = "10.0.0.1";
  big.port = 7;
  for (uint64_t i = 0; i < 20000; ++i) big.regions.push_back({i << 12, 4096, i % 2 ? "host" : "device"});
  c.put("big", big);
  SegmentInfo small;
  small.host = "10.0.0.2";
  small.port = 8;
  small.regions.push_back({1, 2, "host"});
  for (int i = 0; i < 600; ++i) c.put(std::string(200, static_cast<char>('a' + i % 26)) + std::to_string(i), small);
  // A GET reply of several reply chunks, pipelined between PINGs, arrives whole and in order.
  int fd = dial(m.port());
  std::string req = "PING\nGET big\nPING\n";
  CHECK(net::send_all(fd, req.data(), req.size()));
  ::shutdown(fd, SHUT_WR);
  CHECK(line_from(fd).rfind("OK xfer-master", 0) == 0);
  std::string reply;
  CHECK(net::read_line(fd, &reply, 1 << 20));
  CHECK(reply.size() > 4 * kMasterReplyChunk);
  CHECK(reply.rfind("OK 10.0.0.1 7 20000 0 4096 device 4096 4096 host ", 0) == 0);
  const std::string last = " 81915904 4096 host";  // region 19999
  CHECK(reply.size() > last.size() && reply.compare(reply.size() - last.size(), last.size(), last) == 0);
  CHECK(line_from(fd).rfind("OK xfer-master", 0) == 0);
  CHECK(closed_by_peer(fd));
  net::close_fd(fd);
  SegmentInfo got;
  CHECK(c.get("big", &got) && got.regions.size() == 20000 && got.regions[19999].addr == (19999ull << 12));
  // LIST pages: at most one reply chunk of names each, "MORE" while names follow, every name once.
  size_t names = 0, pages = 0;
  std::string after;
  for (bool more = true; more && pages < 100; ++pages) {
    std::string page = c.call(after.empty() ? "LIST" : "LIST " + after);
    CHECK(page.rfind("OK ", 0) == 0 && page.size() < kMasterReplyChunk + 512);
    std::vector<std::string> words;
    for (size_t at = 0, sp; at <= page.size(); at = sp + 1) {
      sp = page.find(' ', at);
      if (sp == std::string::npos) sp = page.size();
      words.push_back(page.substr(at, sp - at));
    }
    const size_t n = std::stoul(words[1]);
    CHECK(words.size() == 2 + n || (words.size() == 3 + n && words.back() == "MORE"));
    more = words.size() == 3 + n;
    names += n;
    if (n > 0) after = words[1 + n];
  }
  CHECK(names == 601 && pages > 1);
  // A replaced segment counts until the reply sending it is done.
  int slow = dial(m.port());
  int tiny = 4096;
  ::setsockopt(slow, SOL_SOCKET, SO_RCVBUF, &tiny, sizeof(tiny));
  std::string get = "GET big\n";
  CHECK(net::send_all(slow, get.data(), get.size()));
  char ok[3] = {0, 0, 0};
  CHECK(::recv(slow, ok, 2, MSG_WAITALL) == 2 && std::string(ok) == "OK");  // the reply has begun
  const uint64_t before = m.stats().registered_bytes;
  c.del("big");
  CHECK(m.stats().registered_bytes == before);  // still being sent
  net::close_fd(slow);
  CHECK(eventually([&] { return m.stats().registered_bytes < before; }));
  for (int i = 0; i < 600; ++i) c.del(std::string(200, static_cast<char>('a' + i % 26)) + std::to_string(i));
  CHECK(m.stats().registered_bytes == 0 && m.stats().segments == 0);
  m.stop();
}

TEST(master_out_of_descriptors_refuses_and_does_not_spin) {
  int to_child[2];
  CHECK(pipe(to_child) == 0);
  int from_child[2];
  CHECK(pipe(from_child) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    ::close(to_child[1]);
    ::close(from_child[0]);
    rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = 256;  // few descriptors to use up, whatever the limit of the test run
    setrlimit(RLIMIT_NOFILE, &rl);
    MasterServer m("127.0.0.1", 0);
    // Use up every descriptor but the ones the server already holds.
    std::vector<int> hog;
    for (int fd; (fd = net::open_spare_fd()) >= 0;) hog.push_back(fd);
    uint16_t port = m.port();
    ssize_t ignored = ::write(from_child[1], &port, sizeof(port));
    (void)ignored;
    std::thread t([&] { m.serve(); });
    char c;
    ignored = ::read(to_child[0], &c, 1);  // until the parent is done
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    ignored = ::write(from_child[1], &cpu, sizeof(cpu));
    m.stop();
    t.join();
    _exit(0);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  uint16_t port = 0;
  CHECK(::read(from_child[0], &port, sizeof(port)) == sizeof(port));
  std::vector<int> fds;
  int refused = 0;
  for (int i = 0; i < 5; ++i) {
    int fd = dial(port);
    fds.push_back(fd);
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 500) > 0 && line_from(fd).find("out of file descriptors") != std::string::npos) ++refused;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // a spinning accept loop burns this second
  char go = 'x';
  CHECK(::write(to_child[1], &go, 1) == 1);
  double cpu = -1;
  CHECK(::read(from_child[0], &cpu, sizeof(cpu)) == sizeof(cpu));
  int status = 0;
  waitpid(pid, &status, 0);
  for (int fd : fds) net::close_fd(fd);
  ::close(to_child[1]);
  ::close(from_child[0]);
  std::printf("     out of descriptors: %d of 5 refused, master used %.3f s CPU\n", refused, cpu);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(refused >= 1);
  CHECK(cpu >= 0 && cpu < 0.5);
}

TEST(engine_out_of_descriptors_refuses_and_does_not_spin) {
  int to_child[2];
  CHECK(pipe(to_child) == 0);
  int from_child[2];
  CHECK(pipe(from_child) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    ::close(to_child[1]);
    ::close(from_child[0]);
    rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = 256;
    setrlimit(RLIMIT_NOFILE, &rl);
    Engine e("emfile", "");
    std::vector<int> hog;
    for (int fd; (fd = net::open_spare_fd()) >= 0;) hog.push_back(fd);
    uint16_t port = e.port();
    ssize_t ignored = ::write(from_child[1], &port, sizeof(port));
    (void)ignored;
    char c;
    ignored = ::read(to_child[0], &c, 1);
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    ignored = ::write(from_child[1], &cpu, sizeof(cpu));
    for (int fd : hog) ::close(fd);
    e.close();
    _exit(0);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  uint16_t port = 0;
  CHECK(::read(from_child[0], &port, sizeof(port)) == sizeof(port));
  std::vector<int> fds;
  int refused = 0;
  for (int i = 0; i < 5; ++i) {
    int fd = dial(port);
    fds.push_back(fd);
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 500) > 0 && engine_refusal(fd).find("out of file descriptors") != std::string::npos) ++refused;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  char go = 'x';
  CHECK(::write(to_child[1], &go, 1) == 1);
  double cpu = -1;
  CHECK(::read(from_child[0], &cpu, sizeof(cpu)) == sizeof(cpu));
  int status = 0;
  waitpid(pid, &status, 0);
  for (int fd : fds) net::close_fd(fd);
  ::close(to_child[1]);
  ::close(from_child[0]);
  std::printf("     out of descriptors: %d of 5 refused, engine used %.3f s CPU\n", refused, cpu);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(refused >= 1);
  CHECK(cpu >= 0 && cpu < 0.5);
}

TEST(engine_refuses_connections_over_its_limit) {
  EngineOptions o;
  o.max_connections = 3;
  Engine srv("lim-srv", "", o);
  std::vector<char> region(4096, 0);
  srv.register_memory(ptr(region), region.size());
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(dial(srv.port()));
  CHECK(eventually([&] { return srv.served_connections() == 3; }));
  int extra = dial(srv.port());
  std::string reason = engine_refusal(extra);
  CHECK(reason.find("serves at most 3 connections") != std::string::npos);
  CHECK(closed_by_peer(extra));
  net::close_fd(extra);
  Engine cli("lim-cli", "");
  cli.add_peer("lim-srv", "127.0.0.1", srv.port());
  std::vector<char> src(4096, 'q');
  std::string msg;
  try {
    cli.write({{ptr(src), "lim-srv", ptr(region), src.size()}});
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(msg.find("refused the connection") != std::string::npos);
  CHECK(msg.find("at most 3 connections") != std::string::npos);
  for (int fd : held) net::close_fd(fd);
  CHECK(eventually([&] { return srv.served_connections() == 0; }));
  cli.write({{ptr(src), "lim-srv", ptr(region), src.size()}});
  CHECK(region == src);
  CHECK(srv.refused_connections() == 2);
}

TEST(engine_times_out_idle_peers_and_clients_reconnect) {
  EngineOptions o;
  o.idle_timeout_ms = 200;
  Engine srv("idle-srv", "", o);
  Engine cli("idle-cli", "");
  cli.add_peer("idle-srv", "127.0.0.1", srv.port());
  std::vector<char> region(1 << 16, 0);
  srv.register_memory(ptr(region), region.size());
  int idle = dial(srv.port());
  CHECK(closed_by_peer(idle));
  net::close_fd(idle);
  // A peer stalled in the middle of a frame is dropped too.
  int stalled = dial(srv.port());
  unsigned char hb[wire::kHeaderSize];
  frame(hb, wire::kWrite, ptr(region), region.size());
  CHECK(net::send_all(stalled, hb, sizeof(hb)));
  CHECK(net::send_all(stalled, region.data(), 100));
  CHECK(closed_by_peer(stalled));
  net::close_fd(stalled);
  std::vector<char> src(region.size(), 'i');
  cli.write({{ptr(src), "idle-srv", ptr(region), src.size()}});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the pooled connection times out
  CHECK(srv.served_connections() == 0);
  std::vector<char> back(region.size(), 0);
  cli.read({{ptr(back), "idle-srv", ptr(region), back.size()}});
  CHECK(back == src);
}

TEST(registration_does_not_wait_for_stalled_peers) {
  Engine srv("stall-srv", "");
  const size_t big = 64u << 20;
  std::vector<char> region(big, 'r');
  srv.register_memory(ptr(region), big);
  std::vector<char> other(big / 4, 'o');
  srv.register_memory(ptr(other), other.size());

  // A writer that sent a header and 1 KiB of a 4 MiB payload, and a reader
  // that asked for 64 MiB and reads nothing.
  int writer = dial(srv.port());
  unsigned char hb[wire::kHeaderSize];
  frame(hb, wire::kWrite, ptr(other), 4u << 20);
  CHECK(net::send_all(writer, hb, sizeof(hb)));
  std::vector<char> payload(4u << 20, 'w');
  CHECK(net::send_all(writer, payload.data(), 1024));
  int reader = dial(srv.port());
  frame(hb, wire::kRead, ptr(region), big);
  CHECK(net::send_all(reader, hb, sizeof(hb)));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));

  std::vector<char> scratch(1 << 20);
  double worst = 0;
  for (int i = 0; i < 100; ++i) {
    auto t0 = Clock::now();
    srv.register_memory(ptr(scratch), scratch.size());
    srv.unregister_memory(ptr(scratch));
    worst = std::max(worst, ms_since(t0));
  }
  // Unregistering the very regions the stalled peers are using returns too.
  auto t0 = Clock::now();
  srv.unregister_memory(ptr(region));
  srv.unregister_memory(ptr(other));
  double unreg = ms_since(t0);
  std::printf("     with stalled peers: worst register+unregister %.2f ms, unregister of their regions %.2f ms\n",
              worst, unreg);
  CHECK(worst < 1000);
  CHECK(unreg < 1000);

  // The writer, resuming, is told its region is gone; the reader gets less
  // than it asked for and then the end of the stream, never a hang.
  CHECK(net::send_all(writer, payload.data() + 1024, payload.size() - 1024));
  unsigned char rb[wire::kHeaderSize];
  CHECK(net::recv_all(writer, rb, sizeof(rb)));
  wire::Header h;
  std::string why;
  CHECK(wire::decode(rb, &h, &why) && h.status == wire::kOutOfBounds);
  size_t got = 0;
  std::vector<char> sink(1 << 20);
  while (true) {
    ssize_t k = ::recv(reader, sink.data(), sink.size(), 0);
    if (k <= 0) break;
    got += static_cast<size_t>(k);
  }
  CHECK(got < big + wire::kHeaderSize);
  net::close_fd(writer);
  net::close_fd(reader);
}

TEST(engine_republishes_after_the_master_restarts) {
  uint16_t port;
  std::unique_ptr<MasterServer> m(new MasterServer("127.0.0.1", 0));
  port = m->port();
  m->start_background();
  const std::string ep = "127.0.0.1:" + std::to_string(port);
  EngineOptions o;
  o.master_heartbeat_ms = 50;
  Engine e("phoenix", ep, o);
  std::vector<char> a(4096, 'a'), b(4096, 'b');
  e.register_memory(ptr(a), a.size());
  m.reset();  // the master goes away, with everything it knew
  std::string msg;
  try {
    e.register_memory(ptr(b), b.size());
  } catch (const Error& err) {
    msg = err.what();
  }
  CHECK(msg.find("not registered") != std::string::npos);
  CHECK(e.regions().size() == 1);
  m.reset(new MasterServer("127.0.0.1", port));
  m->start_background();
  MasterClient c(ep);
  SegmentInfo info;
  CHECK(eventually([&] { return c.get("phoenix", &info); }, 5000));
  CHECK(info.regions.size() == 1 && info.regions[0].addr == ptr(a));
  e.register_memory(ptr(b), b.size());
  CHECK(c.get("phoenix", &info) && info.regions.size() == 2);
  m->stop();
}
