#include "allreduce/tcp/frame.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kolo::tcp {
namespace {

void PutLe(uint64_t v, int bytes, uint8_t* out) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t GetLe(const uint8_t* in, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | in[i];
  return v;
}

}  // namespace

void EncodeFrameHeader(const FrameHeader& h, uint8_t out[kFrameHeaderBytes]) {
  PutLe(h.magic, 4, out);
  PutLe(h.reserved, 4, out + 4);
  PutLe(h.epoch, 8, out + 8);
  PutLe(h.seq, 8, out + 16);
  PutLe(h.length, 8, out + 24);
}

FrameHeader DecodeFrameHeader(const uint8_t in[kFrameHeaderBytes]) {
  FrameHeader h;
  h.magic = static_cast<uint32_t>(GetLe(in, 4));
  h.reserved = static_cast<uint32_t>(GetLe(in + 4, 4));
  h.epoch = GetLe(in + 8, 8);
  h.seq = GetLe(in + 16, 8);
  h.length = GetLe(in + 24, 8);
  return h;
}

std::string FrameMismatch(const FrameHeader& got, uint64_t epoch, uint64_t seq,
                          uint64_t length) {
  if (got.magic != kFrameMagic || got.reserved != 0) {
    return absl::StrFormat(
        "got bytes that are not a kolo frame header (magic 0x%08x)", got.magic);
  }
  if (got.epoch == epoch && got.seq == seq && got.length == length) return "";
  return absl::StrCat("expected epoch ", epoch, " seq ", seq, " of ", length,
                      " bytes, got epoch ", got.epoch, " seq ", got.seq, " of ",
                      got.length, " bytes");
}

}  // namespace kolo::tcp
