// Fuzz target: FrameDecoder (common/framing.h), the length-prefixed frames of
// the negotiation link. The input is cut into reads of fuzzer-chosen sizes,
// as a socket would deliver them; after every read every complete frame is
// taken out. Checks the decoder's contract: frames come back in order, none
// over kMaxFrameBytes, and what is buffered plus what was returned accounts
// for every byte appended until the stream is declared broken.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/check.h"
#include "common/framing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  kolo::FrameDecoder decoder;
  size_t appended = 0;
  size_t returned = 0;  // payload bytes + 4 per frame
  bool broken = false;
  while (in.remaining_bytes() > 0 && !broken) {
    const size_t n = in.ConsumeIntegralInRange<size_t>(1, 64);
    const std::string chunk = in.ConsumeBytesAsString(n);
    decoder.Append(chunk.data(), chunk.size());
    appended += chunk.size();
    while (true) {
      auto frame = decoder.Next();
      if (!frame.ok()) {
        KOLO_CHECK(frame.status().code() == absl::StatusCode::kDataLoss);
        // Once broken, it stays broken.
        KOLO_CHECK(!decoder.Next().ok());
        broken = true;
        break;
      }
      if (!frame->has_value()) break;
      KOLO_CHECK((*frame)->size() <= kolo::kMaxFrameBytes);
      returned += 4 + (*frame)->size();
    }
    if (!broken) KOLO_CHECK(returned + decoder.buffered() == appended);
  }
  // Round trip: what AppendFrame writes decodes to the same payload.
  const std::string payload = in.ConsumeRemainingBytesAsString();
  std::string wire;
  kolo::AppendFrame(payload, &wire);
  kolo::FrameDecoder again;
  again.Append(wire.data(), wire.size());
  auto frame = again.Next();
  KOLO_CHECK(frame.ok() && frame->has_value() && **frame == payload);
  KOLO_CHECK(again.buffered() == 0);
  return 0;
}
