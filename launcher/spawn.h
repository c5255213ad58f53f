// SpawnGuard: starts one worker under its guard (launcher/guard.h) — fork,
// then only async-signal-safe calls (kolorun has gRPC threads) until
// kolorun re-executes itself in guard mode.
//
// The guard gets: stdin = /dev/null, or a pipe holding `stdin_line` (the job
// secret for ssh/templated workers); stdout/stderr = pipes read by kolorun;
// fd 3 = the status pipe; its own process group; PR_SET_PDEATHSIG(SIGTERM).
//
// Thread-safety: call from kolorun's main thread only — PR_SET_PDEATHSIG
// fires when the *thread* that forked exits, so a guard spawned from a
// short-lived thread would be killed with it.
#ifndef KOLO_LAUNCHER_SPAWN_H_
#define KOLO_LAUNCHER_SPAWN_H_

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kolo::launcher {

struct GuardSpec {
  std::vector<std::string> argv;  // the worker command the guard execs
  std::vector<std::string> env;   // the worker's whole environment, "K=V"
  std::string stdin_line;         // empty: stdin is /dev/null
};

// A started guard. The fds are non-blocking, close-on-exec and owned by the
// caller (close them).
struct GuardProcess {
  pid_t pid = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int status_fd = -1;
};

// REQUIRES: the calling thread is the main thread; `self_exe` is kolorun
// ("/proc/self/exe").
absl::StatusOr<GuardProcess> SpawnGuard(const GuardSpec& spec,
                                        const std::string& self_exe);

// Blocks the signals kolorun's main loop reads from a signalfd (SIGCHLD,
// SIGINT, SIGTERM, SIGHUP) and ignores SIGPIPE. Call first thing in main(),
// before any thread exists, so that every thread inherits the mask. Guards
// get the default mask and dispositions back.
void BlockSupervisorSignals(sigset_t* blocked);

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_SPAWN_H_
