// TEST STAND-IN: the core's interface (no Python header).
#pragma once
#include <cstdint>
#ifdef __cplusplus
extern "C" {
#endif
uint64_t core_checksum(const char* data, uint64_t size);
uint64_t core_table(unsigned index);
uint64_t core_words(const char* text);
#ifdef __cplusplus
}
#endif
