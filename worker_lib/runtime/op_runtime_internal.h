// Internal to OpRuntime (op_runtime.h), whose member functions live in
// three files: the helpers that more than one of them uses.
#ifndef KOLO_WORKER_LIB_RUNTIME_OP_RUNTIME_INTERNAL_H_
#define KOLO_WORKER_LIB_RUNTIME_OP_RUNTIME_INTERNAL_H_

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kolo::worker::op_runtime_internal {

// How long a Done on the link waits for a submission to travel with (one
// write, one wake-up of the coordinator instead of two) before it goes alone.
// A tight submit/synchronize loop resubmits well within it; when nothing
// follows, the coordinator learns that this rank is idle this much later.
inline constexpr absl::Duration kDoneDelay = absl::Microseconds(200);

// "ALLREDUCE": the timeline's activity names, as Horovod's.
inline std::string Upper(absl::string_view op) {
  return absl::AsciiStrToUpper(op);
}

}  // namespace kolo::worker::op_runtime_internal

#endif  // KOLO_WORKER_LIB_RUNTIME_OP_RUNTIME_INTERNAL_H_
