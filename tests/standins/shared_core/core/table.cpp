// TEST STAND-IN: a core unit, the same object for every Python.
#include "core.h"

#include <array>
#include <utility>

namespace {
constexpr uint64_t mix(uint64_t x) {
  for (int r = 0; r < 8; ++r) {
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ULL;
  }
  return x;
}
template <std::size_t... I>
constexpr std::array<uint64_t, sizeof...(I)> make(std::index_sequence<I...>) {
  return {mix(I)...};
}
constexpr auto kTable = make(std::make_index_sequence<256>{});
}  // namespace

extern "C" uint64_t core_table(unsigned index) { return kTable[index % kTable.size()]; }
