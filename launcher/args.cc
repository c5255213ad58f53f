#include "launcher/args.h"

#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "common/knobs.h"

namespace kolo::launcher {
namespace {

// The defaults in <--flag> are filled in from common/knobs.h (UsageText).
constexpr const char* kUsage =
    R"(Usage: kolorun -np N [options] [--] command [args...]

Starts N workers of a kolo job, each running `command args...`, with an
embedded coordinator, and supervises them until they end.

Options:
  -np, --np, --num-proc N      Number of workers (required).
  -H, --hosts H1:S1,H2:S2,...  Hosts and their slots (slots default to 1).
                               Ranks fill slots in host order: rank 0 takes
                               the first slot of H1. Default: localhost:N.
                               localhost, 127.0.0.1 and this machine's host
                               name start local processes; other hosts are
                               reached with --ssh-cmd.
  --ssh-cmd CMD                How to reach a remote host (run by /bin/sh as
                               `CMD host 'remote command'`).
                               Default: ssh -o BatchMode=yes
  --launcher-cmd TEMPLATE      Start EVERY worker through TEMPLATE, with
                               {host} replaced by the worker's host name, e.g.
                               'ip netns exec {host}'. The worker command is
                               appended to the expanded template.
  --start-timeout S            Seconds the workers have to form the job once
                               the first of them has reached the coordinator;
                               past it, kolorun ends the job naming the workers
                               that have not joined. Commands that never reach
                               the coordinator are not timed. Default: <--start-timeout>, or
                               KOLO_START_TIMEOUT / HOROVOD_START_TIMEOUT.
  --heartbeat-timeout-seconds S
                               A worker silent this long is declared failed
                               and the job ends. Default: <--heartbeat-timeout-seconds>, or
                               KOLO_HEARTBEAT_TIMEOUT_SECONDS.
  --cycle-time-ms X            Milliseconds (fractions allowed) a ready tensor
                               waits for others to batch with while the data
                               plane is busy. Default: <--cycle-time-ms>, or
                               KOLO_CYCLE_TIME_MS / HOROVOD_CYCLE_TIME.
  --stall-check-time-seconds S
                               Warn, naming the missing ranks, when some ranks
                               submitted a tensor and others have not for S
                               seconds; 0 disables the warning. Default: <--stall-check-time-seconds>, or
                               KOLO_STALL_CHECK_TIME_SECONDS /
                               HOROVOD_STALL_CHECK_TIME_SECONDS.
  --stall-shutdown-time-seconds S
                               End the job (every pending op fails, saying
                               why) after a stall of S seconds; 0 = never.
                               Default: <--stall-shutdown-time-seconds>, or KOLO_STALL_SHUTDOWN_TIME_SECONDS
                               / HOROVOD_STALL_SHUTDOWN_TIME_SECONDS.
  --min-np N                   Elastic mode: a worker that fails or is
                               stopped ends its epoch, not the job; the
                               survivors go on (their pending ops fail with
                               the membership error; kolo::elastic::run
                               retries) and kolorun starts a replacement.
                               Below N workers the job waits up to
                               --elastic-timeout, then ends; so does a job
                               whose discovery script first offers fewer
                               than N slots (its first epoch forms at N).
  --max-np N                   Elastic mode: the most workers that run at
                               once; slots beyond it stay idle (with
                               --max-np alone, --min-np is 1).
  --elastic-timeout S          Seconds an elastic job below --min-np waits
                               before it ends. Default: <--elastic-timeout>,
                               or KOLO_ELASTIC_TIMEOUT /
                               HOROVOD_ELASTIC_TIMEOUT.
  --reset-limit N              Elastic mode: end the job after N membership
                               changes. Default: unlimited.
  --host-discovery-script S    Elastic mode (--min-np defaults to 1): run S
                               with /bin/sh every --discovery-interval-seconds;
                               it prints the usable hosts, one a line, as
                               host or host:slots ('#' comments and blank
                               lines are skipped). A host that appears gets
                               workers on its slots; a host that disappears
                               has its workers stopped (SIGTERM: they leave at
                               their next commit). A failing run is retried
                               with a warning; a failing first run ends
                               kolorun (exit 2). -np, when given, is the
                               number of workers to start with (default: every
                               discovered slot). Exclusive with -H.
  --discovery-interval-seconds S
                               Seconds between runs of the discovery script
                               (fractions allowed). Default: 1.
  --slots-per-host K, --slots K
                               Slots of a host whose discovery line (or -H
                               entry) does not say. Default: 1.
  --blacklist-cooldown-range LO HI
                               Elastic mode: a worker that fails is replaced
                               at once in its slot; when the replacement fails
                               too (within 30 s of its start), the slot cools
                               down LO seconds, then 2 LO, 4 LO, ... at most HI
                               (never forever), and its want moves to a free
                               slot if there is one. A host is blacklisted as
                               a whole only while it has no live worker.
                               Default: 2 60.
  --graceful-term              Elastic mode: SIGTERM to kolorun is forwarded
                               to every worker, which leaves at its next
                               commit; the job ends when every worker has
                               ended (a second SIGTERM or SIGINT stops them
                               all at once). Without it, SIGTERM stops the
                               job.
  --fault SPEC                 Inject a fault (repeatable; KOLO_FAULTS holds
                               more, ';'-separated): kill, stop, term, delay,
                               drop, slow, partition, kill-coordinator or
                               random, with a target (rank=N at firing, or
                               worker=ID) and a trigger (after=DUR since the
                               start, or at-op=N completed collectives), e.g.
                               kill:rank=2:after=3s,
                               stop:rank=1:at-op=500:for=4s,
                               delay:rank=0:ms=20:for=5s,
                               random:rate=6/min:until=60s (random requires
                               rate= and until=: it draws faults at that
                               rate up to that time). The grammar is on the
                               documentation's "Fault injection" page
                               (docs/fault-injection.md). A run with faults
                               ends with a recovery report on stderr.
  --fault-seed N               Seed of random's draws (KOLO_FAULT_SEED).
                               Default: 1.
  --fault-report FILE          Also write the recovery report to FILE as
                               JSON.
  --log-level L                trace, debug, info, warn, error, critical, off;
                               for kolorun and (as KOLO_LOG_LEVEL) the workers.
                               Default: KOLO_LOG_LEVEL / HOROVOD_LOG_LEVEL, or
                               <--log-level>.
  --coordinator-addr ADDR      Host or IP address workers dial to reach the
                               embedded coordinator (its port is picked by
                               the kernel). Default: 127.0.0.1 when every
                               worker is local, else this machine's address
                               toward the first remote host, or this
                               machine's host name if that host does not
                               resolve.
  -h, --help                   Show this help.
  --version                    Show kolorun's version.

Each worker gets KOLO_LAUNCHER=kolorun, KOLO_COORDINATOR, KOLO_JOB_ID,
KOLO_WORKER_ID (w<rank>), KOLO_WORKER_INCARNATION (elastic mode: 0 for the
first process of a slot, then 1, 2, ... for its replacements), KOLO_HOSTNAME
(its -H or discovered host name), KOLO_RANK,
KOLO_SIZE, KOLO_LOCAL_RANK, KOLO_LOCAL_SIZE, KOLO_START_TIMEOUT,
KOLO_CYCLE_TIME_MS, KOLO_STALL_CHECK_TIME_SECONDS,
KOLO_STALL_SHUTDOWN_TIME_SECONDS, KOLO_LOG_LEVEL (with --log-level) and the
job secret KOLO_SECRET. The secret is never put on a command line: local
workers get it in their environment, remote and templated workers on stdin.
kolorun warns about KOLO_* variables in its environment that kolo does not
know (a typo, usually), naming the closest known one.

Output lines are prefixed with the rank: [3]<stdout>:... and [3]<stderr>:...
A worker that exits non-zero or dies ends the job: kolorun names it, stops the
others and exits with its code (128+signal when killed). Ctrl-C / SIGTERM stop
every worker (exit 130 / 143). Workers never outlive kolorun, even when it is
killed with SIGKILL.

Elastic mode, once the first epoch formed: a worker that exits non-zero or
dies is replaced (same worker id, next incarnation; its lines keep the prefix
[N] of its id wN); one that exits 0 is not (it finished or left). The job
ends with 0 when every worker exited 0 and the coordinator ended the job in
order.
)";

// The knobs of common/knobs.h that kolorun reads from its flags and, before
// them, from its environment.
constexpr const Knob* kKolorunKnobs[] = {
    &knobs::kStartTimeout,  &knobs::kHeartbeatTimeout, &knobs::kCycleTime,
    &knobs::kStallCheck,    &knobs::kStallShutdown,    &knobs::kLogLevel,
    &knobs::kElasticTimeout};

// ---- The command line, read by CLI11 ---------------------------------------
//
// kolorun's flags are declared to CLI11 without variables (Declare). CLI11
// matches the names, counts the values and finds where the worker command
// starts (prefix_command: at the first argument that is neither a flag nor a
// flag's value, or after "--"; it and everything after it are left over).
// The values are then checked in the order they were given
// (app.parse_order()), so that the first bad one is reported and the last
// of a repeated flag wins, as before.
//
// Three of kolorun's spellings CLI11 cannot read; they are rewritten before
// it parses (ForCli11):
//   -np N            --single-dash-np N. CLI11 has no single-dash long names
//                    (it would read -n with the value "p"); the name is
//                    internal, kept apart from --np so that errors name the
//                    flag as it was typed.
//   --blacklist-cooldown-range=LO,HI
//                    --blacklist-cooldown-range LO HI (Horovod's form, the
//                    one CLI11 reads as two values).
//   --FLAG=          --FLAG "" for a FLAG that takes a value: CLI11 would
//                    take the next argument as the value, so that
//                    --launcher-cmd="$UNSET" python train.py ran
//                    `train.py` through "python".
// Where the command starts is known only once CLI11 has parsed, so every
// argument is rewritten, the command's too; but the command is then cut
// from the original arguments, and the worker gets it unchanged (kolorun -np
// 2 ./train -np 4 passes "-np 4" on). Only a flag's value spelt like one of
// these is changed with it (--ssh-cmd -np gives "--single-dash-np").

constexpr char kSingleDashNp[] = "--single-dash-np";
constexpr char kCooldownFlag[] = "--blacklist-cooldown-range";

enum class Flag {
  kHelp,
  kVersion,
  kGracefulTerm,
  kNp,
  kHosts,
  kSshCmd,
  kLauncherCmd,
  kCoordinatorAddr,
  kMinNp,
  kMaxNp,
  kResetLimit,
  kDiscoveryScript,
  kDiscoveryInterval,
  kSlotsPerHost,
  kCooldown,
  kKnob,
  kFault,
  kFaultSeed,
  kFaultReport,
};

// A declared flag: what it sets, and its name in errors.
struct FlagInfo {
  Flag flag;
  std::string name;
  const Knob* knob = nullptr;  // kKnob
};
using FlagTable = std::map<const CLI::Option*, FlagInfo>;

FlagTable Declare(CLI::App& app) {
  app.set_help_flag();   // kUsage is the help (kolo's own wording)
  app.prefix_command();  // the worker command is left over (remaining())
  // Every value is kept (results()); ParseArgs reads them in order.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  FlagTable table;
  // Flags without a value: "--graceful-term=1" is refused (MismatchMessage);
  // CLI11 reads "--graceful-term=" and "--graceful-term=true" as the flag.
  for (const auto& [names, flag, name] :
       {std::tuple<const char*, Flag, const char*>{"-h,--help", Flag::kHelp,
                                                   "--help"},
        {"--version", Flag::kVersion, "--version"},
        {"--graceful-term", Flag::kGracefulTerm, "--graceful-term"}}) {
    table[app.add_flag(names)->disable_flag_override()] = {flag, name};
  }
  for (const auto& [names, flag, name] :
       {std::tuple<const char*, Flag, const char*>{kSingleDashNp, Flag::kNp,
                                                   "-np"},
        {"--np", Flag::kNp, "--np"},
        {"--num-proc", Flag::kNp, "--num-proc"},
        {"-H,--hosts", Flag::kHosts, "-H"},
        {"--ssh-cmd", Flag::kSshCmd, "--ssh-cmd"},
        {"--launcher-cmd", Flag::kLauncherCmd, "--launcher-cmd"},
        {"--coordinator-addr", Flag::kCoordinatorAddr, "--coordinator-addr"},
        {"--min-np", Flag::kMinNp, "--min-np"},
        {"--max-np", Flag::kMaxNp, "--max-np"},
        {"--reset-limit", Flag::kResetLimit, "--reset-limit"},
        {"--host-discovery-script", Flag::kDiscoveryScript,
         "--host-discovery-script"},
        {"--discovery-interval-seconds", Flag::kDiscoveryInterval,
         "--discovery-interval-seconds"},
        {"--slots-per-host", Flag::kSlotsPerHost, "--slots-per-host"},
        {"--slots", Flag::kSlotsPerHost, "--slots"},
        {"--fault", Flag::kFault, "--fault"},
        {"--fault-seed", Flag::kFaultSeed, "--fault-seed"},
        {"--fault-report", Flag::kFaultReport, "--fault-report"}}) {
    table[app.add_option(names)] = {flag, name};
  }
  // LO HI: two values, taken whatever they look like (as -np's one).
  table[app.add_option(kCooldownFlag)->type_size(2)] = {Flag::kCooldown,
                                                        kCooldownFlag};
  for (const Knob* knob : kKolorunKnobs) {
    table[app.add_option(knob->flag)] = {Flag::kKnob, knob->flag, knob};
  }
  return table;
}

// The arguments as CLI11 reads them, and for each the index of the argument
// it came from.
struct Rewritten {
  std::vector<std::string> args;
  std::vector<size_t> origin;
};

Rewritten ForCli11(const std::vector<std::string>& args, CLI::App& app) {
  Rewritten out;
  auto add = [&out](std::string arg, size_t from) {
    out.args.push_back(std::move(arg));
    out.origin.push_back(from);
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const size_t eq = arg.find('=');
    if (arg == "-np") {
      add(kSingleDashNp, i);
    } else if (!absl::StartsWith(arg, "--") || eq == std::string::npos) {
      add(arg, i);
    } else if (const std::string name = arg.substr(0, eq);
               name == kCooldownFlag) {
      const std::pair<std::string, std::string> lo_hi =
          absl::StrSplit(arg.substr(eq + 1), absl::MaxSplits(',', 1));
      add(name, i);
      add(lo_hi.first, i);
      add(lo_hi.second, i);
    } else if (const CLI::Option* option = app.get_option_no_throw(name);
               eq + 1 == arg.size() && option != nullptr &&
               option->get_items_expected_max() > 0) {
      add(name, i);
      add("", i);
    } else {
      add(arg, i);
    }
  }
  return out;
}

// The message for CLI11's ArgumentMismatch `what`: a flag given last without
// its value(s), or a value given to a flag that takes none.
std::string MismatchMessage(const std::string& what,
                            const std::vector<std::string>& args) {
  // "graceful-term was given a disallowed flag override"
  if (absl::StrContains(what, "flag override")) {
    const std::string prefix =
        absl::StrCat("--", what.substr(0, what.find(' ')), "=");
    for (const std::string& arg : args) {
      if (absl::StartsWith(arg, prefix)) {
        return absl::StrCat("unknown flag '", arg, "'");
      }
    }
    return what;
  }
  // "--np: 1 required TEXT missing"
  if (absl::StartsWith(what, absl::StrCat(kCooldownFlag, ":"))) {
    return absl::StrCat("flag '", kCooldownFlag,
                        "' needs two values: LO HI (seconds)");
  }
  // The flag is the last argument (with its name as typed).
  return absl::StrCat("flag '", args.back(), "' needs a value");
}

// What the flags say beyond LaunchOptions, for the checks after them.
struct ParseState {
  std::string hosts_text;
  bool np_given = false;
  bool cooldown_given = false;
  bool interval_given = false;
};

// Sets what `flag`, given with `values` (one; LO and HI for the cooldown
// range), says in `o`.
absl::Status Apply(const FlagInfo& flag, absl::Span<const std::string> values,
                   LaunchOptions& o, ParseState& state) {
  const std::string& name = flag.name;
  const std::string& value = values.back();
  switch (flag.flag) {
    case Flag::kHelp:
      o.help = true;
      break;
    case Flag::kVersion:
      o.version = true;
      break;
    case Flag::kGracefulTerm:
      o.graceful_term = true;
      break;
    case Flag::kKnob:
      if (absl::Status st = SetKnobFromFlag(*flag.knob, value, o.knobs);
          !st.ok()) {
        return st;
      }
      if (flag.knob->id == KnobId::kLogLevel) o.log_level_given = true;
      break;
    case Flag::kNp:
      if (!absl::SimpleAtoi(value, &o.np) || o.np < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": expected a positive number of workers, got '",
                         value, "'"));
      }
      state.np_given = true;
      break;
    case Flag::kHosts:
      state.hosts_text = value;
      break;
    case Flag::kSshCmd:
      if (absl::StripAsciiWhitespace(value).empty()) {
        return absl::InvalidArgumentError("--ssh-cmd: empty command");
      }
      o.ssh_cmd = value;
      o.ssh_cmd_given = true;
      break;
    case Flag::kLauncherCmd:
      if (absl::StripAsciiWhitespace(value).empty()) {
        return absl::InvalidArgumentError("--launcher-cmd: empty template");
      }
      o.launcher_cmd = value;
      break;
    case Flag::kMinNp:
    case Flag::kMaxNp: {
      int n = 0;
      if (!absl::SimpleAtoi(value, &n) || n < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": expected a positive number of workers, got '",
                         value, "'"));
      }
      (flag.flag == Flag::kMinNp ? o.min_np : o.max_np) = n;
      break;
    }
    case Flag::kResetLimit:
      if (!absl::SimpleAtoi(value, &o.reset_limit) || o.reset_limit < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--reset-limit: expected a number of membership changes (0 or "
            "more), got '",
            value, "'"));
      }
      break;
    case Flag::kDiscoveryScript:
      if (absl::StripAsciiWhitespace(value).empty()) {
        return absl::InvalidArgumentError(
            "--host-discovery-script: empty command");
      }
      o.discovery_script = value;
      break;
    case Flag::kDiscoveryInterval: {
      double seconds = 0;
      if (!absl::SimpleAtod(value, &seconds) || !(seconds > 0) ||
          seconds > 86400) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--discovery-interval-seconds: expected seconds above 0 (at most "
            "a day; fractions allowed), got '",
            value, "'"));
      }
      o.discovery_interval = absl::Seconds(seconds);
      state.interval_given = true;
      break;
    }
    case Flag::kSlotsPerHost:
      if (!absl::SimpleAtoi(value, &o.slots_per_host) || o.slots_per_host < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ": expected a positive number of slots, got '", value, "'"));
      }
      break;
    case Flag::kCooldown: {
      const std::string& lo_text = values.front();
      const std::string& hi_text = values.back();
      double lo = 0, hi = 0;
      if (!absl::SimpleAtod(lo_text, &lo) || !absl::SimpleAtod(hi_text, &hi) ||
          !(lo > 0) || !(hi >= lo) || hi > 1e9) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--blacklist-cooldown-range: expected LO HI, seconds with "
            "0 < LO <= HI, got '",
            lo_text, "' '", hi_text, "'"));
      }
      o.cooldown_lo = absl::Seconds(lo);
      o.cooldown_hi = absl::Seconds(hi);
      state.cooldown_given = true;
      break;
    }
    case Flag::kFault: {
      absl::StatusOr<FaultSpec> spec = ParseFaultSpec(value);
      if (!spec.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--fault: ", spec.status().message()));
      }
      o.faults.push_back(*std::move(spec));
      break;
    }
    case Flag::kFaultSeed:
      if (!absl::SimpleAtoi(value, &o.fault_seed)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--fault-seed: expected a non-negative integer, got '",
                         value, "'"));
      }
      break;
    case Flag::kFaultReport:
      if (value.empty()) {
        return absl::InvalidArgumentError("--fault-report: empty path");
      }
      o.fault_report = value;
      break;
    case Flag::kCoordinatorAddr:
      if (value.empty()) {
        return absl::InvalidArgumentError("--coordinator-addr: empty address");
      }
      o.coordinator_addr = value;
      break;
  }
  return absl::OkStatus();
}

}  // namespace

std::string UsageText() { return FillKnobDefaults(kUsage, kKolorunKnobs); }

absl::StatusOr<std::vector<HostSlots>> ParseHosts(absl::string_view text,
                                                  int default_slots) {
  std::vector<HostSlots> hosts;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "-H '", text, "': empty host entry; expected host:slots,host:slots"));
    }
    HostSlots h;
    h.slots = default_slots;
    size_t colon = item.rfind(':');
    if (colon == absl::string_view::npos) {
      h.name = std::string(item);
    } else {
      h.name = std::string(item.substr(0, colon));
      absl::string_view slots = item.substr(colon + 1);
      if (!absl::SimpleAtoi(slots, &h.slots) || h.slots < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "-H '", text, "': bad slot count '", slots, "' for host '", h.name,
            "'; expected a positive integer (host:slots)"));
      }
    }
    if (h.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("-H '", text, "': empty host name in '", item, "'"));
    }
    hosts.push_back(std::move(h));
  }
  return hosts;
}

absl::StatusOr<LaunchOptions> ParseArgs(
    const std::vector<std::string>& args,
    const std::map<std::string, std::string>& env) {
  LaunchOptions o;
  if (absl::Status st = SetKnobsFromEnv(kKolorunKnobs, InMap(env), o.knobs);
      !st.ok()) {
    return st;
  }
  if (auto it = env.find("KOLO_FAULTS"); it != env.end()) {
    absl::StatusOr<std::vector<FaultSpec>> faults = ParseFaultList(it->second);
    if (!faults.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("KOLO_FAULTS: ", faults.status().message()));
    }
    o.faults = *std::move(faults);
  }
  if (auto it = env.find("KOLO_FAULT_SEED"); it != env.end()) {
    if (!absl::SimpleAtoi(it->second, &o.fault_seed)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "KOLO_FAULT_SEED: expected a non-negative integer, got '", it->second,
          "'"));
    }
  }
  CLI::App app("kolorun", "kolorun");
  const FlagTable table = Declare(app);
  const Rewritten cli = ForCli11(args, app);
  std::string parse_error;  // reported after the values read before it
  try {
    app.parse(std::vector<std::string>(cli.args.rbegin(), cli.args.rend()));
  } catch (const CLI::ArgumentMismatch& e) {
    parse_error = MismatchMessage(e.what(), args);
  } catch (const std::exception& e) {
    parse_error = e.what();
  }

  ParseState state;
  std::map<const CLI::Option*, size_t> used;  // results read, per option
  for (const CLI::Option* option : app.parse_order()) {
    const FlagInfo& flag = table.at(option);
    const std::vector<std::string>& results = option->results();
    const size_t count = ++used[option];  // results[count - 1] is this one
    // The cooldown range is read at HI, with the LO before it; a LO without
    // a HI has a parse_error.
    if (flag.flag == Flag::kCooldown && count % 2 == 1) continue;
    const size_t first = flag.flag == Flag::kCooldown ? count - 2 : count - 1;
    if (absl::Status st = Apply(
            flag, absl::MakeConstSpan(results).subspan(first, count - first), o,
            state);
        !st.ok()) {
      return st;
    }
  }
  if (!parse_error.empty()) return absl::InvalidArgumentError(parse_error);

  // What CLI11 did not read: the worker command (maybe after "--"), unless
  // it starts with a flag kolorun does not know.
  const std::vector<std::string> rest = app.remaining();
  size_t command_start = args.size();
  if (!rest.empty()) {
    const std::string& first = rest.front();
    if (first != "--" && absl::StartsWith(first, "-")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag '", first, "'"));
    }
    command_start =
        cli.origin[cli.args.size() - rest.size()] + (first == "--" ? 1 : 0);
  }
  const std::string& hosts_text = state.hosts_text;
  const bool np_given = state.np_given;
  const bool cooldown_given = state.cooldown_given;
  const bool interval_given = state.interval_given;
  o.command.assign(args.begin() + static_cast<std::ptrdiff_t>(command_start),
                   args.end());
  if (o.help || o.version) return o;
  o.np_given = np_given;
  const bool discovery = !o.discovery_script.empty();
  if (!np_given && !discovery) {
    return absl::InvalidArgumentError(
        "missing -np N (the number of workers to start)");
  }
  if (o.command.empty()) {
    return absl::InvalidArgumentError(
        "no command given: kolorun -np N [options] [--] command");
  }
  if (discovery && !hosts_text.empty()) {
    return absl::InvalidArgumentError(
        "-H and --host-discovery-script are exclusive: the script lists the "
        "hosts");
  }
  if (interval_given && !discovery) {
    return absl::InvalidArgumentError(
        "--discovery-interval-seconds needs --host-discovery-script");
  }
  if ((o.max_np > 0 || discovery) && o.min_np == 0) o.min_np = 1;
  if (!o.elastic()) {
    for (const auto& [given, flag] :
         {std::pair<bool, const char*>{o.graceful_term, "--graceful-term"},
          {cooldown_given, "--blacklist-cooldown-range"}}) {
      if (given) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag,
            " applies to elastic jobs only: add --min-np N (or --max-np, or "
            "--host-discovery-script)"));
      }
    }
  }
  if (o.elastic()) {
    if (o.max_np > 0 && o.max_np < o.min_np) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--max-np ", o.max_np, " is less than --min-np ", o.min_np));
    }
    if (np_given && o.min_np > o.np) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--min-np ", o.min_np, " is more than -np ", o.np,
          ": the job starts with -np workers and goes on while at least "
          "--min-np remain"));
    }
    if (np_given && o.max_np > 0 && o.max_np < o.np) {
      return absl::InvalidArgumentError(
          absl::StrCat("--max-np ", o.max_np, " is less than -np ", o.np));
    }
  }
  for (const FaultSpec& f : o.faults) {
    if (f.kind == FaultKind::kPartition && o.launcher_cmd.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--fault ", FaultSpecText(f),
          ": a partition cuts a network namespace's link; start the workers "
          "in namespaces with --launcher-cmd 'ip netns exec {host}'"));
    }
  }
  if (!o.fault_report.empty() && o.faults.empty()) {
    return absl::InvalidArgumentError(
        "--fault-report needs faults (--fault SPEC or KOLO_FAULTS)");
  }
  if (discovery) {
    // The hosts come from the script, when the job starts.
  } else if (hosts_text.empty()) {
    o.hosts = {HostSlots{"localhost", o.np}};
  } else {
    auto hosts = ParseHosts(hosts_text, o.slots_per_host);
    if (!hosts.ok()) return hosts.status();
    o.hosts = *std::move(hosts);
    // 64 bits: slot counts up to INT_MAX each, summed over the hosts
    // (found by fuzz/kolorun_args_fuzz.cc: the int sum overflowed).
    int64_t total = 0;
    for (const HostSlots& h : o.hosts) total += h.slots;
    if (o.np > total) {
      return absl::InvalidArgumentError(absl::StrCat(
          "-np ", o.np, " is more than the ", total, " slots of -H '",
          hosts_text, "'; add hosts or slots (host:slots), or lower -np"));
    }
  }
  return o;
}

bool IsLocalHostName(absl::string_view host,
                     absl::string_view kernel_hostname) {
  return host == "localhost" || host == "127.0.0.1" ||
         (!kernel_hostname.empty() && host == kernel_hostname);
}

SpawnMode ModeFor(const LaunchOptions& options, absl::string_view host,
                  absl::string_view kernel_hostname) {
  if (!options.launcher_cmd.empty()) return SpawnMode::kTemplate;
  if (IsLocalHostName(host, kernel_hostname)) return SpawnMode::kLocal;
  return SpawnMode::kSsh;
}

std::vector<WorkerPlan> PlanWorkers(const LaunchOptions& options,
                                    absl::string_view kernel_hostname) {
  std::vector<WorkerPlan> plan;
  std::map<std::string, int> per_host;
  for (const HostSlots& h : options.hosts) {
    for (int s = 0; s < h.slots && static_cast<int>(plan.size()) < options.np;
         ++s) {
      WorkerPlan w;
      w.rank = static_cast<int>(plan.size());
      w.worker_id = absl::StrCat("w", w.rank);
      w.host = h.name;
      w.local_rank = per_host[h.name]++;
      w.mode = ModeFor(options, h.name, kernel_hostname);
      plan.push_back(std::move(w));
    }
  }
  std::map<int, int> per_local_rank;
  for (WorkerPlan& w : plan) {
    w.local_size = per_host[w.host];
    w.cross_rank = per_local_rank[w.local_rank]++;
  }
  for (WorkerPlan& w : plan) w.cross_size = per_local_rank[w.local_rank];
  return plan;
}

bool AllLocal(const std::vector<WorkerPlan>& plan) {
  for (const WorkerPlan& w : plan) {
    if (w.mode != SpawnMode::kLocal) return false;
  }
  return true;
}

}  // namespace kolo::launcher
