#include "common/framing.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace kolo {

void AppendFrame(absl::string_view payload, std::string* out) {
  KOLO_CHECK(payload.size() <= kMaxFrameBytes);
  const uint32_t n = static_cast<uint32_t>(payload.size());
  const char len[4] = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                       static_cast<char>(n >> 8), static_cast<char>(n)};
  out->append(len, 4);
  out->append(payload.data(), payload.size());
}

void FrameDecoder::Append(const char* data, size_t n) {
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();  // everything consumed: start over instead of growing
    pos_ = 0;
  }
  buf_.append(data, n);
}

absl::StatusOr<std::optional<std::string>> FrameDecoder::Next() {
  if (!broken_.ok()) return broken_;
  if (buffered() < 4) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + pos_);
  const size_t n = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) |
                   (size_t{p[2]} << 8) | size_t{p[3]};
  if (n > kMaxFrameBytes) {
    broken_ = absl::DataLossError(
        absl::StrCat("a frame announced ", n, " bytes, more than the ",
                     kMaxFrameBytes, " allowed: not a kolo peer, or corrupt"));
    return broken_;
  }
  if (buffered() < 4 + n) return std::nullopt;
  std::string payload = buf_.substr(pos_ + 4, n);
  pos_ += 4 + n;
  if (pos_ > (size_t{1} << 20) && pos_ * 2 > buf_.size()) {
    buf_.erase(0, pos_);  // compact once the consumed prefix dominates
    pos_ = 0;
  }
  return std::optional<std::string>(std::move(payload));
}

}  // namespace kolo
