// TEST STAND-IN: a core unit, the same object for every Python.
#include "core.h"

#include <numeric>
#include <string_view>

extern "C" uint64_t core_checksum(const char* data, uint64_t size) {
  std::string_view view(data, size);
  return std::accumulate(view.begin(), view.end(), uint64_t{1469598103934665603ULL},
                         [](uint64_t h, char c) { return (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL; });
}
