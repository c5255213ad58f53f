// kolorun's command line: ParseArgs (CLI11 reads the flags, Apply checks
// each value in order), the host list and the worker plan. See
// launcher/args.h; horovodrun's flags are launcher/horovod_flags.h's table,
// declared here beside kolorun's own.
//
// Thread-safety: every function is thread-safe (no global state).
#include "launcher/args.h"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <sstream>
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
#include "launcher/config_file.h"
#include "launcher/horovod_flags.h"
#include "launcher/horovod_variables.h"
#include "launcher/hostfile.h"

namespace kolo::launcher {
namespace {

// The knobs of common/knobs.h that kolorun reads from its flags and, before
// them, from its environment.
constexpr const Knob* kKolorunKnobArray[] = {
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
// Some of kolorun's spellings CLI11 cannot read; they are rewritten before
// it parses (ForCli11):
//   -np N            --single-dash-np N. CLI11 has no single-dash long names
//                    (it would read -n with the value "p"); the name is
//                    internal, kept apart from --np so that errors name the
//                    flag as it was typed. horovodrun's -cb, -hostfile and
//                    -prefix-timestamp are rewritten the same way.
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
  kMetricsPort,
  kMetricsAddress,
  kEvents,
  kTls,
  kTlsFile,  // --tls-cert, --tls-key, --tls-ca
  kHorovod,  // a kMapped, kNotice or kRefused flag of horovod_flags.h
};

// A declared flag: what it sets, and its name in errors.
struct FlagInfo {
  Flag flag;
  std::string name;
  const Knob* knob = nullptr;            // kKnob
  const HorovodFlag* horovod = nullptr;  // kHorovod
};
using FlagTable = std::map<const CLI::Option*, FlagInfo>;

// The name CLI11 knows a spelling by: itself, or --single-dash-NAME for a
// single-dash long one (-np, -cb, ...).
std::string CliName(absl::string_view spelling) {
  if (absl::StartsWith(spelling, "--") || spelling.size() <= 2) {
    return std::string(spelling);
  }
  return absl::StrCat("--single-dash-", spelling.substr(1));
}

// horovodrun's spellings kolorun does not declare itself: an alias gets its
// target's FlagInfo under its own name; the others are Flag::kHorovod.
void DeclareHorovodFlags(CLI::App& app, FlagTable& table) {
  std::map<std::string, FlagInfo> by_name;
  for (const auto& [option, info] : table) by_name.emplace(info.name, info);
  for (const HorovodFlag& flag : HorovodFlags()) {
    for (const char* spelling : flag.spellings) {
      if (spelling == nullptr) break;
      const std::string name = CliName(spelling);
      if (app.get_option_no_throw(name) != nullptr) continue;  // kolorun's
      FlagInfo info{Flag::kHorovod, spelling, nullptr, &flag};
      if (flag.action == HorovodFlagAction::kAlias ||
          flag.action == HorovodFlagAction::kSame) {
        info = by_name.at(flag.target);
        info.name = spelling;
      }
      CLI::Option* option = flag.takes_value
                                ? app.add_option(name)
                                : app.add_flag(name)->disable_flag_override();
      table[option] = std::move(info);
    }
  }
}

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
        {"--graceful-term", Flag::kGracefulTerm, "--graceful-term"},
        {"--tls", Flag::kTls, "--tls"}}) {
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
        {"--fault-report", Flag::kFaultReport, "--fault-report"},
        {"--metrics-port", Flag::kMetricsPort, "--metrics-port"},
        {"--metrics-address", Flag::kMetricsAddress, "--metrics-address"},
        {"--events", Flag::kEvents, "--events"},
        {"--tls-cert", Flag::kTlsFile, "--tls-cert"},
        {"--tls-key", Flag::kTlsFile, "--tls-key"},
        {"--tls-ca", Flag::kTlsFile, "--tls-ca"}}) {
    table[app.add_option(names)] = {flag, name};
  }
  // LO HI: two values, taken whatever they look like (as -np's one).
  table[app.add_option(kCooldownFlag)->type_size(2)] = {Flag::kCooldown,
                                                        kCooldownFlag};
  for (const Knob* knob : kKolorunKnobArray) {
    table[app.add_option(knob->flag)] = {Flag::kKnob, knob->flag, knob};
  }
  DeclareHorovodFlags(app, table);
  return table;
}

// The arguments as CLI11 reads them, and for each the index of the argument
// it came from.
struct Rewritten {
  std::vector<std::string> args;
  std::vector<size_t> origin;
};

// -np and horovodrun's other single-dash long spellings.
bool IsSingleDashLong(absl::string_view arg) {
  if (arg == "-np") return true;
  for (const HorovodFlag& flag : HorovodFlags()) {
    for (const char* spelling : flag.spellings) {
      if (spelling != nullptr && arg == spelling &&
          !absl::StartsWith(arg, "--") && arg.size() > 2) {
        return true;
      }
    }
  }
  return false;
}

Rewritten ForCli11(const std::vector<std::string>& args, CLI::App& app) {
  Rewritten out;
  auto add = [&out](std::string arg, size_t from) {
    out.args.push_back(std::move(arg));
    out.origin.push_back(from);
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const size_t eq = arg.find('=');
    if (IsSingleDashLong(arg)) {
      add(CliName(arg), i);
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
  const std::map<std::string, std::string>* env = nullptr;
  std::string hosts_text;
  bool np_given = false;
  bool cooldown_given = false;
  bool interval_given = false;
  HorovodFlagState horovod;
};

// A horovodrun flag of Flag::kHorovod, given as `name`.
absl::Status ApplyHorovod(const HorovodFlag& flag, const std::string& name,
                          const std::string& value, LaunchOptions& o,
                          ParseState& state) {
  switch (flag.action) {
    case HorovodFlagAction::kNotice:
      AddNotice(o, absl::StrCat(name, ": ", flag.text));
      return absl::OkStatus();
    case HorovodFlagAction::kRefused:
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", flag.text));
    case HorovodFlagAction::kMapped:
      return ApplyHorovodFlag(flag, name, value, *state.env, o, state.horovod);
    case HorovodFlagAction::kSame:
    case HorovodFlagAction::kAlias:
      break;
  }
  return absl::InternalError(absl::StrCat(name, ": declared as kolorun's"));
}

// The elastic and host-discovery flags (see Apply).
absl::Status ApplyElastic(const FlagInfo& flag,
                          absl::Span<const std::string> values,
                          LaunchOptions& o, ParseState& state) {
  const std::string& name = flag.name;
  const std::string& value = values.back();
  switch (flag.flag) {
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
    default:
      return absl::InternalError(absl::StrCat(name, ": not an elastic flag"));
  }
  return absl::OkStatus();
}

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
    case Flag::kTls:
      o.tls = true;
      break;
    case Flag::kTlsFile:
      if (value.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(name, ": empty path"));
      }
      (name == "--tls-cert"  ? o.tls_files.cert
       : name == "--tls-key" ? o.tls_files.key
                             : o.tls_files.ca) = value;
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
    case Flag::kMaxNp:
    case Flag::kResetLimit:
    case Flag::kDiscoveryScript:
    case Flag::kDiscoveryInterval:
    case Flag::kSlotsPerHost:
    case Flag::kCooldown:
      return ApplyElastic(flag, values, o, state);
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
    case Flag::kMetricsPort:
      if (!absl::SimpleAtoi(value, &o.metrics_port) || o.metrics_port < 0 ||
          o.metrics_port > 65535) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--metrics-port: expected a port 0..65535, got '", value, "'"));
      }
      break;
    case Flag::kMetricsAddress:
      if (value.empty()) {
        return absl::InvalidArgumentError("--metrics-address: empty address");
      }
      o.metrics_address = value;
      break;
    case Flag::kEvents:
      if (value.empty()) {
        return absl::InvalidArgumentError("--events: empty path");
      }
      o.events = value;
      break;
    case Flag::kCoordinatorAddr:
      if (value.empty()) {
        return absl::InvalidArgumentError("--coordinator-addr: empty address");
      }
      o.coordinator_addr = value;
      break;
    case Flag::kHorovod:
      return ApplyHorovod(*flag.horovod, name,
                          flag.horovod->takes_value ? value : std::string(), o,
                          state);
  }
  return absl::OkStatus();
}

// What kolorun reads from its environment before any flag.
absl::Status ReadEnvironment(const std::map<std::string, std::string>& env,
                             LaunchOptions& o, ParseState& state) {
  if (absl::Status st = SetKnobsFromEnv(kKolorunKnobArray, InMap(env), o.knobs);
      !st.ok()) {
    return st;
  }
  if (absl::Status st = AutotuneFromEnv(InMap(env), o.autotune); !st.ok()) {
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
  // Horovod's HOROVOD_STALL_CHECK_DISABLE=1 is --no-stall-check, below any
  // flag or config file key.
  if (auto it = env.find("HOROVOD_STALL_CHECK_DISABLE"); it != env.end()) {
    const std::string v = absl::AsciiStrToLower(it->second);
    if (v == "1" || v == "true" || v == "yes" || v == "on") {
      state.horovod.stall_check_off = true;
    }
  }
  o.notices = HorovodVariableNotices(env);
  return absl::OkStatus();
}

// The keys of --config-file's file, applied as the flags they stand for
// (before the command line's, which therefore win).
absl::Status ApplyConfigFile(const CLI::App& app, const FlagTable& table,
                             const ReadFileFn& read_file, LaunchOptions& o,
                             ParseState& state) {
  const CLI::Option* option = app.get_option_no_throw("--config-file");
  if (option == nullptr || option->results().empty()) return absl::OkStatus();
  const std::string& path = option->results().back();
  if (path.empty())
    return absl::InvalidArgumentError("--config-file: empty path");
  absl::StatusOr<std::string> text = read_file(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config file ", path, ": ", text.status().message()));
  }
  absl::StatusOr<std::vector<ConfigEntry>> entries =
      ParseConfigFile(path, *text);
  if (!entries.ok()) return entries.status();
  for (const ConfigEntry& e : *entries) {
    FlagInfo flag = table.at(app.get_option_no_throw(CliName(e.flag)));
    flag.name = absl::StrCat("config file ", path, ": ", e.key);
    if (absl::Status st =
            Apply(flag, absl::MakeConstSpan(&e.value, 1), o, state);
        !st.ok()) {
      if (absl::StartsWith(st.message(), flag.name)) return st;
      return absl::InvalidArgumentError(
          absl::StrCat(flag.name, ": ", st.message()));
    }
  }
  return absl::OkStatus();
}

// Applies every flag CLI11 read, in the order given.
absl::Status ApplyFlags(const CLI::App& app, const FlagTable& table,
                        LaunchOptions& o, ParseState& state) {
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
  return absl::OkStatus();
}

// The checks of flags that go together (or not).
absl::Status CheckCombinations(const ParseState& state, LaunchOptions& o) {
  const bool discovery = !o.discovery_script.empty();
  if (!state.np_given && !discovery) {
    return absl::InvalidArgumentError(
        "missing -np N (the number of workers to start)");
  }
  if (o.command.empty()) {
    return absl::InvalidArgumentError(
        "no command given: kolorun -np N [options] [--] command");
  }
  if (discovery && !state.hosts_text.empty()) {
    return absl::InvalidArgumentError(
        "-H and --host-discovery-script are exclusive: the script lists the "
        "hosts");
  }
  if (!o.hostfile.empty() && (discovery || !state.hosts_text.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--hostfile and ", discovery ? "--host-discovery-script" : "-H",
        " are exclusive: give the hosts one way"));
  }
  if (state.interval_given && !discovery) {
    return absl::InvalidArgumentError(
        "--discovery-interval-seconds needs --host-discovery-script");
  }
  if ((o.max_np > 0 || discovery) && o.min_np == 0) o.min_np = 1;
  if (!o.elastic()) {
    for (const auto& [given, flag] :
         {std::pair<bool, const char*>{o.graceful_term, "--graceful-term"},
          {state.cooldown_given, "--blacklist-cooldown-range"}}) {
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
    if (state.np_given && o.min_np > o.np) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--min-np ", o.min_np, " is more than -np ", o.np,
          ": the job starts with -np workers and goes on while at least "
          "--min-np remain"));
    }
    if (state.np_given && o.max_np > 0 && o.max_np < o.np) {
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
    const bool restarts =
        (f.kind == FaultKind::kKillCoordinator &&
         f.duration != absl::InfiniteDuration()) ||
        (f.kind == FaultKind::kRandom &&
         std::find(f.kinds.begin(), f.kinds.end(),
                   FaultKind::kKillCoordinator) != f.kinds.end());
    if (restarts && !o.elastic()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--fault ", FaultSpecText(f),
          ": a coordinator started again picks up an elastic job only (a "
          "fixed job ends when its coordinator is lost); add --min-np N, or "
          "give kill-coordinator without for="));
    }
  }
  if (!o.fault_report.empty() && o.faults.empty()) {
    return absl::InvalidArgumentError(
        "--fault-report needs faults (--fault SPEC or KOLO_FAULTS)");
  }
  return absl::OkStatus();
}

// o.hosts from -H, --hostfile or the default (none with a discovery script).
absl::Status PlaceHosts(const ParseState& state, const ReadFileFn& read_file,
                        LaunchOptions& o) {
  if (!o.discovery_script.empty()) return absl::OkStatus();  // at start
  std::string source;  // for the message below
  if (!o.hostfile.empty()) {
    auto hosts = ReadHostfile(o.hostfile, read_file, o.slots_per_host);
    if (!hosts.ok()) return hosts.status();
    o.hosts = *std::move(hosts);
    source = absl::StrCat("hostfile ", o.hostfile);
  } else if (state.hosts_text.empty()) {
    o.hosts = {HostSlots{"localhost", o.np}};
    return absl::OkStatus();
  } else {
    auto hosts = ParseHosts(state.hosts_text, o.slots_per_host);
    if (!hosts.ok()) return hosts.status();
    o.hosts = *std::move(hosts);
    source = absl::StrCat("-H '", state.hosts_text, "'");
  }
  // 64 bits: slot counts up to INT_MAX each, summed over the hosts
  // (found by fuzz/kolorun_args_fuzz.cc: the int sum overflowed).
  int64_t total = 0;
  for (const HostSlots& h : o.hosts) total += h.slots;
  if (o.np > total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "-np ", o.np, " is more than the ", total, " slots of ", source,
        "; add hosts or slots (host:slots), or lower -np"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Span<const Knob* const> KolorunKnobs() { return kKolorunKnobArray; }

absl::StatusOr<std::string> ReadFileFromDisk(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read it: ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(
        absl::StrCat("cannot read it: ", std::strerror(errno)));
  }
  return text.str();
}

absl::StatusOr<LaunchOptions> ParseArgs(
    const std::vector<std::string>& args,
    const std::map<std::string, std::string>& env) {
  return ParseArgs(args, env, ReadFileFromDisk);
}

absl::StatusOr<LaunchOptions> ParseArgs(
    const std::vector<std::string>& args,
    const std::map<std::string, std::string>& env,
    const ReadFileFn& read_file) {
  LaunchOptions o;
  ParseState state;
  state.env = &env;
  if (absl::Status st = ReadEnvironment(env, o, state); !st.ok()) return st;
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
  if (parse_error.empty()) {
    if (absl::Status st = ApplyConfigFile(app, table, read_file, o, state);
        !st.ok()) {
      return st;
    }
  }
  if (absl::Status st = ApplyFlags(app, table, o, state); !st.ok()) return st;
  if (!parse_error.empty()) return absl::InvalidArgumentError(parse_error);
  FinishHorovodFlags(state.horovod, o.log_level_given, o);

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
  o.command.assign(args.begin() + static_cast<std::ptrdiff_t>(command_start),
                   args.end());
  if (o.help || o.version || o.check_build) return o;
  o.np_given = state.np_given;
  if (absl::Status st = CheckCombinations(state, o); !st.ok()) return st;
  if (absl::Status st = PlaceHosts(state, read_file, o); !st.ok()) return st;
  return o;
}

}  // namespace kolo::launcher
