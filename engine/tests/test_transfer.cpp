#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "harness.h"
#include "xfer/engine.h"

using xfer::Engine;
using xfer::Request;

namespace {
uintptr_t ptr(std::vector<char>& v) { return reinterpret_cast<uintptr_t>(v.data()); }

std::vector<char> random_bytes(size_t n, unsigned seed) {
  std::vector<char> v(n);
  std::mt19937 g(seed);
  for (auto& c : v) c = static_cast<char>(g());
  return v;
}

struct Pair {
  xfer::EngineOptions small;
  Engine server;
  Engine client;
  Pair() : server("srv", ""), client("cli", "", opts()) {
    client.add_peer("srv", "127.0.0.1", server.port());
  }
  static xfer::EngineOptions opts() {
    xfer::EngineOptions o;
    o.chunk_bytes = 64 << 10;  // many frames per request
    o.window = 4;
    return o;
  }
};
}  // namespace

TEST(write_then_read_roundtrip) {
  Pair p;
  const size_t n = (3 << 20) + 123;
  std::vector<char> remote(n, 0);
  p.server.register_memory(ptr(remote), n);
  std::vector<char> src = random_bytes(n, 1);
  p.client.write({{ptr(src), "srv", ptr(remote), n}});
  CHECK(std::memcmp(src.data(), remote.data(), n) == 0);
  std::vector<char> back(n, 0);
  p.client.read({{ptr(back), "srv", ptr(remote), n}});
  CHECK(back == src);
}

TEST(batched_requests_at_offsets) {
  Pair p;
  std::vector<char> remote(1 << 20, 0);
  p.server.register_memory(ptr(remote), remote.size());
  std::vector<char> src = random_bytes(remote.size(), 2);
  std::vector<Request> batch;
  for (size_t off = 0; off < remote.size(); off += 100000) {
    size_t len = std::min<size_t>(100000, remote.size() - off);
    batch.push_back({ptr(src) + off, "srv", ptr(remote) + off, len});
  }
  p.client.write(batch);
  CHECK(remote == src);
}

TEST(out_of_bounds_access_is_refused) {
  Pair p;
  std::vector<char> remote(4096, 'r');
  std::vector<char> other(4096, 'o');
  p.server.register_memory(ptr(remote), remote.size());
  std::vector<char> local(8192, 'x');
  // Past the end of the region.
  CHECK_THROWS(p.client.write({{ptr(local), "srv", ptr(remote) + 1, 4096}}));
  CHECK_THROWS(p.client.read({{ptr(local), "srv", ptr(remote), 4097}}));
  // Unregistered memory.
  CHECK_THROWS(p.client.read({{ptr(local), "srv", ptr(other), 16}}));
  CHECK_THROWS(p.client.write({{ptr(local), "srv", ptr(other), 16}}));
  // Wrap-around.
  CHECK_THROWS(p.client.read({{ptr(local), "srv", ~uint64_t(0) - 4, 16}}));
  CHECK(remote == std::vector<char>(4096, 'r'));
  CHECK(other == std::vector<char>(4096, 'o'));
  // The connection is still usable afterwards.
  p.client.write({{ptr(local), "srv", ptr(remote), 4096}});
  CHECK(remote == std::vector<char>(4096, 'x'));
}

TEST(failing_entry_does_not_stop_the_batch) {
  Pair p;
  std::vector<char> remote(4096, 0);
  p.server.register_memory(ptr(remote), remote.size());
  std::vector<char> local(4096, 'y');
  CHECK_THROWS(p.client.write({{ptr(local), "srv", ptr(remote) + 4000, 200},
                               {ptr(local), "srv", ptr(remote), 100}}));
  CHECK(remote[0] == 'y' && remote[99] == 'y' && remote[100] == 0);
}

TEST(unregistered_region_is_no_longer_served) {
  Pair p;
  std::vector<char> remote(4096, 0);
  p.server.register_memory(ptr(remote), remote.size());
  std::vector<char> local(4096, 'z');
  p.client.write({{ptr(local), "srv", ptr(remote), 4096}});
  p.server.unregister_memory(ptr(remote));
  CHECK_THROWS(p.client.write({{ptr(local), "srv", ptr(remote), 4096}}));
}

TEST(unknown_segment_throws) {
  Pair p;
  std::vector<char> local(16);
  CHECK_THROWS(p.client.write({{ptr(local), "nobody", 0, 16}}));
}

TEST(concurrent_transfers) {
  Pair p;
  const int threads = 4;
  const size_t slice = 1 << 20;
  std::vector<char> remote(threads * slice, 0);
  p.server.register_memory(ptr(remote), remote.size());
  std::vector<std::vector<char>> srcs;
  for (int t = 0; t < threads; ++t) srcs.push_back(random_bytes(slice, 10 + t));
  std::atomic<int> errors{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      try {
        for (int round = 0; round < 5; ++round) {
          p.client.write({{ptr(srcs[t]), "srv", ptr(remote) + t * slice, slice}});
          std::vector<char> back(slice);
          p.client.read({{ptr(back), "srv", ptr(remote) + t * slice, slice}});
          if (back != srcs[t]) ++errors;
        }
      } catch (...) {
        ++errors;
      }
    });
  }
  for (auto& t : ts) t.join();
  CHECK(errors == 0);
  for (int t = 0; t < threads; ++t) CHECK(std::memcmp(remote.data() + t * slice, srcs[t].data(), slice) == 0);
}

TEST(two_engines_serve_each_other) {
  Engine a("a", ""), b("b", "");
  a.add_peer("b", "127.0.0.1", b.port());
  b.add_peer("a", "127.0.0.1", a.port());
  std::vector<char> ra(1000, 'a'), rb(1000, 'b');
  a.register_memory(ptr(ra), ra.size());
  b.register_memory(ptr(rb), rb.size());
  std::vector<char> tmp(1000);
  a.read({{ptr(tmp), "b", ptr(rb), 1000}});
  b.write({{ptr(tmp), "a", ptr(ra), 1000}});
  CHECK(ra == std::vector<char>(1000, 'b'));
}
