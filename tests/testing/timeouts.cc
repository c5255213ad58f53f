#include "tests/testing/timeouts.h"

#include <cstdlib>

#include "absl/strings/numbers.h"

namespace kolo::testing {

double TimeoutScale() {
  const char* s = std::getenv("KOLO_TIMEOUT_SCALE");
  double v = 1;
  if (s == nullptr || !absl::SimpleAtod(s, &v) || v < 1) return 1;
  return v;
}

absl::Duration Scaled(absl::Duration d) { return d * TimeoutScale(); }

std::string BinDir() {
  const char* s = std::getenv("KOLO_BIN_DIR");
  return s == nullptr ? std::string("bin") : std::string(s);
}

}  // namespace kolo::testing
