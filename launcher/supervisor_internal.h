// Internal to Supervisor (supervisor.h), whose member functions live in
// supervisor.cc (the loop, worker ends, the coordinator's verdicts) and
// supervisor_elastic.cc (the elastic policy: slots, discovery, leaves,
// evicted processes): the record of one worker process and the helpers both
// use.
//
// Thread-safety: as Supervisor's (the main thread only).
#ifndef KOLO_LAUNCHER_SUPERVISOR_INTERNAL_H_
#define KOLO_LAUNCHER_SUPERVISOR_INTERNAL_H_

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "launcher/guard.h"
#include "launcher/line_prefixer.h"
#include "launcher/supervisor.h"

namespace kolo::launcher {
namespace supervisor_internal {

// Writes all of `data` to `fd` (a pipe or terminal that may be
// non-blocking); drops it when the reader is gone.
inline void WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
      continue;
    }
    if (n <= 0) return;  // the reader is gone: drop the output
    data.remove_prefix(static_cast<size_t>(n));
  }
}

inline std::string SignalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev == nullptr ? absl::StrCat("signal ", sig)
                           : absl::StrCat("SIG", abbrev);
}

}  // namespace supervisor_internal

struct Supervisor::Worker {
  WorkerPlan plan;
  GuardSpec spec;
  pid_t guard = -1;
  int fds[3] = {-1, -1, -1};  // stdout, stderr, status
  std::unique_ptr<LinePrefixer> prefixers[2];
  std::string status_text;
  GuardReport report;
  bool reaped = false;
  bool ended = false;  // OnWorkerEnded ran
  int guard_status = 0;
  int failed_code = 0;          // its exit code (128 + signal), when non-zero
  std::string failed_what;      // "exited with code 3", "was killed by ..."
  int slot = -1;                // elastic: its slot in slots_
  bool asked_to_leave = false;  // elastic: kolorun sent it SIGTERM
  // Elastic: asked to leave because its host left the discovery script:
  // stopped through its guard if it has not left by then.
  absl::Time leave_by = absl::InfiniteFuture();
  bool stop_sent = false;
  bool evicted_killed = false;  // EndEvicted killed it: not a failure
};

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_SUPERVISOR_INTERNAL_H_
