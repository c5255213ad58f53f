// The worker guard: a small process between kolorun and each worker, so that
// no worker (nor anything it started) outlives kolorun — also when kolorun is
// killed with SIGKILL.
//
// kolorun re-executes itself as
//   kolorun --internal-guard <kolorun pid> -- command args...
// with the worker's stdout/stderr pipes as fd 1/2 and a status pipe as fd 3.
// The guard:
//   - dies with kolorun: PR_SET_PDEATHSIG(SIGTERM) (set before exec by
//     kolorun's child, again here), then checks getppid() against the pid it
//     was given, which closes the race with an early death;
//   - is a child subreaper, so orphaned descendants of the worker are
//     re-parented to it and can be found and killed;
//   - forks the worker in a process group of its own (pgid = worker pid), with
//     PR_SET_PDEATHSIG(SIGKILL) toward the guard;
//   - on SIGTERM/SIGINT/SIGHUP (or kolorun's death) sends SIGTERM to the
//     worker's group and to every child, SIGKILL after kGuardGrace, and
//     exits once no descendant is left (bounded: kGuardGrace + 3 s);
//   - when the worker exits by itself, reports it, then kills what it left
//     behind the same way;
//   - reports on fd 3, one record a line: "pid <worker pid>" once started,
//     then "exit <code>" or "signal <number>" when the worker ended;
//   - exits with the worker's code, or 128 + signal.
//
// Thread-safety: RunGuard is a process's main; ParseGuardRecords is pure.
#ifndef KOLO_LAUNCHER_GUARD_H_
#define KOLO_LAUNCHER_GUARD_H_

#include <sys/types.h>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kolo::launcher {

inline constexpr const char* kGuardFlag = "--internal-guard";
inline constexpr int kGuardStatusFd = 3;
inline constexpr absl::Duration kGuardGrace = absl::Seconds(2);

// What the status pipe said about the worker.
struct GuardReport {
  pid_t worker_pid = -1;
  bool ended = false;  // an "exit" or "signal" record arrived
  bool exited = false;
  int code = 0;    // when exited
  int signal = 0;  // when !exited
};

// Applies every complete record of `text` to `report` (unknown lines are
// ignored).
void ParseGuardRecords(absl::string_view text, GuardReport* report);

// main() of guard mode. REQUIRES: argv[1] == kGuardFlag.
int RunGuard(int argc, char** argv);

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_GUARD_H_
