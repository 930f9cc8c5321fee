// TEST STAND-IN: a core unit, the same object for every Python.
#include "core.h"

#include <sstream>
#include <string>

extern "C" uint64_t core_words(const char* text) {
  std::istringstream in{std::string(text)};
  uint64_t count = 0;
  for (std::string word; in >> word;) ++count;
  return count;
}
