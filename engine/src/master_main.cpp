// xfer-master: the metadata server. Links no GPU runtime.
#include <signal.h>
#include <unistd.h>

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

void usage(FILE* f) {
  std::fprintf(f,
               "usage: xfer-master [--host ADDR] [--port N] [--version]\n"
               "  --host ADDR  address to listen on (default 0.0.0.0)\n"
               "  --port N     TCP port; 0 picks a free one (default 0)\n"
               "Prints 'xfer-master listening on HOST:PORT' once ready; SIGTERM/SIGINT stop it.\n");
}
}  // namespace

int main(int argc, char** argv) {
  std::string host = "0.0.0.0";
  long port = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--version") {
      std::printf("xfer-master %s (backend %s)\n", xfer::version(), xfer::backend_name());
      return 0;
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
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
    xfer::MasterServer server(host, static_cast<uint16_t>(port));
    g_wake_fd = server.wake_fd();
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
    std::printf("xfer-master listening on %s:%u\n", host.c_str(), server.port());
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
