// Internal to OpRuntime (op_runtime.h), whose member functions live in
// three files: the helpers that more than one of them uses.
#ifndef KOLO_WORKER_LIB_RUNTIME_OP_RUNTIME_INTERNAL_H_
#define KOLO_WORKER_LIB_RUNTIME_OP_RUNTIME_INTERNAL_H_

#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/log.h"

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

inline std::shared_ptr<spdlog::logger> Log() {
  // Never destroyed: used by threads that may run while the process exits.
  static const auto* const logger =
      new std::shared_ptr<spdlog::logger>(GetLogger("runtime"));
  return *logger;
}

}  // namespace kolo::worker::op_runtime_internal

#endif  // KOLO_WORKER_LIB_RUNTIME_OP_RUNTIME_INTERNAL_H_
