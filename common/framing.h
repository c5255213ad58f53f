// Length-prefixed frames on a byte stream: a 4-byte big-endian length, then
// that many payload bytes. Used by the negotiation link (proto/kolo.proto),
// whose payloads are serialized protobuf messages.
//
// Thread-safety: AppendFrame is a free function; a FrameDecoder belongs to
// one reader and is not shared between threads.
// Invariant: a FrameDecoder never yields a frame longer than kMaxFrameBytes;
// a longer announced length is an error, after which it yields nothing more.
#ifndef KOLO_COMMON_FRAMING_H_
#define KOLO_COMMON_FRAMING_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kolo {

inline constexpr size_t kMaxFrameBytes = size_t{64} << 20;

// Appends the frame of `payload` to `out`.
// REQUIRES: payload.size() <= kMaxFrameBytes.
void AppendFrame(absl::string_view payload, std::string* out);

class FrameDecoder {
 public:
  // Adds bytes read from the stream.
  void Append(const char* data, size_t n);
  // The next complete payload; nullopt while more bytes are needed;
  // kDataLoss when the stream announced a frame over kMaxFrameBytes.
  absl::StatusOr<std::optional<std::string>> Next();
  // Bytes received but not yet returned as frames.
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  std::string buf_;
  size_t pos_ = 0;  // start of the first unreturned byte in buf_
  absl::Status broken_;
};

}  // namespace kolo

#endif  // KOLO_COMMON_FRAMING_H_
