// DataPlaneSettingsText (proto/autotune_text.h).
#include "proto/autotune_text.h"

#include "absl/strings/str_cat.h"

namespace kolo::proto {

std::string DataPlaneSettingsText(uint64_t small_allreduce_bytes,
                                  uint64_t segment_bytes) {
  return absl::StrCat(
      "small-message cut-off ", small_allreduce_bytes, " bytes, segment ",
      segment_bytes == 0 ? std::string("automatic")
                         : absl::StrCat(segment_bytes, " bytes"));
}

}  // namespace kolo::proto
