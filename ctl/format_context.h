// What kolo-ctl's formatters need besides the StatusReply: the time of the
// poll (heartbeat ages and history times are shown against it), the stall
// threshold and the coordinator's address (for the header).
//
// Thread-safety: a plain value.
#ifndef KOLO_CTL_FORMAT_CONTEXT_H_
#define KOLO_CTL_FORMAT_CONTEXT_H_

#include <string>

#include "absl/time/time.h"
#include "common/knobs.h"

namespace kolo::ctl {

struct FormatContext {
  absl::Time now = absl::UnixEpoch();
  // A tensor pending this long is shown as stalled; zero: never. The
  // coordinator's own threshold (--stall-check-time-seconds) by default.
  absl::Duration stall_check = knobs::kStallCheck.default_duration;
  std::string coordinator;  // HOST:PORT as given
};

}  // namespace kolo::ctl

#endif  // KOLO_CTL_FORMAT_CONTEXT_H_
