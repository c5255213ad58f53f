// Frame: the header in front of every data-plane message on a TCP
// connection. Each message is one frame: a 32-byte header, then exactly
// `length` payload bytes (streamed straight from/to the user's buffer).
//
//   magic u32 | reserved u32 (0) | epoch u64 | seq u64 | length u64
//
// all little endian. The receiver compares (epoch, seq, length) with the
// receive it posted, so that bytes of two operations never mix.
//
// Thread-safety: pure functions on plain values.
#ifndef KOLO_ALLREDUCE_TCP_FRAME_H_
#define KOLO_ALLREDUCE_TCP_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace kolo::tcp {

inline constexpr uint32_t kFrameMagic = 0x464c4f4b;  // "KOLF"
inline constexpr size_t kFrameHeaderBytes = 32;

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint32_t reserved = 0;
  uint64_t epoch = 0;
  uint64_t seq = 0;
  uint64_t length = 0;
};

void EncodeFrameHeader(const FrameHeader& h, uint8_t out[kFrameHeaderBytes]);
FrameHeader DecodeFrameHeader(const uint8_t in[kFrameHeaderBytes]);

// Empty if `got` is the frame the receiver expects; else what differs, e.g.
// "expected epoch 4 seq 7 of 100 bytes, got epoch 4 seq 8 of 100 bytes".
std::string FrameMismatch(const FrameHeader& got, uint64_t epoch, uint64_t seq,
                          uint64_t length);

}  // namespace kolo::tcp

#endif  // KOLO_ALLREDUCE_TCP_FRAME_H_
