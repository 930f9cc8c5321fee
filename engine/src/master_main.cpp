// xfer-master: the metadata server. Links no GPU runtime.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "xfer/master.h"

namespace {
int g_wake_fd = -1;

void on_signal(int) {
  if (g_wake_fd >= 0) {
    char c = 's';
    ssize_t ignored = ::write(g_wake_fd, &c, 1);
    (void)ignored;
  }
}

// BYTES with an optional binary suffix (K, M, G, T); false when malformed.
bool parse_bytes(const std::string& v, uint64_t* out) {
  if (v.empty() || v[0] < '0' || v[0] > '9') return false;
  char* end = nullptr;
  unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  std::string suffix = end;
  int shift = 0;
  if (suffix == "" || suffix == "B") shift = 0;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB") shift = 10;
  else if (suffix == "M" || suffix == "MiB") shift = 20;
  else if (suffix == "G" || suffix == "GiB") shift = 30;
  else if (suffix == "T" || suffix == "TiB") shift = 40;
  else return false;
  if (n > (~0ull >> shift)) return false;
  *out = static_cast<uint64_t>(n) << shift;
  return true;
}

void usage(FILE* f) {
  std::fprintf(f,
               "usage: xfer-master [--host ADDR] [--port N] [--max-connections N] [--idle-timeout SECONDS]\n"
               "                   [--max-segments N] [--max-registered-bytes BYTES]\n"
               "                   [--max-output-buffer BYTES] [--version]\n"
               "  --host ADDR            address to listen on (default 0.0.0.0)\n"
               "  --port N               TCP port; 0 picks a free one (default 0)\n"
               "  --max-connections N    concurrent client connections (default 1024, at most what\n"
               "                         RLIMIT_NOFILE leaves room for); more get 'ERR busy: ...'\n"
               "  --idle-timeout SECONDS close a connection that has not completed a request for this\n"
               "                         long, whatever bytes it drips (default 60; 0 never)\n"
               "  --max-segments N       segments held; a PUT of one more is answered 'ERR segment limit'\n"
               "                         (default 65536; 0 no limit)\n"
               "  --max-registered-bytes BYTES\n"
               "                         metadata bytes the segments hold; a PUT over it is answered\n"
               "                         'ERR registered bytes limit' (default 256M; K, M, G suffixes; 0 no limit)\n"
               "  --max-output-buffer BYTES\n"
               "                         unsent replies a connection may hold when its next request is\n"
               "                         answered; over it the client is disconnected (default 256K; 0 no limit)\n"
               "Memory is bounded by --max-registered-bytes (a segment replaced or deleted while a GET\n"
               "reply still sends it counts until that reply is done) plus, for each of at most\n"
               "--max-connections connections, one request line (at most 1 MiB, and one 64 KiB read) and\n"
               "at most --max-output-buffer + 64 KiB of unsent replies, whatever the replies' sizes and\n"
               "however slowly they are read: a GET reply is produced 64 KiB at a time as its client reads\n"
               "it; a LIST reply holds at most 64 KiB of names and ends in 'MORE' when names follow\n"
               "(ask 'LIST <last name>' for them).\n"
               "Prints 'xfer-master listening on HOST:PORT' once ready, then its limits;\n"
               "SIGTERM/SIGINT stop it.\n");
}
}  // namespace

int main(int argc, char** argv) {
  std::string host = "0.0.0.0";
  long port = 0;
  xfer::MasterLimits limits;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--version") {
      std::printf("xfer-master %s (backend %s)\n", xfer::version(), xfer::backend_name());
      return 0;
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else if (a == "--max-connections" && i + 1 < argc) {
      std::string v = argv[++i];
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > (1L << 24)) {
        std::fprintf(stderr, "xfer-master: invalid --max-connections '%s' (a positive integer)\n", v.c_str());
        return 2;
      }
      limits.max_connections = static_cast<int>(n);
    } else if (a == "--idle-timeout" && i + 1 < argc) {
      std::string v = argv[++i];
      char* end = nullptr;
      double secs = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(secs >= 0) || secs > 1e6) {
        std::fprintf(stderr, "xfer-master: invalid --idle-timeout '%s' (seconds, 0 for never)\n", v.c_str());
        return 2;
      }
      limits.idle_timeout_ms = secs == 0 ? 0 : std::max(1, static_cast<int>(secs * 1000));
    } else if (a == "--max-segments" && i + 1 < argc) {
      std::string v = argv[++i];
      uint64_t n = 0;
      if (!parse_bytes(v, &n) || v.find_first_not_of("0123456789") != std::string::npos) {
        std::fprintf(stderr, "xfer-master: invalid --max-segments '%s' (a count, 0 for no limit)\n", v.c_str());
        return 2;
      }
      limits.max_segments = n;
    } else if ((a == "--max-registered-bytes" || a == "--max-output-buffer") && i + 1 < argc) {
      std::string v = argv[++i];
      uint64_t n = 0;
      if (!parse_bytes(v, &n)) {
        std::fprintf(stderr, "xfer-master: invalid %s '%s' (bytes, with K, M or G; 0 for no limit)\n", a.c_str(),
                     v.c_str());
        return 2;
      }
      (a == "--max-output-buffer" ? limits.max_output_bytes : limits.max_registered_bytes) = n;
    } else if ((a == "--port" || a == "--host") && i + 1 < argc) {
      std::string v = argv[++i];
      if (a == "--host") {
        host = v;
      } else {
        char* end = nullptr;
        port = std::strtol(v.c_str(), &end, 10);
        if (*end != '\0' || port < 0 || port > 65535) {
          std::fprintf(stderr, "xfer-master: invalid port '%s'\n", v.c_str());
          return 2;
        }
      }
    } else {
      std::fprintf(stderr, "xfer-master: unknown argument '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  try {
    const int asked = limits.max_connections;
    xfer::MasterServer server(host, static_cast<uint16_t>(port), limits);
    g_wake_fd = server.wake_fd();
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
    std::printf("xfer-master listening on %s:%u\n", host.c_str(), server.port());
    const xfer::MasterLimits& eff = server.limits();
    char idle[64] = "none";
    if (eff.idle_timeout_ms > 0) std::snprintf(idle, sizeof(idle), "%g s", eff.idle_timeout_ms / 1000.0);
    auto cap = [](uint64_t v, const char* unit) {
      return v == 0 ? std::string("unlimited ") + unit : std::to_string(v) + " " + unit;
    };
    // Per connection: one request line and one read in, the output limit plus one reply chunk out.
    const uint64_t per_conn_in = xfer::kMasterMaxLine + xfer::kMasterReadChunk;
    const std::string per_conn_out = eff.max_output_bytes == 0
                                         ? std::string("unlimited")
                                         : std::to_string(eff.max_output_bytes + xfer::kMasterReplyChunk);
    std::printf("xfer-master: at most %d connections%s, idle timeout %s; %s, %s registered, %s of unsent "
                "replies per connection; held per connection: at most %llu bytes of requests and %s bytes of "
                "replies\n",
                eff.max_connections, eff.max_connections < asked ? " (all that RLIMIT_NOFILE leaves room for)" : "",
                idle, cap(eff.max_segments, "segments").c_str(), cap(eff.max_registered_bytes, "bytes").c_str(),
                cap(eff.max_output_bytes, "bytes").c_str(), static_cast<unsigned long long>(per_conn_in),
                per_conn_out.c_str());
    std::fflush(stdout);
    server.serve();
    g_wake_fd = -1;
    std::printf("xfer-master: shut down\n");
    std::fflush(stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
