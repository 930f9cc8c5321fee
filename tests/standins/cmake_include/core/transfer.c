/* TEST STAND-IN: the engine's own shared library, linking zlib by its bare name. */
#include <zlib.h>

#ifndef CMKINC_TRANSPORT
#define CMKINC_TRANSPORT "tcp"
#endif

const char* transfer_transport(void) { return CMKINC_TRANSPORT; }

unsigned long transfer_checksum(const unsigned char* data, unsigned int size) {
  return crc32(crc32(0L, Z_NULL, 0), data, size);
}
