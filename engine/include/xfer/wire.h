// Wire format of the engine's data plane (engine <-> engine over TCP).
//
// Every frame starts with a fixed 40-byte little-endian header:
//   u32 magic ('XFR1') | u8 version | u8 opcode | u16 flags (0)
//   u32 status | u32 reserved (0) | u64 request_id | u64 addr | u64 length
// A WRITE request is followed by `length` payload bytes; a READ request has
// no payload. Each request gets one RESPONSE frame with the same request_id;
// a successful READ response is followed by `length` payload bytes.
//
// A serving engine that will not serve a connection (connection limit
// reached, no thread to serve it) sends one RESPONSE with status kBusy,
// request_id 0 and `length` bytes of a one-line reason (at most
// kMaxReason) as soon as it accepts, then closes the connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace xfer {
namespace wire {

constexpr uint32_t kMagic = 0x31524658u;  // "XFR1"
constexpr uint8_t kVersion = 1;
constexpr size_t kHeaderSize = 40;
// Largest payload a single frame may carry; anything larger is malformed.
constexpr uint64_t kMaxFrame = 64ull << 20;

enum Opcode : uint8_t { kWrite = 1, kRead = 2, kResponse = 3 };

enum Status : uint32_t {
  kOk = 0,
  kOutOfBounds = 1,   // unregistered address or range not inside one region
  kDeviceError = 2,   // staging copy to/from device memory failed
  kInvalid = 3,       // well-formed frame asking for something impossible
  kBusy = 4,          // connection refused; payload is the reason
};

constexpr uint64_t kMaxReason = 4096;

struct Header {
  uint8_t opcode = 0;
  uint16_t flags = 0;
  uint32_t status = 0;
  uint64_t request_id = 0;
  uint64_t addr = 0;
  uint64_t length = 0;
};

void encode(const Header& h, unsigned char out[kHeaderSize]);

// Decodes and validates a request or response header. Returns false (with a
// reason) when the frame is malformed: wrong magic, version, opcode, nonzero
// reserved fields, or a length over kMaxFrame.
bool decode(const unsigned char in[kHeaderSize], Header* h, std::string* why);

const char* status_name(uint32_t status);

}  // namespace wire
}  // namespace xfer
