#include "allreduce/tcp/wire.h"

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace kolo::tcp {

void WireWriter::U32(uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) U8((v >> shift) & 0xff);
}

void WireWriter::U64(uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) U8((v >> shift) & 0xff);
}

void WireWriter::Str(absl::string_view s) {
  KOLO_CHECK(s.size() <= 0xffff) << "wire string of " << s.size() << " bytes";
  U8((s.size() >> 8) & 0xff);
  U8(s.size() & 0xff);
  out_.append(s.data(), s.size());
}

bool WireReader::Take(size_t n, const char** p) {
  if (in_.size() - pos_ < n) {
    error_ = absl::StrCat("message truncated: ", n,
                          " more bytes expected at offset ", pos_, " of ",
                          in_.size());
    return false;
  }
  *p = in_.data() + pos_;
  pos_ += n;
  return true;
}

bool WireReader::U8(uint8_t* v) {
  const char* p;
  if (!Take(1, &p)) return false;
  *v = static_cast<uint8_t>(*p);
  return true;
}

bool WireReader::U32(uint32_t* v) {
  const char* p;
  if (!Take(4, &p)) return false;
  *v = 0;
  for (int i = 0; i < 4; ++i) *v = (*v << 8) | static_cast<uint8_t>(p[i]);
  return true;
}

bool WireReader::U64(uint64_t* v) {
  const char* p;
  if (!Take(8, &p)) return false;
  *v = 0;
  for (int i = 0; i < 8; ++i) *v = (*v << 8) | static_cast<uint8_t>(p[i]);
  return true;
}

bool WireReader::Str(size_t max_len, std::string* s) {
  const char* p;
  if (!Take(2, &p)) return false;
  size_t len = (static_cast<size_t>(static_cast<uint8_t>(p[0])) << 8) |
               static_cast<uint8_t>(p[1]);
  if (len > max_len) {
    error_ = absl::StrCat("oversized field: ", len, " bytes, the limit is ",
                          max_len);
    return false;
  }
  if (!Take(len, &p)) return false;
  s->assign(p, len);
  return true;
}

}  // namespace kolo::tcp
