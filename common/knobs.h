// The knobs that more than one part of kolo reads — kolorun, kolo-coordinator
// and the worker library (worker_lib/config.h) — declared once: each one's
// flag, environment variable, Horovod alias, unit, default, allowed range and
// meaning, in kKnobTable below. The parsers of the three programs find their
// knobs here, parse them with the helpers here, and so accept the same values
// and refuse bad ones with the same messages:
//   a variable  bad value KOLO_CYCLE_TIME_MS='0': expected a positive number
//               of milliseconds up to 60000
//   a flag      --cycle-time-ms: expected a positive number of milliseconds
//               up to 60000, got '0'
// A KOLO_* variable wins over its alias, a flag over both; an empty value
// counts as unset. Knobs only one program reads (KOLO_LEASE_SECONDS, the
// fusion and data-plane tuning of the worker, kolorun's -H) stay with it.
// Every variable, shared or not, has its row in common/variables.h, which
// takes the shared knobs' aliases and defaults from this table.
//
// Thread-safety: the table is immutable and the functions are pure, except
// GetProcessEnv, which reads the process environment (not safe against a
// concurrent setenv elsewhere in the process).
#ifndef KOLO_COMMON_KNOBS_H_
#define KOLO_COMMON_KNOBS_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace kolo {

// Which knob; the index of its row in kKnobTable.
enum class KnobId {
  kStartTimeout,
  kHeartbeatInterval,
  kHeartbeatTimeout,
  kCycleTime,
  kStallCheck,
  kStallShutdown,
  kDataTimeout,
  kLogLevel,
  kElasticTimeout,
};

enum class KnobType {
  kDuration,  // a length of time, written as a number of units
  kLogLevel,  // a log level name (common/log.h)
};

// A unit a duration is written in.
struct KnobUnit {
  absl::Duration size;
  const char* name;  // plural, as messages use it: "seconds"
};
inline constexpr KnobUnit kKnobMilliseconds = {absl::Milliseconds(1),
                                               "milliseconds"};
inline constexpr KnobUnit kKnobSeconds = {absl::Seconds(1), "seconds"};

// One row of the table.
struct Knob {
  KnobId id;
  KnobType type;
  const char* flag;      // kolorun's / kolo-coordinator's flag, or nullptr
  const char* variable;  // the KOLO_* variable, or nullptr
  const char* alias;     // Horovod's variable of the same meaning, or nullptr
  // kDuration: the unit of the variable's value and of the flag's (they
  // differ only for the heartbeat interval).
  KnobUnit unit;
  KnobUnit flag_unit;
  bool whole_units;    // the variable takes whole units only (an integer)
  bool zero_allowed;   // 0 is allowed, and turns the knob off
  absl::Duration max;  // the largest value allowed
  absl::Duration default_duration;
  const char* default_level;  // kLogLevel: the default level
  const char* description;    // what it does, in one line
};

// The table, in KnobId order. Why each default:
// - start timeout 30 s: covers slow container starts and imports; beyond it a
//   missing worker is a mistake worth reporting.
// - heartbeat interval 500 ms: cheap, and finds a silent worker within
//   seconds. (The worker's lease, KOLO_LEASE_SECONDS, must exceed it.)
// - heartbeat timeout 2.5 s = 5 missed heartbeats: a silent loss (SIGSTOP,
//   host gone, partition) is found within 3 s (the coordinator checks every
//   half interval), as the elastic issue asks; heartbeats come from a
//   thread of their own on both sides, so a long collective never looks
//   like death. Shorter than the worker's lease (10 s) so that the
//   coordinator judges first.
// - cycle time 1 ms, as Horovod: long enough to fuse a backward pass's burst
//   of gradients, short next to a step. (A worker also holds a submission
//   this long at most, to announce it with later ones while its caller waits
//   for nothing: worker_lib/runtime/op_runtime.h.)
// - stall check 60 s, as Horovod: longer than any sane step, so a warning
//   (repeated while the stall lasts) means a rank took another path through
//   the model.
// - stall shutdown never (0), as Horovod: a stall may be a slow rank, and only
//   the user knows how slow is too slow.
// - data-plane timeout 30 s: an inactivity deadline, not a bound on large
//   transfers; longer than the heartbeat timeout, so that the coordinator,
//   not a neighbour in the ring, says who failed (docs/design.md "Elastic").
// - log level warn: a healthy job prints nothing from kolo.
// - elastic timeout 600 s, as Horovod's: time for a replacement machine to
//   boot and join.
inline constexpr Knob kKnobTable[] = {
    {.id = KnobId::kStartTimeout,
     .type = KnobType::kDuration,
     .flag = "--start-timeout",
     .variable = "KOLO_START_TIMEOUT",
     .alias = "HOROVOD_START_TIMEOUT",
     .unit = kKnobSeconds,
     .flag_unit = kKnobSeconds,
     .whole_units = false,
     .zero_allowed = false,
     .max = absl::Seconds(10000000),
     .default_duration = absl::Seconds(30),
     .default_level = nullptr,
     .description = "how long the workers have to form the job (init()'s "
                    "deadline; kolorun's, once a worker has arrived)"},
    {.id = KnobId::kHeartbeatInterval,
     .type = KnobType::kDuration,
     .flag = "--heartbeat-interval-seconds",
     .variable = "KOLO_HEARTBEAT_INTERVAL_MS",
     .alias = nullptr,
     .unit = kKnobMilliseconds,
     .flag_unit = kKnobSeconds,
     .whole_units = true,
     .zero_allowed = false,
     .max = absl::Seconds(600),
     .default_duration = absl::Milliseconds(500),
     .default_level = nullptr,
     .description = "how often a worker and the coordinator tell each other "
                    "they are alive"},
    {.id = KnobId::kHeartbeatTimeout,
     .type = KnobType::kDuration,
     .flag = "--heartbeat-timeout-seconds",
     .variable = "KOLO_HEARTBEAT_TIMEOUT_SECONDS",
     .alias = nullptr,
     .unit = kKnobSeconds,
     .flag_unit = kKnobSeconds,
     .whole_units = false,
     .zero_allowed = false,
     .max = absl::Seconds(10000000),
     .default_duration = absl::Milliseconds(2500),
     .default_level = nullptr,
     .description = "a worker silent this long has failed (the coordinator "
                    "decides)"},
    {.id = KnobId::kCycleTime,
     .type = KnobType::kDuration,
     .flag = "--cycle-time-ms",
     .variable = "KOLO_CYCLE_TIME_MS",
     .alias = "HOROVOD_CYCLE_TIME",
     .unit = kKnobMilliseconds,
     .flag_unit = kKnobMilliseconds,
     .whole_units = false,
     .zero_allowed = false,
     .max = absl::Milliseconds(60000),
     .default_duration = absl::Milliseconds(1),
     .default_level = nullptr,
     .description = "the longest a ready tensor waits for others to batch "
                    "with while the data plane is busy"},
    {.id = KnobId::kStallCheck,
     .type = KnobType::kDuration,
     .flag = "--stall-check-time-seconds",
     .variable = "KOLO_STALL_CHECK_TIME_SECONDS",
     .alias = "HOROVOD_STALL_CHECK_TIME_SECONDS",
     .unit = kKnobSeconds,
     .flag_unit = kKnobSeconds,
     .whole_units = false,
     .zero_allowed = true,
     .max = absl::Seconds(10000000),
     .default_duration = absl::Seconds(60),
     .default_level = nullptr,
     .description = "warn, naming the missing ranks, about a tensor some "
                    "ranks submitted and others not for this long; 0 = never"},
    {.id = KnobId::kStallShutdown,
     .type = KnobType::kDuration,
     .flag = "--stall-shutdown-time-seconds",
     .variable = "KOLO_STALL_SHUTDOWN_TIME_SECONDS",
     .alias = "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
     .unit = kKnobSeconds,
     .flag_unit = kKnobSeconds,
     .whole_units = false,
     .zero_allowed = true,
     .max = absl::Seconds(10000000),
     .default_duration = absl::ZeroDuration(),
     .default_level = nullptr,
     .description = "a stall this long fails every pending op and ends the "
                    "job; 0 = never"},
    {.id = KnobId::kDataTimeout,
     .type = KnobType::kDuration,
     .flag = nullptr,
     .variable = "KOLO_TIMEOUT_SECONDS",
     .alias = "HOROVOD_GLOO_TIMEOUT_SECONDS",
     .unit = kKnobSeconds,
     .flag_unit = kKnobSeconds,
     .whole_units = false,
     .zero_allowed = false,
     .max = absl::Seconds(10000000),
     .default_duration = absl::Seconds(30),
     .default_level = nullptr,
     .description = "a data-plane wait fails after this long without any "
                    "byte moving"},
    {.id = KnobId::kLogLevel,
     .type = KnobType::kLogLevel,
     .flag = "--log-level",
     .variable = "KOLO_LOG_LEVEL",
     .alias = "HOROVOD_LOG_LEVEL",
     .unit = kKnobSeconds,
     .flag_unit = kKnobSeconds,
     .whole_units = false,
     .zero_allowed = false,
     .max = absl::ZeroDuration(),
     .default_duration = absl::ZeroDuration(),
     .default_level = "warn",
     .description = "how much kolo logs: trace, debug, info, warn, error, "
                    "critical or off"},
    {.id = KnobId::kElasticTimeout,
     .type = KnobType::kDuration,
     .flag = "--elastic-timeout",
     .variable = "KOLO_ELASTIC_TIMEOUT",
     .alias = "HOROVOD_ELASTIC_TIMEOUT",
     .unit = kKnobSeconds,
     .flag_unit = kKnobSeconds,
     .whole_units = false,
     .zero_allowed = false,
     .max = absl::Seconds(10000000),
     .default_duration = absl::Seconds(600),
     .default_level = nullptr,
     .description = "how long an elastic job with fewer workers than its "
                    "minimum waits for workers before it ends"},
};

constexpr const Knob& GetKnob(KnobId id) {
  return kKnobTable[static_cast<size_t>(id)];
}

// The rows by name.
namespace knobs {
inline constexpr const Knob& kStartTimeout = GetKnob(KnobId::kStartTimeout);
inline constexpr const Knob& kHeartbeatInterval =
    GetKnob(KnobId::kHeartbeatInterval);
inline constexpr const Knob& kHeartbeatTimeout =
    GetKnob(KnobId::kHeartbeatTimeout);
inline constexpr const Knob& kCycleTime = GetKnob(KnobId::kCycleTime);
inline constexpr const Knob& kStallCheck = GetKnob(KnobId::kStallCheck);
inline constexpr const Knob& kStallShutdown = GetKnob(KnobId::kStallShutdown);
inline constexpr const Knob& kDataTimeout = GetKnob(KnobId::kDataTimeout);
inline constexpr const Knob& kLogLevel = GetKnob(KnobId::kLogLevel);
inline constexpr const Knob& kElasticTimeout = GetKnob(KnobId::kElasticTimeout);
}  // namespace knobs

// The knobs' values, each at its table default until something sets it.
struct KnobValues {
  absl::Duration start_timeout = knobs::kStartTimeout.default_duration;
  absl::Duration heartbeat_interval =
      knobs::kHeartbeatInterval.default_duration;
  absl::Duration heartbeat_timeout = knobs::kHeartbeatTimeout.default_duration;
  absl::Duration cycle_time = knobs::kCycleTime.default_duration;
  absl::Duration stall_check = knobs::kStallCheck.default_duration;
  absl::Duration stall_shutdown = knobs::kStallShutdown.default_duration;
  absl::Duration data_timeout = knobs::kDataTimeout.default_duration;
  // Lower case, as given ("warning" and "fatal" stay so; SetLogLevel takes
  // them).
  std::string log_level = knobs::kLogLevel.default_level;
  absl::Duration elastic_timeout = knobs::kElasticTimeout.default_duration;
};

// The field of `values` that holds `knob`. REQUIRES: knob.type == kDuration.
absl::Duration& DurationOf(const Knob& knob, KnobValues& values);

// How a value was given: in the knob's variable (or its alias) or its flag.
enum class KnobSpelling { kVariable, kFlag };

// Reads one environment variable: nullopt when it is unset.
using EnvLookup =
    absl::FunctionRef<std::optional<std::string>(const char* name)>;

// getenv as an EnvLookup.
std::optional<std::string> GetProcessEnv(const char* name);

// An EnvLookup over a std::map or absl::flat_hash_map of std::string to
// std::string; `env` must outlive the call it is passed to.
template <typename Map>
auto InMap(const Map& env) {
  return [&env](const char* name) -> std::optional<std::string> {
    auto it = env.find(std::string(name));
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

// Where an environment sets a knob.
struct KnobVariable {
  const char* name;  // the KOLO_* variable or the alias
  std::string value;
};

// The variable that sets `knob` in `env`: its KOLO_* variable if set, else its
// alias if set (an empty value counts as unset), else nullopt.
std::optional<KnobVariable> FindKnobVariable(const Knob& knob, EnvLookup env);

// Sets `knob` in `values` from `text`, the value of its variable `variable`
// (the KOLO_* name or the alias, named in the error). A bad value is
// kInvalidArgument "bad value VARIABLE='text': expected <KnobAllowed>".
absl::Status SetKnobFromVariable(const Knob& knob, absl::string_view variable,
                                 absl::string_view text, KnobValues& values);

// Sets `knob` in `values` from `text`, the value of its flag. A bad value is
// kInvalidArgument "--flag: expected <KnobAllowed>, got 'text'".
// REQUIRES: knob.flag != nullptr.
absl::Status SetKnobFromFlag(const Knob& knob, absl::string_view text,
                             KnobValues& values);

// Sets each of `knobs` whose variable `env` sets (FindKnobVariable); the
// first bad value is the error.
absl::Status SetKnobsFromEnv(absl::Span<const Knob* const> knobs, EnvLookup env,
                             KnobValues& values);

// The one of `knobs` whose flag is `flag`, or nullptr.
const Knob* FindKnobByFlag(absl::Span<const Knob* const> knobs,
                           absl::string_view flag);

// What `knob` accepts when spelt so, as its errors say it: "a positive number
// of seconds up to 10000000", "an integer number of milliseconds in
// 1..600000", "a non-negative number of seconds up to 10000000 (0 turns it
// off)".
std::string KnobAllowed(const Knob& knob, KnobSpelling spelling);

// `knob`'s default when spelt so: "30", "0.5" (the heartbeat interval's flag,
// in seconds), "500" (its variable, in milliseconds), "warn".
std::string KnobDefaultText(const Knob& knob, KnobSpelling spelling);

// `text` (a help text) with every "<--flag>" of `knobs` replaced by that
// flag's default (KnobDefaultText), so that the text never disagrees with the
// table.
std::string FillKnobDefaults(absl::string_view text,
                             absl::Span<const Knob* const> knobs);

// `value` as `knob`'s variable writes it (in its unit, as short as exact:
// "2.5" for 2.5 ms in KOLO_CYCLE_TIME_MS), for passing it on to workers.
// REQUIRES: knob.type == kDuration.
std::string KnobVariableText(const Knob& knob, absl::Duration value);

}  // namespace kolo

#endif  // KOLO_COMMON_KNOBS_H_
