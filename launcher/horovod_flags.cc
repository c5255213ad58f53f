// horovodrun's command line, flag by flag: see launcher/horovod_flags.h.
// The texts here are kolo's own; only the flag names come from horovodrun.
#include "launcher/horovod_flags.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/autotune_config.h"
#include "common/knobs.h"

namespace kolo::launcher {
namespace {

using A = HorovodFlagAction;
using Id = HorovodFlagId;

constexpr char kNoMpi[] =
    "kolorun starts the workers itself (locally or over ssh) and never runs "
    "mpirun or jsrun; to start a job under them, run `mpirun -np N "
    "your_command` (or jsrun) directly without kolorun: kolo workers join "
    "from Open MPI's environment once KOLO_COORDINATOR and KOLO_SECRET_FILE "
    "are set, as the 'Other launchers' section of the Running jobs page says";

constexpr HorovodFlag kTable[] = {
    {{"-v", "--version"},
     A::kAlias,
     false,
     Id::kNone,
     "--version",
     "shows kolorun's version"},
    {{"-h", "--help"}, A::kSame, false, Id::kNone, "--help", "shows the help"},
    {{"-np", "--num-proc"},
     A::kSame,
     true,
     Id::kNone,
     "-np",
     "the number of workers"},
    {{"-cb", "--check-build"},
     A::kMapped,
     false,
     Id::kCheckBuild,
     nullptr,
     "prints what this build of kolo has (controller, data planes, NCCL, "
     "Python) and exits 0"},
    {{"--disable-cache"},
     A::kNotice,
     false,
     Id::kNone,
     nullptr,
     "kolorun runs no cached start-up checks of the hosts, so there is no "
     "cache to disable (kolo's response cache is --cache-capacity)"},
    {{"--start-timeout"},
     A::kSame,
     true,
     Id::kNone,
     "--start-timeout",
     "seconds the workers have to form the job"},
    {{"--network-interfaces", "--network-interface"},
     A::kMapped,
     true,
     Id::kNetworkInterfaces,
     nullptr,
     "the only interfaces the data plane and the coordinator link use "
     "(comma-separated, repeatable; workers get KOLO_IFACE)"},
    {{"--output-filename"},
     A::kMapped,
     true,
     Id::kOutputFilename,
     nullptr,
     "each rank's output also goes to DIR/rank.N/stdout and stderr"},
    {{"--verbose"},
     A::kMapped,
     false,
     Id::kVerbose,
     nullptr,
     "kolorun logs at debug (unless --log-level says otherwise)"},
    {{"--config-file"},
     A::kMapped,
     true,
     Id::kConfigFile,
     nullptr,
     "reads horovodrun's YAML config file; flags on the command line win"},
    {{"-p", "--ssh-port"},
     A::kMapped,
     true,
     Id::kSshPort,
     nullptr,
     "the ssh port of remote hosts"},
    {{"-i", "--ssh-identity-file"},
     A::kMapped,
     true,
     Id::kSshIdentityFile,
     nullptr,
     "the ssh identity file for remote hosts"},
    {{"--fusion-threshold-mb"},
     A::kMapped,
     true,
     Id::kFusionThresholdMb,
     nullptr,
     "workers get KOLO_FUSION_THRESHOLD, the MB given in bytes"},
    {{"--cycle-time-ms"},
     A::kSame,
     true,
     Id::kNone,
     "--cycle-time-ms",
     "milliseconds a ready tensor waits to batch"},
    {{"--cache-capacity"},
     A::kMapped,
     true,
     Id::kCacheCapacity,
     nullptr,
     "workers get KOLO_CACHE_CAPACITY (0 turns the response cache off)"},
    {{"--hierarchical-allreduce"},
     A::kMapped,
     false,
     Id::kHierarchicalOn,
     nullptr,
     "workers get KOLO_HIERARCHICAL=1 (two-level allreduce, allgather, "
     "broadcast and reducescatter)"},
    {{"--no-hierarchical-allreduce"},
     A::kMapped,
     false,
     Id::kHierarchicalOff,
     nullptr,
     "workers get KOLO_HIERARCHICAL=0 (flat algorithms)"},
    {{"--hierarchical-allgather", "--no-hierarchical-allgather"},
     A::kNotice,
     false,
     Id::kNone,
     nullptr,
     "kolo has no separate switch for allgather: --hierarchical-allreduce "
     "and --no-hierarchical-allreduce (KOLO_HIERARCHICAL) govern allreduce, "
     "allgather, broadcast and reducescatter together"},
    {{"--torus-allreduce", "--no-torus-allreduce"},
     A::kNotice,
     false,
     Id::kNone,
     nullptr,
     "kolo has no torus allreduce; its two-level algorithm is the "
     "hierarchical one (KOLO_HIERARCHICAL, on by default where it helps)"},
    {{"--autotune", "--no-autotune"},
     A::kMapped,
     false,
     Id::kAutotune,
     nullptr,
     "the coordinator tunes the fusion threshold, cycle time and response "
     "cache during the first steps (KOLO_AUTOTUNE)"},
    {{"--autotune-log-file"},
     A::kMapped,
     true,
     Id::kAutotune,
     nullptr,
     "one CSV line per autotune sample (KOLO_AUTOTUNE_LOG)"},
    {{"--autotune-warmup-samples"},
     A::kMapped,
     true,
     Id::kAutotune,
     nullptr,
     "samples not scored (KOLO_AUTOTUNE_WARMUP_SAMPLES)"},
    {{"--autotune-steps-per-sample"},
     A::kMapped,
     true,
     Id::kAutotune,
     nullptr,
     "training steps per sample (KOLO_AUTOTUNE_STEPS_PER_SAMPLE)"},
    {{"--autotune-bayes-opt-max-samples"},
     A::kMapped,
     true,
     Id::kAutotune,
     nullptr,
     "scored samples before the choice "
     "(KOLO_AUTOTUNE_BAYES_OPT_MAX_SAMPLES)"},
    {{"--autotune-gaussian-process-noise"},
     A::kMapped,
     true,
     Id::kAutotune,
     nullptr,
     "how noisy the scores are: dlib's relative noise magnitude "
     "(KOLO_AUTOTUNE_GAUSSIAN_PROCESS_NOISE)"},
    {{"--min-np", "--min-num-proc"},
     A::kAlias,
     true,
     Id::kNone,
     "--min-np",
     "elastic mode: the fewest workers the job goes on with"},
    {{"--max-np", "--max-num-proc"},
     A::kAlias,
     true,
     Id::kNone,
     "--max-np",
     "elastic mode: the most workers that run at once"},
    {{"--slots-per-host"},
     A::kSame,
     true,
     Id::kNone,
     "--slots-per-host",
     "slots of a host that does not say"},
    {{"--elastic-timeout"},
     A::kSame,
     true,
     Id::kNone,
     "--elastic-timeout",
     "seconds an elastic job below --min-np waits"},
    {{"--reset-limit"},
     A::kSame,
     true,
     Id::kNone,
     "--reset-limit",
     "membership changes after which the job ends"},
    {{"--blacklist-cooldown-range"},
     A::kSame,
     true,
     Id::kNone,
     "--blacklist-cooldown-range",
     "how long a failing slot rests"},
    {{"--timeline-filename"},
     A::kMapped,
     true,
     Id::kTimelineFilename,
     nullptr,
     "workers get KOLO_TIMELINE (rank 0 writes the timeline there)"},
    {{"--timeline-mark-cycles", "--no-timeline-mark-cycles"},
     A::kNotice,
     false,
     Id::kNone,
     nullptr,
     "kolo's timeline has no cycles to mark; it marks every negotiated plan "
     "instead"},
    {{"--no-stall-check"},
     A::kMapped,
     false,
     Id::kStallCheckOff,
     nullptr,
     "no stall warning and no stall shutdown (both times 0)"},
    {{"--stall-check"},
     A::kMapped,
     false,
     Id::kStallCheckOn,
     nullptr,
     "the stall check on (the default), undoing --no-stall-check"},
    {{"--stall-check-warning-time-seconds"},
     A::kAlias,
     true,
     Id::kNone,
     "--stall-check-time-seconds",
     "seconds of a stall before a warning"},
    {{"--stall-check-shutdown-time-seconds"},
     A::kAlias,
     true,
     Id::kNone,
     "--stall-shutdown-time-seconds",
     "seconds of a stall before the job ends"},
    {{"--mpi-threads-disable", "--no-mpi-threads-disable"},
     A::kNotice,
     false,
     Id::kNone,
     nullptr,
     "kolo does not use MPI, so there are no MPI threads to configure"},
    {{"--mpi-args"}, A::kRefused, true, Id::kNone, nullptr, kNoMpi},
    {{"--tcp"},
     A::kNotice,
     false,
     Id::kNone,
     nullptr,
     "kolo's data plane between hosts is TCP already (shared memory within "
     "a host); to keep NCCL off InfiniBand too, add -x NCCL_IB_DISABLE=1"},
    {{"--binding-args"}, A::kRefused, true, Id::kNone, nullptr, kNoMpi},
    {{"--num-nccl-streams"},
     A::kNotice,
     true,
     Id::kNone,
     nullptr,
     "kolo's NCCL path manages its own CUDA streams; their number is not a "
     "setting"},
    {{"--thread-affinity"},
     A::kNotice,
     true,
     Id::kNone,
     nullptr,
     "kolo does not pin its background threads; pin the whole worker "
     "instead (taskset or numactl in front of the command)"},
    {{"--gloo-timeout-seconds"},
     A::kMapped,
     true,
     Id::kGlooTimeoutSeconds,
     nullptr,
     "workers get KOLO_TIMEOUT_SECONDS (a data-plane wait fails after this "
     "long without progress)"},
    {{"--log-level"},
     A::kSame,
     true,
     Id::kNone,
     "--log-level",
     "the log level of kolorun and the workers"},
    {{"--log-with-timestamp", "--no-log-hide-timestamp"},
     A::kMapped,
     false,
     Id::kTimestampOn,
     nullptr,
     "workers' output lines carry a timestamp after the rank prefix"},
    {{"--log-without-timestamp", "--log-hide-timestamp"},
     A::kMapped,
     false,
     Id::kTimestampOff,
     nullptr,
     "workers' output lines carry no timestamp (the default)"},
    {{"-prefix-timestamp", "--prefix-output-with-timestamp"},
     A::kMapped,
     false,
     Id::kTimestampOn,
     nullptr,
     "workers' output lines carry a timestamp after the rank prefix"},
    {{"-H", "--hosts"},
     A::kSame,
     true,
     Id::kNone,
     "-H",
     "hosts and their slots"},
    {{"-hostfile", "--hostfile"},
     A::kMapped,
     true,
     Id::kHostfile,
     nullptr,
     "hosts and slots from a file of 'host slots=N' lines"},
    {{"--host-discovery-script"},
     A::kSame,
     true,
     Id::kNone,
     "--host-discovery-script",
     "elastic mode: a script that lists the hosts"},
    {{"--gloo"},
     A::kNotice,
     false,
     Id::kNone,
     nullptr,
     "kolo has one controller (its coordinator) and a data plane of its own "
     "(TCP, shared memory, NCCL), so there is nothing to choose"},
    {{"--mpi"}, A::kRefused, false, Id::kNone, nullptr, kNoMpi},
    {{"--jsrun"}, A::kRefused, false, Id::kNone, nullptr, kNoMpi},
    {{"-x"},
     A::kMapped,
     true,
     Id::kExtraEnv,
     nullptr,
     "mpirun's -x NAME[=VALUE]: sets NAME for every worker (NAME alone: "
     "kolorun's value)"},
};

absl::Status Invalid(absl::string_view name, absl::string_view expected,
                     absl::string_view value) {
  return absl::InvalidArgumentError(
      absl::StrCat(name, ": expected ", expected, ", got '", value, "'"));
}

bool ValidName(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(static_cast<unsigned char>(name[0])))
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// An integer in [lo, hi], or an error naming the flag.
absl::StatusOr<int64_t> Integer(absl::string_view name,
                                const std::string& value, int64_t lo,
                                int64_t hi, absl::string_view expected) {
  int64_t n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < lo || n > hi) {
    return Invalid(name, expected, value);
  }
  return n;
}

absl::Status NonEmpty(absl::string_view name, const std::string& value,
                      absl::string_view what, std::string& out) {
  if (value.empty())
    return absl::InvalidArgumentError(absl::StrCat(name, ": empty ", what));
  out = value;
  return absl::OkStatus();
}

absl::Status AddInterfaces(absl::string_view name, const std::string& value,
                           LaunchOptions& o) {
  for (absl::string_view item : absl::StrSplit(value, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) {
      return Invalid(name, "interface names, comma-separated (eth0,ib0)",
                     value);
    }
    if (std::find(o.network_interfaces.begin(), o.network_interfaces.end(),
                  item) == o.network_interfaces.end()) {
      o.network_interfaces.emplace_back(item);
    }
  }
  return absl::OkStatus();
}

// The flags that set a worker variable.
absl::Status ApplyWorkerVar(const HorovodFlag& flag, absl::string_view name,
                            const std::string& value, LaunchOptions& o) {
  switch (flag.id) {
    case Id::kFusionThresholdMb: {
      absl::StatusOr<int64_t> mb =
          Integer(name, value, 0, int64_t{1} << 20,
                  "megabytes, an integer from 0 (no fusion) to 1048576");
      if (!mb.ok()) return mb.status();
      SetWorkerVar(o, "KOLO_FUSION_THRESHOLD", absl::StrCat(*mb << 20));
      return absl::OkStatus();
    }
    case Id::kCacheCapacity: {
      absl::StatusOr<int64_t> n =
          Integer(name, value, 0, int64_t{1} << 20,
                  "a number of entries from 0 (no cache) to 1048576");
      if (!n.ok()) return n.status();
      SetWorkerVar(o, "KOLO_CACHE_CAPACITY", absl::StrCat(*n));
      return absl::OkStatus();
    }
    case Id::kHierarchicalOn:
    case Id::kHierarchicalOff:
      SetWorkerVar(o, "KOLO_HIERARCHICAL",
                   flag.id == Id::kHierarchicalOn ? "1" : "0");
      return absl::OkStatus();
    case Id::kTimelineFilename: {
      std::string path;
      if (absl::Status st = NonEmpty(name, value, "path", path); !st.ok()) {
        return st;
      }
      SetWorkerVar(o, "KOLO_TIMELINE", std::move(path));
      return absl::OkStatus();
    }
    case Id::kGlooTimeoutSeconds: {
      KnobValues scratch;  // checks the value as the workers will
      if (absl::Status st =
              SetKnobFromVariable(knobs::kDataTimeout,
                                  knobs::kDataTimeout.variable, value, scratch);
          !st.ok()) {
        return Invalid(name, "seconds above 0", value);
      }
      SetWorkerVar(o, knobs::kDataTimeout.variable, value);
      return absl::OkStatus();
    }
    default:
      return absl::InternalError(absl::StrCat(name, ": not a worker variable"));
  }
}

}  // namespace

absl::Span<const HorovodFlag> HorovodFlags() { return kTable; }

void SetWorkerVar(LaunchOptions& o, const std::string& name,
                  std::string value) {
  for (auto& [n, v] : o.worker_vars) {
    if (n == name) {
      v = std::move(value);
      return;
    }
  }
  o.worker_vars.emplace_back(name, std::move(value));
}

void AddNotice(LaunchOptions& o, std::string notice) {
  if (std::find(o.notices.begin(), o.notices.end(), notice) ==
      o.notices.end()) {
    o.notices.push_back(std::move(notice));
  }
}

absl::StatusOr<std::pair<std::string, std::string>> ParseExtraEnv(
    absl::string_view value, const std::map<std::string, std::string>& env) {
  const size_t eq = value.find('=');
  const std::string name(value.substr(0, eq));
  if (!ValidName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "-x '", value,
        "': expected NAME or NAME=VALUE, with NAME letters, digits and _ "
        "(not starting with a digit)"));
  }
  if (eq != absl::string_view::npos) {
    return std::make_pair(name, std::string(value.substr(eq + 1)));
  }
  auto it = env.find(name);
  if (it == env.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("-x ", name, ": ", name,
                     " is not set in kolorun's environment; give -x ", name,
                     "=VALUE, or set it before running kolorun"));
  }
  return std::make_pair(name, it->second);
}

absl::Status ApplyHorovodFlag(const HorovodFlag& flag, absl::string_view name,
                              const std::string& value,
                              const std::map<std::string, std::string>& env,
                              LaunchOptions& o, HorovodFlagState& state) {
  switch (flag.id) {
    case Id::kNone:
      return absl::InternalError(absl::StrCat(name, ": not a mapped flag"));
    case Id::kExtraEnv: {
      auto kv = ParseExtraEnv(value, env);
      if (!kv.ok()) return kv.status();
      o.extra_env.push_back(*std::move(kv));
      return absl::OkStatus();
    }
    case Id::kHostfile:
      return NonEmpty(name, value, "path", o.hostfile);
    case Id::kConfigFile:
      return NonEmpty(name, value, "path", o.config_file);
    case Id::kOutputFilename:
      return NonEmpty(name, value, "directory", o.output_dir);
    case Id::kNetworkInterfaces:
      return AddInterfaces(name, value, o);
    case Id::kSshPort: {
      absl::StatusOr<int64_t> port =
          Integer(name, value, 1, 65535, "a port number (1-65535)");
      if (!port.ok()) return port.status();
      o.ssh_port = static_cast<int>(*port);
      return absl::OkStatus();
    }
    case Id::kSshIdentityFile:
      return NonEmpty(name, value, "path", o.ssh_identity_file);
    case Id::kCheckBuild:
      o.check_build = true;
      return absl::OkStatus();
    case Id::kVerbose:
      o.verbose = true;
      return absl::OkStatus();
    case Id::kStallCheckOff:
    case Id::kStallCheckOn:
      state.stall_check_off = flag.id == Id::kStallCheckOff;
      return absl::OkStatus();
    case Id::kTimestampOn:
    case Id::kTimestampOff:
      o.prefix_timestamp = flag.id == Id::kTimestampOn;
      return absl::OkStatus();
    case Id::kAutotune:
      return SetAutotuneFlag(name, value, o.autotune);
    case Id::kFusionThresholdMb:
    case Id::kCacheCapacity:
    case Id::kHierarchicalOn:
    case Id::kHierarchicalOff:
    case Id::kTimelineFilename:
    case Id::kGlooTimeoutSeconds:
      return ApplyWorkerVar(flag, name, value, o);
  }
  return absl::InternalError(absl::StrCat(name, ": unhandled flag"));
}

void FinishHorovodFlags(const HorovodFlagState& state, bool log_level_set,
                        LaunchOptions& o) {
  if (state.stall_check_off.value_or(false)) {
    o.knobs.stall_check = absl::ZeroDuration();
    o.knobs.stall_shutdown = absl::ZeroDuration();
  }
  if (o.verbose && !log_level_set) o.knobs.log_level = "debug";
}

}  // namespace kolo::launcher
