// kolorun's command line: LaunchOptions (every knob kolorun has, with its
// default and where it comes from), ParseArgs, and the plan that puts ranks
// on host slots (defined in launcher/plan.cc). horovodrun's flags are in
// launcher/horovod_flags.h, the --help text in launcher/usage.cc.
//
// Pure functions: no I/O (but ReadFileFromDisk, and ParseArgs's overload that
// uses it), no global state; the environment is passed in, so everything
// here is unit-tested (tests/launcher_args_test.cc).
//
// Thread-safety: all functions are thread-safe.
// Invariants of a parsed LaunchOptions (unless help/version/check_build):
// command is not
// empty; without a discovery script, np >= 1 and hosts is not empty with
// slots adding up to at least np; with one, hosts is empty (the script
// gives them) and np is 0 when -np was not given; in elastic mode
// 1 <= min_np <= np (when given) <= max_np (when set).
#ifndef KOLO_LAUNCHER_ARGS_H_
#define KOLO_LAUNCHER_ARGS_H_

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/autotune_config.h"
#include "common/fault_spec.h"
#include "common/knobs.h"
#include "common/tls.h"

namespace kolo::launcher {

// One entry of -H: a host name and how many workers it takes.
struct HostSlots {
  std::string name;
  int slots = 1;
};

struct LaunchOptions {
  // -np N: number of workers (required without --host-discovery-script;
  // with it, the initial target, by default every discovered slot).
  int np = 0;
  bool np_given = false;
  std::vector<HostSlots> hosts;  // -H a:2,b:2; default localhost:np
  // --ssh-cmd: how to reach a host that is not local (run through /bin/sh).
  std::string ssh_cmd = "ssh -o BatchMode=yes";
  bool ssh_cmd_given = false;
  // --launcher-cmd: a command prefix with {host}; when given, every worker
  // (local host names included) starts through it.
  std::string launcher_cmd;
  // --start-timeout, --heartbeat-timeout-seconds, --cycle-time-ms,
  // --stall-check-time-seconds, --stall-shutdown-time-seconds and
  // --log-level, over their variables (KOLO_START_TIMEOUT and friends, or
  // Horovod's names), over their defaults: common/knobs.h has each one's
  // meaning, unit, range and default (kolorun reads no other knob; the rest
  // keep their defaults). The embedded coordinator runs with them; the start
  // timeout also bounds how long the workers may take to form the first
  // epoch once one has joined; the log level is kolorun's. The start timeout,
  // cycle time and stall times also go to every worker as KOLO_* variables
  // (WorkerEnv in command_line.h).
  KnobValues knobs;
  // --log-level was given: workers get it as KOLO_LOG_LEVEL. (Otherwise they
  // read the same variables kolorun did from the environment they inherit.)
  bool log_level_given = false;
  // Elastic mode (Horovod's flags): --min-np A turns it on (--max-np alone
  // too, or --host-discovery-script, with A = 1). A lost worker then ends
  // its epoch, not the job; the survivors go on while at least min_np
  // remain, and kolorun replaces a worker that failed (launcher/slots.h).
  // max_np (0: no cap) caps the workers that run at once.
  // --elastic-timeout is knobs.elastic_timeout.
  int min_np = 0;
  int max_np = 0;
  // --reset-limit N (default: unlimited): membership changes after which
  // the job ends.
  int reset_limit = -1;
  bool elastic() const { return min_np > 0; }
  // --host-discovery-script S: run by /bin/sh every discovery_interval
  // (--discovery-interval-seconds, default 1); prints host[:slots] lines
  // (launcher/discovery.h). Exclusive with -H.
  std::string discovery_script;
  absl::Duration discovery_interval = absl::Seconds(1);
  // --slots-per-host K (alias --slots): the slots of a discovered host, or
  // of an -H entry, that does not say. Default 1.
  int slots_per_host = 1;
  // --blacklist-cooldown-range LO HI (seconds): a slot whose workers keep
  // failing cools down LO, then 2 LO, 4 LO, ... at most HI.
  absl::Duration cooldown_lo = absl::Seconds(2);
  absl::Duration cooldown_hi = absl::Seconds(60);
  // --graceful-term (elastic mode): SIGTERM to kolorun is forwarded to the
  // workers, which leave at their next commit; the job ends when they have.
  bool graceful_term = false;
  // --coordinator-addr ADDR: the address workers dial (default: see
  // CoordinatorAddress in main.cc).
  std::string coordinator_addr;
  // Fault injection (launcher/fault_driver.h): KOLO_FAULTS (`;`-separated),
  // then every --fault SPEC, in order (common/fault_spec.h has the
  // grammar); --fault-seed N (KOLO_FAULT_SEED; default 1) seeds random's
  // draws; --fault-report FILE writes the recovery report as JSON.
  std::vector<FaultSpec> faults;
  uint64_t fault_seed = 1;
  std::string fault_report;
  // The embedded coordinator's metrics page (--metrics-port P, -1: off;
  // --metrics-address A) and event log (--events FILE; "": none), as
  // kolo-coordinator's flags of the same names.
  int metrics_port = -1;
  std::string metrics_address = "127.0.0.1";
  std::string events;
  // --tls: the control plane over TLS with mutual authentication
  // (launcher/job_tls.h): with --tls-cert/--tls-key/--tls-ca (or KOLO_TLS_*)
  // those files, else certificates kolorun makes for the job. The files
  // alone imply --tls.
  bool tls = false;
  tls::TlsFiles tls_files;  // as given; checked by JobTls
  // --autotune and friends over KOLO_AUTOTUNE* / HOROVOD_AUTOTUNE*
  // (common/autotune_config.h): the embedded coordinator's autotuner.
  AutotuneConfig autotune;
  // ---- horovodrun's command line (launcher/horovod_flags.h has the
  // table of every horovodrun 0.28.1 flag and what kolorun does with it) --
  // -x NAME[=VALUE] (mpirun's; repeatable): NAME=VALUE sets NAME for every
  // worker, local or remote; NAME alone passes kolorun's value of NAME
  // (resolved by ParseArgs, an error when NAME is unset). Applied after the
  // forwarded environment, before the per-worker KOLO_*/HOROVOD_* variables.
  std::vector<std::pair<std::string, std::string>> extra_env;
  // -p/--ssh-port N (0: ssh's default) and -i/--ssh-identity-file FILE: added
  // to the ssh command of remote workers (ignored with --launcher-cmd).
  int ssh_port = 0;
  std::string ssh_identity_file;
  // --output-filename DIR: each rank's stdout and stderr also go to
  // DIR/rank.<N>/stdout and DIR/rank.<N>/stderr (horovodrun's layout); the
  // terminal still gets the prefixed lines.
  std::string output_dir;
  // --network-interface(s) IF[,IF]: the only interfaces the data plane and
  // the coordinator link use (workers get KOLO_IFACE; kolorun picks the
  // coordinator address among them). Checked to exist before any start.
  std::vector<std::string> network_interfaces;
  // -cb/--check-build: print what this build has and exit 0 (like --help,
  // it needs no -np and no command).
  bool check_build = false;
  // --verbose: kolorun logs at debug (unless --log-level says otherwise).
  bool verbose = false;
  // --prefix-output-with-timestamp (and --log-with-timestamp): terminal lines
  // of the workers carry a timestamp after the rank prefix.
  bool prefix_timestamp = false;
  // Worker variables set by horovodrun's flags (--fusion-threshold-mb gives
  // KOLO_FUSION_THRESHOLD, --timeline-filename KOLO_TIMELINE, ...), in the
  // order given, passed to every worker like -x.
  std::vector<std::pair<std::string, std::string>> worker_vars;
  // What kolorun prints once at start, before any worker: a horovodrun flag
  // or HOROVOD_* variable that kolo accepts but does not need, and why.
  std::vector<std::string> notices;
  // --hostfile FILE / --config-file FILE, as given (already read into the
  // fields above by ParseArgs; kept for messages). The hostfile fills
  // `hosts` (exclusive with -H and --host-discovery-script).
  std::string hostfile;
  std::string config_file;

  std::vector<std::string> command;  // what every worker runs
  bool help = false;
  bool version = false;
};

// Parses argv[1..] (without the program name), with CLI11. `env` supplies
// the defaults of the flags that have a variable (KOLO_START_TIMEOUT and
// friends; a KOLO_* name wins over its HOROVOD_* alias, a flag over both; a
// bad variable is an error even where a flag overrides it). Flags take their
// value as "--flag value" or "--flag=value"; the last of a repeated flag
// wins. The worker command starts at the first argument that is neither a
// flag nor a flag's value (or after "--"), and everything from there on is
// the worker's, unchanged: `kolorun -np 2 ./train -np 4 --lr 0.1`. -np, with
// one dash (mpirun's and Horovod's spelling, which CLI11 cannot declare), is
// rewritten for CLI11 before it parses (args.cc says how). Errors
// (kInvalidArgument) name the flag or variable, say what is expected and what
// was given; kolorun prints them and exits 2.
//
// horovodrun's flags (launcher/horovod_flags.h) are accepted too: mapped
// onto the fields above, noted in `notices`, or refused with the reason.
// --hostfile and --config-file are read with `read_file` (the overload
// without it reads the disk); the config file's keys count as flags given
// before the command line's, so those win. Horovod's variables that kolo
// does not use each add a notice (launcher/horovod_variables.h).
using ReadFileFn =
    std::function<absl::StatusOr<std::string>(const std::string& path)>;
absl::StatusOr<LaunchOptions> ParseArgs(
    const std::vector<std::string>& args,
    const std::map<std::string, std::string>& env);
absl::StatusOr<LaunchOptions> ParseArgs(
    const std::vector<std::string>& args,
    const std::map<std::string, std::string>& env, const ReadFileFn& read_file);

// The whole text of the file at `path` (errors say why it cannot be read).
absl::StatusOr<std::string> ReadFileFromDisk(const std::string& path);

// The knobs of common/knobs.h that kolorun reads from its flags and, before
// them, from its environment.
absl::Span<const Knob* const> KolorunKnobs();

// The full --help text (launcher/usage.cc).
std::string UsageText();

// How a worker is started.
enum class SpawnMode {
  kLocal,     // fork/exec on this machine, secret in the environment
  kSsh,       // <ssh-cmd> host '<remote command>', secret on stdin
  kTemplate,  // <launcher-cmd with {host}> <remote command>, secret on stdin
};

// One worker of the job: where it runs and what it is told.
struct WorkerPlan {
  // The rank hint (KOLO_RANK; in elastic mode the worker number N of w<N>,
  // which also prefixes its output lines).
  int rank = 0;
  std::string worker_id;  // "w<rank>"
  std::string host;       // the -H host name (the launcher host name)
  int local_rank = 0;     // among workers with the same host name
  int local_size = 1;
  SpawnMode mode = SpawnMode::kLocal;
  int incarnation = 0;  // its slot's starts before it (elastic mode)
  // Among the workers with the same local_rank, in rank order (Horovod's
  // cross rank: one per host for that local rank).
  int cross_rank = 0;
  int cross_size = 1;
};

// True for "localhost", "127.0.0.1" and the kernel's host name.
bool IsLocalHostName(absl::string_view host, absl::string_view kernel_hostname);

// How a worker on `host` starts: kTemplate with --launcher-cmd, else kLocal
// for a local host name, else kSsh.
SpawnMode ModeFor(const LaunchOptions& options, absl::string_view host,
                  absl::string_view kernel_hostname);

// Ranks fill host slots in host order: rank r goes to the first host with a
// free slot. REQUIRES: options parsed by ParseArgs.
std::vector<WorkerPlan> PlanWorkers(const LaunchOptions& options,
                                    absl::string_view kernel_hostname);

// True when every worker is local (the coordinator then binds 127.0.0.1).
bool AllLocal(const std::vector<WorkerPlan>& plan);

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_ARGS_H_
