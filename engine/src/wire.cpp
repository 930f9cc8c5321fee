#include "xfer/wire.h"

#include <cstring>

namespace xfer {
namespace wire {
namespace {

void put32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t get32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

void encode(const Header& h, unsigned char out[kHeaderSize]) {
  put32(out, kMagic);
  out[4] = kVersion;
  out[5] = h.opcode;
  out[6] = static_cast<unsigned char>(h.flags);
  out[7] = static_cast<unsigned char>(h.flags >> 8);
  put32(out + 8, h.status);
  put32(out + 12, 0);
  put64(out + 16, h.request_id);
  put64(out + 24, h.addr);
  put64(out + 32, h.length);
}

bool decode(const unsigned char in[kHeaderSize], Header* h, std::string* why) {
  if (get32(in) != kMagic) {
    *why = "bad magic";
    return false;
  }
  if (in[4] != kVersion) {
    *why = "unsupported version " + std::to_string(in[4]);
    return false;
  }
  h->opcode = in[5];
  if (h->opcode != kWrite && h->opcode != kRead && h->opcode != kResponse) {
    *why = "unknown opcode " + std::to_string(h->opcode);
    return false;
  }
  h->flags = static_cast<uint16_t>(in[6] | (in[7] << 8));
  if (h->flags != 0 || get32(in + 12) != 0) {
    *why = "reserved bits set";
    return false;
  }
  h->status = get32(in + 8);
  h->request_id = get64(in + 16);
  h->addr = get64(in + 24);
  h->length = get64(in + 32);
  if (h->length > kMaxFrame) {
    *why = "frame length " + std::to_string(h->length) + " exceeds limit";
    return false;
  }
  return true;
}

const char* status_name(uint32_t status) {
  switch (status) {
    case kOk: return "ok";
    case kOutOfBounds: return "address range not inside a registered region";
    case kDeviceError: return "device staging copy failed on the serving engine";
    case kInvalid: return "invalid request";
    case kBusy: return "connection refused by the serving engine";
    default: return "unknown status";
  }
}

}  // namespace wire
}  // namespace xfer
