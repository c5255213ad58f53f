// Defaults of worker variables outside common/knobs.h's table that several
// structs start from: the worker's WorkerConfig (worker_lib/config.h) and
// SessionOptions
// (worker_lib/session/session_client.h), and the coordinator's
// NegotiatorOptions (coordinator/negotiator.h). Each is written once, here;
// common/variables.cc's rows document the same values
// (common_variables_test checks that they agree).
//
// Thread-safety: constants only.
#ifndef KOLO_COMMON_KNOB_DEFAULTS_H_
#define KOLO_COMMON_KNOB_DEFAULTS_H_

#include <cstdint>

#include "absl/time/time.h"

namespace kolo::knob_defaults {

// KOLO_LEASE_SECONDS: a coordinator silent this long is lost.
inline constexpr absl::Duration kLease = absl::Seconds(10);
// KOLO_FUSION_THRESHOLD, bytes (128 MiB).
inline constexpr int64_t kFusionThreshold = int64_t{128} << 20;
// KOLO_FUSION_DIRECT_BYTES, bytes (1 MiB).
inline constexpr int64_t kFusionDirectBytes = int64_t{1} << 20;
// KOLO_CACHE_CAPACITY, entries.
inline constexpr int64_t kCacheCapacity = 1024;

}  // namespace kolo::knob_defaults

#endif  // KOLO_COMMON_KNOB_DEFAULTS_H_
