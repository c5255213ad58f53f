#include "launcher/args.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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
                               --elastic-timeout, then ends.
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
  std::string hosts_text;
  bool np_given = false;
  bool cooldown_given = false;
  bool interval_given = false;
  size_t i = 0;
  while (i < args.size()) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;  // the command starts here
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      ++i;
      continue;
    }
    if (arg == "--version") {
      o.version = true;
      ++i;
      continue;
    }
    // Flags with a value: "--flag value" or "--flag=value".
    std::string name = arg;
    std::string value;
    bool inline_value = false;
    if (size_t eq = arg.find('=');
        absl::StartsWith(arg, "--") && eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inline_value = true;
    }
    if (arg == "--graceful-term") {
      o.graceful_term = true;
      ++i;
      continue;
    }
    if (name == "--blacklist-cooldown-range") {
      // Two values: "--blacklist-cooldown-range LO HI" (Horovod's form) or
      // "--blacklist-cooldown-range=LO,HI".
      std::string lo_text, hi_text;
      if (inline_value) {
        std::pair<std::string, std::string> parts =
            absl::StrSplit(value, absl::MaxSplits(',', 1));
        lo_text = parts.first, hi_text = parts.second;
        ++i;
      } else {
        if (i + 2 >= args.size()) {
          return absl::InvalidArgumentError(
              "flag '--blacklist-cooldown-range' needs two values: LO HI "
              "(seconds)");
        }
        lo_text = args[i + 1], hi_text = args[i + 2];
        i += 3;
      }
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
      cooldown_given = true;
      continue;
    }
    static const char* const kValueFlags[] = {"-np",
                                              "--np",
                                              "--num-proc",
                                              "-H",
                                              "--hosts",
                                              "--ssh-cmd",
                                              "--launcher-cmd",
                                              "--coordinator-addr",
                                              "--min-np",
                                              "--max-np",
                                              "--reset-limit",
                                              "--host-discovery-script",
                                              "--discovery-interval-seconds",
                                              "--slots-per-host",
                                              "--slots"};
    const Knob* knob = FindKnobByFlag(kKolorunKnobs, name);
    bool known = knob != nullptr;
    for (const char* f : kValueFlags) known = known || name == f;
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag '", arg, "'"));
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag '", name, "' needs a value"));
      }
      value = args[i + 1];
      i += 2;
    } else {
      ++i;
    }
    if (knob != nullptr) {
      if (absl::Status st = SetKnobFromFlag(*knob, value, o.knobs); !st.ok()) {
        return st;
      }
      if (knob->id == KnobId::kLogLevel) o.log_level_given = true;
    } else if (name == "-np" || name == "--np" || name == "--num-proc") {
      if (!absl::SimpleAtoi(value, &o.np) || o.np < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": expected a positive number of workers, got '",
                         value, "'"));
      }
      np_given = true;
    } else if (name == "-H" || name == "--hosts") {
      hosts_text = value;
    } else if (name == "--ssh-cmd") {
      if (absl::StripAsciiWhitespace(value).empty()) {
        return absl::InvalidArgumentError("--ssh-cmd: empty command");
      }
      o.ssh_cmd = value;
      o.ssh_cmd_given = true;
    } else if (name == "--launcher-cmd") {
      if (absl::StripAsciiWhitespace(value).empty()) {
        return absl::InvalidArgumentError("--launcher-cmd: empty template");
      }
      o.launcher_cmd = value;
    } else if (name == "--min-np" || name == "--max-np") {
      int n = 0;
      if (!absl::SimpleAtoi(value, &n) || n < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": expected a positive number of workers, got '",
                         value, "'"));
      }
      (name == "--min-np" ? o.min_np : o.max_np) = n;
    } else if (name == "--reset-limit") {
      if (!absl::SimpleAtoi(value, &o.reset_limit) || o.reset_limit < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--reset-limit: expected a number of membership changes (0 or "
            "more), got '",
            value, "'"));
      }
    } else if (name == "--host-discovery-script") {
      if (absl::StripAsciiWhitespace(value).empty()) {
        return absl::InvalidArgumentError(
            "--host-discovery-script: empty command");
      }
      o.discovery_script = value;
    } else if (name == "--discovery-interval-seconds") {
      double seconds = 0;
      if (!absl::SimpleAtod(value, &seconds) || !(seconds > 0) ||
          seconds > 86400) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--discovery-interval-seconds: expected seconds above 0 (at most "
            "a day; fractions allowed), got '",
            value, "'"));
      }
      o.discovery_interval = absl::Seconds(seconds);
      interval_given = true;
    } else if (name == "--slots-per-host" || name == "--slots") {
      if (!absl::SimpleAtoi(value, &o.slots_per_host) || o.slots_per_host < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ": expected a positive number of slots, got '", value, "'"));
      }
    } else if (name == "--coordinator-addr") {
      if (value.empty())
        return absl::InvalidArgumentError("--coordinator-addr: empty address");
      o.coordinator_addr = value;
    }
  }
  o.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
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
  for (WorkerPlan& w : plan) w.local_size = per_host[w.host];
  return plan;
}

bool AllLocal(const std::vector<WorkerPlan>& plan) {
  for (const WorkerPlan& w : plan) {
    if (w.mode != SpawnMode::kLocal) return false;
  }
  return true;
}

}  // namespace kolo::launcher
