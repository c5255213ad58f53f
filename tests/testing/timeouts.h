// Timing bounds in tests are generous deadlines that catch hangs, scaled by
// KOLO_TIMEOUT_SCALE (sanitizer builds set it), never speed thresholds.
#ifndef KOLO_TESTS_TESTING_TIMEOUTS_H_
#define KOLO_TESTS_TESTING_TIMEOUTS_H_

#include <string>

#include "absl/time/time.h"

namespace kolo::testing {

// KOLO_TIMEOUT_SCALE as a number >= 1 (1 when unset or invalid).
double TimeoutScale();
// d * TimeoutScale().
absl::Duration Scaled(absl::Duration d);
// Directory holding kolo's executables (KOLO_BIN_DIR, set by CTest).
std::string BinDir();

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_TIMEOUTS_H_
