// WireWriter / WireReader: big-endian integers and length-prefixed strings
// for the TCP transport's handshake messages. The reader never reads past
// its input and refuses fields longer than the caller's limit, so garbage
// from an untrusted peer cannot make it allocate or overrun.
//
// Thread-safety: plain values; not shared between threads.
#ifndef KOLO_ALLREDUCE_TCP_WIRE_H_
#define KOLO_ALLREDUCE_TCP_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace kolo::tcp {

class WireWriter {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v);
  void U64(uint64_t v);
  // u16 length, then the bytes. REQUIRES: s.size() <= 65535.
  void Str(absl::string_view s);
  std::string& out() { return out_; }

 private:
  std::string out_;
};

class WireReader {
 public:
  explicit WireReader(absl::string_view in) : in_(in) {}
  // Each returns false (and sets error()) if the input is too short.
  bool U8(uint8_t* v);
  bool U32(uint32_t* v);
  bool U64(uint64_t* v);
  // Also false if the field is longer than `max_len`.
  bool Str(size_t max_len, std::string* s);
  bool AtEnd() const { return pos_ == in_.size(); }
  // Why the last read failed.
  const std::string& error() const { return error_; }

 private:
  bool Take(size_t n, const char** p);

  absl::string_view in_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace kolo::tcp

#endif  // KOLO_ALLREDUCE_TCP_WIRE_H_
