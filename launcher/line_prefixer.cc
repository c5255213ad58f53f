#include "launcher/line_prefixer.h"

#include "absl/strings/str_cat.h"

namespace kolo::launcher {

LinePrefixer::LinePrefixer(int rank, absl::string_view stream)
    : prefix_(absl::StrCat("[", rank, "]<", stream, ">:")) {}

std::string LinePrefixer::Append(absl::string_view bytes) {
  std::string out;
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    if (nl == absl::string_view::npos) {
      partial_.append(bytes.data(), bytes.size());
      bytes = {};
    } else {
      partial_.append(bytes.data(), nl);
      bytes.remove_prefix(nl + 1);
      absl::StrAppend(&out, prefix_, partial_, "\n");
      partial_.clear();
    }
    // Bound memory: a very long line goes out in pieces.
    while (partial_.size() >= kMaxLine) {
      absl::StrAppend(&out, prefix_,
                      absl::string_view(partial_).substr(0, kMaxLine), "\n");
      partial_.erase(0, kMaxLine);
    }
  }
  return out;
}

std::string LinePrefixer::Finish() {
  if (partial_.empty()) return "";
  std::string out = absl::StrCat(prefix_, partial_, "\n");
  partial_.clear();
  return out;
}

}  // namespace kolo::launcher
