// ByteReader: reads a fuzz input front to back as a script of small
// integers and byte strings, so that a seed generator (make_corpus.py) can
// write structured inputs in order. Past the end it yields zeros and empty
// strings.
#ifndef KOLO_FUZZ_BYTE_READER_H_
#define KOLO_FUZZ_BYTE_READER_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace kolo::fuzz {

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t remaining() const { return size_ - pos_; }
  uint8_t U8() { return pos_ < size_ ? data_[pos_++] : 0; }
  // Big endian.
  uint16_t U16() {
    const uint16_t hi = U8();
    return static_cast<uint16_t>((hi << 8) | U8());
  }
  // One byte, mapped onto [lo, hi]. REQUIRES: 0 <= hi - lo < 256.
  int Pick(int lo, int hi) { return lo + U8() % (hi - lo + 1); }
  // Up to n bytes (fewer at the end of the input).
  std::string Bytes(size_t n) {
    if (n > remaining()) n = remaining();
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  // A string preceded by its length (U16).
  std::string Blob() { return Bytes(U16()); }
  std::string Rest() { return Bytes(remaining()); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace kolo::fuzz

#endif  // KOLO_FUZZ_BYTE_READER_H_
