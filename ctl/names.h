// The words kolo-ctl prints for the Status reply's enums and times, shared by
// the text and the JSON output so that both say the same.
//
// Thread-safety: pure functions.
#ifndef KOLO_CTL_NAMES_H_
#define KOLO_CTL_NAMES_H_

#include <cstdint>
#include <string>

#include "proto/kolo.pb.h"

namespace kolo::ctl {

// "authenticating", "waiting", "member", "left", "failed", "ended",
// "disconnected"; "unknown" for anything else.
std::string StateName(proto::MemberState state);

// A wall-clock time in milliseconds since 1970 as UTC,
// "2024-05-01 12:00:00.250"; "-" for 0 (not reported).
std::string FormatUnixMillis(int64_t unix_ms);

// The coordinator's incarnation as it prints it at start: 16 hex digits.
std::string IncarnationHex(uint64_t incarnation);

// "w1 (rank 1, host b: silent for 3.1 s)"; the parts that are empty are left
// out.
std::string DescribeLost(const proto::LostWorker& lost);

}  // namespace kolo::ctl

#endif  // KOLO_CTL_NAMES_H_
