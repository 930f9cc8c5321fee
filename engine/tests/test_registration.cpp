#include <vector>

#include "harness.h"
#include "xfer/engine.h"

using xfer::Engine;

static uintptr_t ptr(std::vector<char>& v) { return reinterpret_cast<uintptr_t>(v.data()); }

TEST(host_registration_records_region) {
  Engine e("reg-a", "");
  std::vector<char> buf(1 << 16);
  xfer::Region r = e.register_memory(ptr(buf), buf.size());
  CHECK(r.kind == xfer::MemKind::kHost);
  CHECK(r.addr == ptr(buf));
  CHECK(r.length == buf.size());
  CHECK(r.offset == 0);
  CHECK(!r.dmabuf);
  CHECK(e.regions().size() == 1);
  e.unregister_memory(ptr(buf));
  CHECK(e.regions().empty());
}

TEST(zero_length_and_null_are_refused) {
  Engine e("reg-b", "");
  std::vector<char> buf(64);
  CHECK_THROWS(e.register_memory(ptr(buf), 0));
  CHECK_THROWS(e.register_memory(0, 64));
  CHECK_THROWS(e.register_memory(~uintptr_t(0) - 8, 64));
}

TEST(overlapping_registration_is_refused) {
  Engine e("reg-c", "");
  std::vector<char> buf(4096);
  e.register_memory(ptr(buf) + 1024, 1024);
  CHECK_THROWS(e.register_memory(ptr(buf), 1025));
  CHECK_THROWS(e.register_memory(ptr(buf) + 2047, 10));
  CHECK_THROWS(e.register_memory(ptr(buf) + 1024, 1024));
  // Adjacent ranges are fine.
  e.register_memory(ptr(buf), 1024);
  e.register_memory(ptr(buf) + 2048, 1024);
  CHECK(e.regions().size() == 3);
}

TEST(unregister_unknown_address_throws) {
  Engine e("reg-d", "");
  std::vector<char> buf(64);
  CHECK_THROWS(e.unregister_memory(ptr(buf)));
  e.register_memory(ptr(buf), 64);
  CHECK_THROWS(e.unregister_memory(ptr(buf) + 1));
  e.unregister_memory(ptr(buf));
}

TEST(gpu_direct_reason_is_reported) {
  Engine e("reg-e", "");
  if (e.device_count() == 0) {
    CHECK(!e.gpu_direct());
    CHECK(!e.gpu_direct_reason().empty());
  }
  CHECK(!e.backend().empty());
}

TEST(bad_engine_name_is_refused) {
  CHECK_THROWS(Engine("", ""));
  CHECK_THROWS(Engine("has space", ""));
}
