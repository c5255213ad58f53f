// Parsing and formatting of the knobs in common/knobs.h's table.
//
// Thread-safety: pure functions, except GetProcessEnv (getenv).
#include "common/knobs.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/check.h"

namespace kolo {
namespace {

constexpr bool TableInIdOrder() {
  for (size_t i = 0; i < std::size(kKnobTable); ++i) {
    if (static_cast<size_t>(kKnobTable[i].id) != i) return false;
  }
  return true;
}
static_assert(TableInIdOrder(), "kKnobTable's rows must be in KnobId order");

// The names SetLogLevel (common/log.h) takes: spdlog's, and Horovod's
// "warning" and "fatal".
constexpr const char* kLogLevels[] = {"trace",    "debug",   "info",
                                      "warn",     "warning", "error",
                                      "critical", "fatal",   "off"};
constexpr char kLogLevelsText[] =
    "trace, debug, info, warn (or warning), error, critical (or fatal) or off";

// `v` as short as it is exact: whole numbers without a fraction or an
// exponent ("10000000", not "1e+07"), others in the shortest form that reads
// back as the same double ("2.5", "0.25").
std::string Number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  KOLO_CHECK(ec == std::errc());
  return std::string(buf, end);
}

const KnobUnit& UnitOf(const Knob& knob, KnobSpelling spelling) {
  return spelling == KnobSpelling::kFlag ? knob.flag_unit : knob.unit;
}

// Parses `text` for `knob` spelt so; nullopt when it is not allowed.
std::optional<absl::Duration> ParseDuration(const Knob& knob,
                                            KnobSpelling spelling,
                                            absl::string_view text) {
  const KnobUnit& unit = UnitOf(knob, spelling);
  const double max_units = absl::FDivDuration(knob.max, unit.size);
  if (knob.whole_units && spelling == KnobSpelling::kVariable) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(text, &v) || v < (knob.zero_allowed ? 0 : 1) ||
        static_cast<double>(v) > max_units) {
      return std::nullopt;
    }
    return v * unit.size;
  }
  double v = 0;
  // (NaN fails both comparisons with 0.)
  if (!absl::SimpleAtod(text, &v) || !(knob.zero_allowed ? v >= 0 : v > 0) ||
      v > max_units) {
    return std::nullopt;
  }
  return v * unit.size;
}

std::optional<std::string> ParseLogLevel(absl::string_view text) {
  std::string level = absl::AsciiStrToLower(text);
  for (const char* known : kLogLevels) {
    if (level == known) return level;
  }
  return std::nullopt;
}

// Sets `knob` from `text`; false when the value is not allowed.
bool Set(const Knob& knob, KnobSpelling spelling, absl::string_view text,
         KnobValues& values) {
  switch (knob.type) {
    case KnobType::kDuration:
      if (std::optional<absl::Duration> d = ParseDuration(knob, spelling, text);
          d.has_value()) {
        DurationOf(knob, values) = *d;
        return true;
      }
      return false;
    case KnobType::kLogLevel:
      if (std::optional<std::string> l = ParseLogLevel(text); l.has_value()) {
        values.log_level = *std::move(l);
        return true;
      }
      return false;
  }
  return false;
}

}  // namespace

absl::Duration& DurationOf(const Knob& knob, KnobValues& values) {
  switch (knob.id) {
    case KnobId::kStartTimeout:
      return values.start_timeout;
    case KnobId::kHeartbeatInterval:
      return values.heartbeat_interval;
    case KnobId::kHeartbeatTimeout:
      return values.heartbeat_timeout;
    case KnobId::kCycleTime:
      return values.cycle_time;
    case KnobId::kStallCheck:
      return values.stall_check;
    case KnobId::kStallShutdown:
      return values.stall_shutdown;
    case KnobId::kDataTimeout:
      return values.data_timeout;
    case KnobId::kElasticTimeout:
      return values.elastic_timeout;
    case KnobId::kLogLevel:
      break;
  }
  KOLO_CHECK(false) << "knob " << static_cast<int>(knob.id)
                    << " is not a duration";
  return values.start_timeout;  // not reached
}

std::optional<std::string> GetProcessEnv(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::optional<KnobVariable> FindKnobVariable(const Knob& knob, EnvLookup env) {
  for (const char* name : {knob.variable, knob.alias}) {
    if (name == nullptr) continue;
    std::optional<std::string> v = env(name);
    if (v.has_value() && !v->empty()) return KnobVariable{name, *std::move(v)};
  }
  return std::nullopt;
}

absl::Status SetKnobFromVariable(const Knob& knob, absl::string_view variable,
                                 absl::string_view text, KnobValues& values) {
  if (Set(knob, KnobSpelling::kVariable, text, values)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("bad value ", variable, "='", text, "': expected ",
                   KnobAllowed(knob, KnobSpelling::kVariable)));
}

absl::Status SetKnobFromFlag(const Knob& knob, absl::string_view text,
                             KnobValues& values) {
  KOLO_CHECK(knob.flag != nullptr);
  if (Set(knob, KnobSpelling::kFlag, text, values)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      knob.flag, ": expected ", KnobAllowed(knob, KnobSpelling::kFlag),
      ", got '", text, "'"));
}

absl::Status SetKnobsFromEnv(absl::Span<const Knob* const> knobs, EnvLookup env,
                             KnobValues& values) {
  for (const Knob* knob : knobs) {
    std::optional<KnobVariable> v = FindKnobVariable(*knob, env);
    if (!v.has_value()) continue;
    if (absl::Status s = SetKnobFromVariable(*knob, v->name, v->value, values);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

const Knob* FindKnobByFlag(absl::Span<const Knob* const> knobs,
                           absl::string_view flag) {
  for (const Knob* knob : knobs) {
    if (knob->flag != nullptr && flag == knob->flag) return knob;
  }
  return nullptr;
}

std::string KnobAllowed(const Knob& knob, KnobSpelling spelling) {
  if (knob.type == KnobType::kLogLevel) return kLogLevelsText;
  const KnobUnit& unit = UnitOf(knob, spelling);
  const std::string max = Number(absl::FDivDuration(knob.max, unit.size));
  const char* off = knob.zero_allowed ? " (0 turns it off)" : "";
  if (knob.whole_units && spelling == KnobSpelling::kVariable) {
    return absl::StrCat("an integer number of ", unit.name, " in ",
                        knob.zero_allowed ? "0" : "1", "..", max, off);
  }
  return absl::StrCat(knob.zero_allowed ? "a non-negative" : "a positive",
                      " number of ", unit.name, " up to ", max, off);
}

std::string KnobDefaultText(const Knob& knob, KnobSpelling spelling) {
  if (knob.type == KnobType::kLogLevel) return knob.default_level;
  return Number(
      absl::FDivDuration(knob.default_duration, UnitOf(knob, spelling).size));
}

std::string FillKnobDefaults(absl::string_view text,
                             absl::Span<const Knob* const> knobs) {
  std::string filled(text);
  for (const Knob* knob : knobs) {
    if (knob->flag == nullptr) continue;
    absl::StrReplaceAll({{absl::StrCat("<", knob->flag, ">"),
                          KnobDefaultText(*knob, KnobSpelling::kFlag)}},
                        &filled);
  }
  return filled;
}

std::string KnobVariableText(const Knob& knob, absl::Duration value) {
  KOLO_CHECK(knob.type == KnobType::kDuration);
  return Number(absl::FDivDuration(value, knob.unit.size));
}

}  // namespace kolo
