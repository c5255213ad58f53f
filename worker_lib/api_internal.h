// The seam between api.cc (init/shutdown, the process's one job) and the
// negotiated API (api_async.cc): how the latter finds the current job's
// OpRuntime. Internal to worker_lib.
//
// Thread-safety: CurrentOps may be called from any thread; the returned
// OpRuntime stays valid while held (after shutdown it fails every call).
#ifndef KOLO_WORKER_LIB_API_INTERNAL_H_
#define KOLO_WORKER_LIB_API_INTERNAL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker_lib/op_runtime.h"

namespace kolo::internal {

// The current job's OpRuntime, or kFailedPrecondition naming `op` when kolo
// is not initialised.
absl::StatusOr<std::shared_ptr<worker::OpRuntime>> CurrentOps(
    absl::string_view op);

}  // namespace kolo::internal

#endif  // KOLO_WORKER_LIB_API_INTERNAL_H_
