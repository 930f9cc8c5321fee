#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "harness.h"
#include "xfer/engine.h"
#include "xfer/master.h"
#include "xfer/net.h"

using namespace xfer;

TEST(master_put_get_del) {
  MasterServer m("127.0.0.1", 0);
  m.start_background();
  std::string ep = "127.0.0.1:" + std::to_string(m.port());
  MasterClient c(ep);
  CHECK(c.ping().rfind("OK xfer-master", 0) == 0);
  SegmentInfo in;
  in.host = "10.0.0.1";
  in.port = 1234;
  in.regions.push_back({4096, 100, "host"});
  in.regions.push_back({1ull << 40, 1 << 20, "device"});
  c.put("seg", in);
  SegmentInfo out;
  CHECK(c.get("seg", &out));
  CHECK(out.host == "10.0.0.1" && out.port == 1234 && out.regions.size() == 2);
  CHECK(out.regions[1].addr == (1ull << 40) && out.regions[1].kind == "device");
  c.del("seg");
  CHECK(!c.get("seg", &out));
  m.stop();
}

TEST(master_rejects_malformed_lines) {
  MasterServer m("127.0.0.1", 0);
  m.start_background();
  MasterClient c("127.0.0.1:" + std::to_string(m.port()));
  SegmentInfo bad;
  bad.host = "h";
  bad.port = 0;
  CHECK_THROWS(c.put("seg", bad));
  CHECK(c.ping().rfind("OK", 0) == 0);
  m.stop();
}

TEST(master_refuses_negative_and_non_decimal_regions) {
  MasterServer m("127.0.0.1", 0);
  m.start_background();
  MasterClient c("127.0.0.1:" + std::to_string(m.port()));
  // An istream reads "-1" into a uint64_t as 2^64-1: the master must refuse it.
  for (const char* region : {"-1 10 host", "4096 -1 host", "+4096 10 host", "0x10 10 host",
                             "18446744073709551616 10 host", "4096 1e3 host"}) {
    std::string reply = c.call(std::string("PUT seg h 1234 1 ") + region);
    CHECK(reply.rfind("ERR malformed region list", 0) == 0);
  }
  SegmentInfo out;
  CHECK(!c.get("seg", &out));
  CHECK(c.call("PUT seg h 1234 1 18446744073709551615 0 host").rfind("OK", 0) == 0);
  CHECK(c.get("seg", &out) && out.regions.size() == 1 && out.regions[0].addr == UINT64_MAX);
  m.stop();
}

TEST(engines_find_each_other_through_master) {
  MasterServer m("127.0.0.1", 0);
  m.start_background();
  std::string ep = "127.0.0.1:" + std::to_string(m.port());
  Engine a("alpha", ep), b("beta", ep);
  std::vector<char> region(1 << 20, 0);
  b.register_memory(reinterpret_cast<uintptr_t>(region.data()), region.size());
  SegmentInfo info = a.peer("beta");
  CHECK(info.port == b.port() && info.regions.size() == 1);
  CHECK(info.regions[0].addr == reinterpret_cast<uintptr_t>(region.data()));
  std::vector<char> src(region.size(), 's');
  a.write({{reinterpret_cast<uintptr_t>(src.data()), "beta", info.regions[0].addr, src.size()}});
  CHECK(region == src);
  m.stop();
}

TEST(master_binary_starts_and_stops_on_sigterm) {
  const char* bin = std::getenv("XFER_MASTER_BIN");
  if (!bin) return;
  int out[2];
  CHECK(pipe(out) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    execl(bin, bin, "--host", "127.0.0.1", "--port", "0", static_cast<char*>(nullptr));
    _exit(127);
  }
  ::close(out[1]);
  std::string line;
  char ch;
  while (::read(out[0], &ch, 1) == 1 && ch != '\n') line.push_back(ch);
  if (line.rfind("xfer-master listening on ", 0) != 0) kill(pid, SIGKILL);
  auto pos = line.rfind(':');
  CHECK(line.rfind("xfer-master listening on ", 0) == 0 && pos != std::string::npos);
  MasterClient c("127.0.0.1:" + line.substr(pos + 1));
  CHECK(c.ping().rfind("OK xfer-master", 0) == 0);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  ::close(out[0]);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
