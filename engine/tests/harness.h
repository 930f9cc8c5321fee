// A tiny self-contained test harness: TEST(name) { CHECK(...); }.
#pragma once

#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace harness {
struct Case {
  const char* name;
  std::function<void()> fn;
};
inline std::vector<Case>& cases() {
  static std::vector<Case> c;
  return c;
}
struct Failure {
  std::string what;
};
struct Registrar {
  Registrar(const char* n, std::function<void()> f) { cases().push_back({n, std::move(f)}); }
};
}  // namespace harness

#define TEST(name)                                                  \
  static void test_##name();                                        \
  static harness::Registrar reg_##name(#name, test_##name);         \
  static void test_##name()

#define CHECK(cond)                                                                              \
  do {                                                                                           \
    if (!(cond)) throw harness::Failure{std::string("line ") + std::to_string(__LINE__) + ": " #cond}; \
  } while (0)

#define CHECK_THROWS(stmt)            \
  do {                                \
    bool thrown_ = false;             \
    try {                             \
      stmt;                           \
    } catch (const std::exception&) { \
      thrown_ = true;                 \
    }                                 \
    CHECK(thrown_ && #stmt);          \
  } while (0)

int main() {
  int failed = 0;
  for (auto& c : harness::cases()) {
    try {
      c.fn();
      std::printf("ok   %s\n", c.name);
    } catch (const harness::Failure& f) {
      ++failed;
      std::printf("FAIL %s: %s\n", c.name, f.what.c_str());
    } catch (const std::exception& e) {
      ++failed;
      std::printf("FAIL %s: exception: %s\n", c.name, e.what());
    }
  }
  std::printf("%zu tests, %d failed\n", harness::cases().size(), failed);
  return failed == 0 ? 0 : 1;
}
