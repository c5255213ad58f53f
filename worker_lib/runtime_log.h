// The worker runtime's logger ("runtime"), shared by the op runtime
// (runtime/) and the executors that run its plans (exec/).
// Thread-safety: callable from any thread, also while the process exits
// (the logger is never destroyed).
#ifndef KOLO_WORKER_LIB_RUNTIME_LOG_H_
#define KOLO_WORKER_LIB_RUNTIME_LOG_H_

#include <memory>

#include "common/log.h"

namespace kolo::worker {

inline std::shared_ptr<spdlog::logger> RuntimeLog() {
  // Never destroyed: used by threads that may run while the process exits.
  static const auto* const logger =
      new std::shared_ptr<spdlog::logger>(GetLogger("runtime"));
  return *logger;
}

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_RUNTIME_LOG_H_
