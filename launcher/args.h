// kolorun's command line: LaunchOptions (every knob kolorun has, with its
// default and where it comes from), ParseArgs, the usage text, and the plan
// that puts ranks on host slots.
//
// Pure functions: no I/O, no global state; the environment is passed in, so
// everything here is unit-tested (tests/launcher_args_test.cc).
//
// Thread-safety: all functions are thread-safe.
// Invariants of a parsed LaunchOptions: np >= 1; hosts is not empty and its
// slots add up to at least np; command is not empty (unless help/version).
#ifndef KOLO_LAUNCHER_ARGS_H_
#define KOLO_LAUNCHER_ARGS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kolo::launcher {

// One entry of -H: a host name and how many workers it takes.
struct HostSlots {
  std::string name;
  int slots = 1;
};

struct LaunchOptions {
  int np = 0;                    // -np N: number of workers (required)
  std::vector<HostSlots> hosts;  // -H a:2,b:2; default localhost:np
  // --ssh-cmd: how to reach a host that is not local (run through /bin/sh).
  std::string ssh_cmd = "ssh -o BatchMode=yes";
  bool ssh_cmd_given = false;
  // --launcher-cmd: a command prefix with {host}; when given, every worker
  // (local host names included) starts through it.
  std::string launcher_cmd;
  // --start-timeout S (KOLO_START_TIMEOUT, alias HOROVOD_START_TIMEOUT; 30 s):
  // how long workers may take to form the first epoch once one has joined.
  absl::Duration start_timeout = absl::Seconds(30);
  // --heartbeat-timeout-seconds S (KOLO_HEARTBEAT_TIMEOUT_SECONDS; 5 s): a
  // worker silent this long is declared failed by the coordinator.
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  // --cycle-time-ms X (KOLO_CYCLE_TIME_MS, alias HOROVOD_CYCLE_TIME; 1 ms,
  // fractions allowed, > 0): the embedded coordinator's batching window.
  absl::Duration cycle_time = absl::Milliseconds(1);
  // --stall-check-time-seconds S (KOLO_STALL_CHECK_TIME_SECONDS, alias
  // HOROVOD_STALL_CHECK_TIME_SECONDS; 60 s; 0 = no warning): a tensor some
  // ranks submitted and others not for this long is reported.
  absl::Duration stall_check = absl::Seconds(60);
  // --stall-shutdown-time-seconds S (KOLO_STALL_SHUTDOWN_TIME_SECONDS, alias
  // HOROVOD_STALL_SHUTDOWN_TIME_SECONDS; 0 = never): a stall this long ends
  // the job.
  absl::Duration stall_shutdown = absl::ZeroDuration();
  // Elastic mode (Horovod's flags): --min-np A turns it on (--max-np alone
  // too, with A = 1). A lost worker then ends its epoch, not the job; the
  // survivors go on while at least min_np remain. max_np caps the size
  // (joins are a later feature: today it is only checked against -np).
  int min_np = 0;
  int max_np = 0;
  // --elastic-timeout S (HOROVOD_ELASTIC_TIMEOUT; 600 s): how long a job
  // below --min-np waits for workers before it ends.
  absl::Duration elastic_timeout = absl::Seconds(600);
  // --reset-limit N (default: unlimited): membership changes after which
  // the job ends.
  int reset_limit = -1;
  bool elastic() const { return min_np > 0; }
  // These three go to the embedded coordinator and, as KOLO_* variables, to
  // every worker (which would use them if it hosted a coordinator itself).
  // --log-level L: kolorun's level, also passed to workers as KOLO_LOG_LEVEL.
  std::string log_level;
  // --coordinator-addr ADDR: the address workers dial (default: see
  // CoordinatorAddress in main.cc).
  std::string coordinator_addr;
  std::vector<std::string> command;  // what every worker runs
  bool help = false;
  bool version = false;
};

// Parses argv[1..] (without the program name). `env` supplies the defaults
// of the flags that have a variable (KOLO_START_TIMEOUT and friends; a KOLO_*
// name wins over its HOROVOD_* alias, a flag over both). Errors
// (kInvalidArgument) name the flag or variable and say what is expected;
// kolorun prints them and exits 2.
absl::StatusOr<LaunchOptions> ParseArgs(
    const std::vector<std::string>& args,
    const std::map<std::string, std::string>& env);

// Parses "a:2,b,c:1" (slots default to 1).
absl::StatusOr<std::vector<HostSlots>> ParseHosts(absl::string_view text);

// The full --help text.
std::string UsageText();

// How a worker is started.
enum class SpawnMode {
  kLocal,     // fork/exec on this machine, secret in the environment
  kSsh,       // <ssh-cmd> host '<remote command>', secret on stdin
  kTemplate,  // <launcher-cmd with {host}> <remote command>, secret on stdin
};

// One worker of the job: where it runs and what it is told.
struct WorkerPlan {
  int rank = 0;
  std::string worker_id;  // "w<rank>"
  std::string host;       // the -H host name (the launcher host name)
  int local_rank = 0;     // among workers with the same host name
  int local_size = 1;
  SpawnMode mode = SpawnMode::kLocal;
};

// True for "localhost", "127.0.0.1" and the kernel's host name.
bool IsLocalHostName(absl::string_view host, absl::string_view kernel_hostname);

// Ranks fill host slots in host order: rank r goes to the first host with a
// free slot. REQUIRES: options parsed by ParseArgs.
std::vector<WorkerPlan> PlanWorkers(const LaunchOptions& options,
                                    absl::string_view kernel_hostname);

// True when every worker is local (the coordinator then binds 127.0.0.1).
bool AllLocal(const std::vector<WorkerPlan>& plan);

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_ARGS_H_
