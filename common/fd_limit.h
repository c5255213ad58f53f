// RaiseOpenFileLimit: the soft RLIMIT_NOFILE raised to the hard limit, as
// servers do at start, so that a job's own descriptors (a replacement
// worker's pipes, its data connections) never compete with a flood of
// connections from outside for a soft limit of 1024.
//
// kolorun, kolo-coordinator and every worker (at init) call it once. The
// raise is process-wide and inherited by children started afterwards.
//
// Thread-safety: setrlimit is process-wide; call it before other threads
// open many descriptors (concurrent calls are harmless: both raise).
#ifndef KOLO_COMMON_FD_LIMIT_H_
#define KOLO_COMMON_FD_LIMIT_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace kolo {

struct OpenFileLimit {
  uint64_t before = 0;  // the soft limit found
  uint64_t after = 0;   // the soft limit now (== before when already raised)
};

// Raises the soft RLIMIT_NOFILE to the hard one (RLIM_INFINITY counts as
// the kernel's nr_open). An error (setrlimit refused) leaves the limit as it
// was; callers log it and go on: a flood may then starve the job sooner.
absl::StatusOr<OpenFileLimit> RaiseOpenFileLimit();

// RaiseOpenFileLimit, saying what it did on logger `logger` (common/log.h):
// the raise at info, a refusal at warn.
void RaiseOpenFileLimitAndLog(const char* logger);

}  // namespace kolo

#endif  // KOLO_COMMON_FD_LIMIT_H_
