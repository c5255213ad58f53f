// Unit tests of common/knobs.h: the table's rows are consistent, the defaults,
// a KOLO_* variable over its Horovod alias, bad values refused with messages
// that name the variable or flag, what is allowed and what was given, and the
// range limits. Single-threaded: everything under test is a pure function
// (GetProcessEnv, the one that is not, is not used here).
#include <iterator>
#include <map>
#include <set>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "common/knobs.h"
#include "gtest/gtest.h"

namespace kolo {
namespace {

using Env = std::map<std::string, std::string>;

// Parses `text` as `knob`'s variable into fresh values.
absl::StatusOr<KnobValues> FromVariable(const Knob& knob,
                                        const std::string& text) {
  KnobValues values;
  absl::Status s = SetKnobFromVariable(knob, knob.variable, text, values);
  if (!s.ok()) return s;
  return values;
}

absl::StatusOr<KnobValues> FromFlag(const Knob& knob, const std::string& text) {
  KnobValues values;
  absl::Status s = SetKnobFromFlag(knob, text, values);
  if (!s.ok()) return s;
  return values;
}

TEST(KnobTable, RowsAreConsistent) {
  std::set<std::string> names;
  for (size_t i = 0; i < std::size(kKnobTable); ++i) {
    const Knob& k = kKnobTable[i];
    EXPECT_EQ(static_cast<size_t>(k.id), i);
    EXPECT_EQ(&GetKnob(k.id), &k);
    ASSERT_NE(k.variable, nullptr) << i;
    EXPECT_TRUE(absl::StartsWith(k.variable, "KOLO_")) << k.variable;
    EXPECT_TRUE(names.insert(k.variable).second) << k.variable;
    if (k.alias != nullptr) {
      EXPECT_TRUE(absl::StartsWith(k.alias, "HOROVOD_")) << k.alias;
      EXPECT_TRUE(names.insert(k.alias).second) << k.alias;
    }
    if (k.flag != nullptr) {
      EXPECT_TRUE(absl::StartsWith(k.flag, "--")) << k.flag;
      EXPECT_TRUE(names.insert(k.flag).second) << k.flag;
    }
    EXPECT_NE(std::string(k.description), "") << k.variable;
    if (k.type == KnobType::kDuration) {
      // The default is allowed, in both spellings.
      EXPECT_LE(k.default_duration, k.max) << k.variable;
      EXPECT_TRUE(k.zero_allowed || k.default_duration > absl::ZeroDuration())
          << k.variable;
      EXPECT_TRUE(
          FromVariable(k, KnobDefaultText(k, KnobSpelling::kVariable)).ok())
          << k.variable;
      if (k.flag != nullptr) {
        EXPECT_TRUE(FromFlag(k, KnobDefaultText(k, KnobSpelling::kFlag)).ok())
            << k.flag;
      }
    }
  }
}

TEST(KnobTable, Defaults) {
  KnobValues v;
  EXPECT_EQ(v.start_timeout, absl::Seconds(30));
  EXPECT_EQ(v.heartbeat_interval, absl::Milliseconds(500));
  EXPECT_EQ(v.heartbeat_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(v.cycle_time, absl::Milliseconds(1));
  EXPECT_EQ(v.stall_check, absl::Seconds(60));
  EXPECT_EQ(v.stall_shutdown, absl::ZeroDuration());
  EXPECT_EQ(v.data_timeout, absl::Seconds(30));
  EXPECT_EQ(v.log_level, "warn");
  // Every duration knob's field starts at its row's default.
  for (const Knob& k : kKnobTable) {
    if (k.type == KnobType::kDuration) {
      EXPECT_EQ(DurationOf(k, v), k.default_duration) << k.variable;
    }
  }
  // As the help texts print them.
  EXPECT_EQ(KnobDefaultText(knobs::kStartTimeout, KnobSpelling::kFlag), "30");
  EXPECT_EQ(KnobDefaultText(knobs::kHeartbeatInterval, KnobSpelling::kFlag),
            "0.5");
  EXPECT_EQ(KnobDefaultText(knobs::kHeartbeatInterval, KnobSpelling::kVariable),
            "500");
  EXPECT_EQ(KnobDefaultText(knobs::kCycleTime, KnobSpelling::kFlag), "1");
  EXPECT_EQ(KnobDefaultText(knobs::kStallShutdown, KnobSpelling::kFlag), "0");
  EXPECT_EQ(KnobDefaultText(knobs::kLogLevel, KnobSpelling::kFlag), "warn");
}

TEST(KnobTable, NamesAndAliases) {
  EXPECT_STREQ(knobs::kStartTimeout.alias, "HOROVOD_START_TIMEOUT");
  EXPECT_STREQ(knobs::kCycleTime.variable, "KOLO_CYCLE_TIME_MS");
  EXPECT_STREQ(knobs::kCycleTime.alias, "HOROVOD_CYCLE_TIME");
  EXPECT_STREQ(knobs::kStallCheck.alias, "HOROVOD_STALL_CHECK_TIME_SECONDS");
  EXPECT_STREQ(knobs::kStallShutdown.alias,
               "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS");
  EXPECT_STREQ(knobs::kDataTimeout.variable, "KOLO_TIMEOUT_SECONDS");
  EXPECT_STREQ(knobs::kDataTimeout.alias, "HOROVOD_GLOO_TIMEOUT_SECONDS");
  EXPECT_EQ(knobs::kDataTimeout.flag, nullptr);
  EXPECT_STREQ(knobs::kLogLevel.alias, "HOROVOD_LOG_LEVEL");
  EXPECT_EQ(knobs::kHeartbeatTimeout.alias, nullptr);
  const Knob* all[] = {&knobs::kCycleTime, &knobs::kLogLevel,
                       &knobs::kDataTimeout};
  EXPECT_EQ(FindKnobByFlag(all, "--cycle-time-ms"), &knobs::kCycleTime);
  EXPECT_EQ(FindKnobByFlag(all, "--log-level"), &knobs::kLogLevel);
  EXPECT_EQ(FindKnobByFlag(all, "--start-timeout"), nullptr);  // not listed
  EXPECT_EQ(FindKnobByFlag(all, "KOLO_CYCLE_TIME_MS"), nullptr);
}

TEST(KnobEnv, KoloVariableWinsOverAlias) {
  const Knob& k = knobs::kCycleTime;
  EXPECT_FALSE(FindKnobVariable(k, InMap(Env{})).has_value());
  auto alias = FindKnobVariable(k, InMap(Env{{"HOROVOD_CYCLE_TIME", "5"}}));
  ASSERT_TRUE(alias.has_value());
  EXPECT_STREQ(alias->name, "HOROVOD_CYCLE_TIME");
  EXPECT_EQ(alias->value, "5");
  auto both = FindKnobVariable(
      k, InMap(Env{{"HOROVOD_CYCLE_TIME", "5"}, {"KOLO_CYCLE_TIME_MS", "2"}}));
  ASSERT_TRUE(both.has_value());
  EXPECT_STREQ(both->name, "KOLO_CYCLE_TIME_MS");
  EXPECT_EQ(both->value, "2");
  // An empty value counts as unset: the alias then decides.
  auto empty = FindKnobVariable(
      k, InMap(Env{{"HOROVOD_CYCLE_TIME", "5"}, {"KOLO_CYCLE_TIME_MS", ""}}));
  ASSERT_TRUE(empty.has_value());
  EXPECT_STREQ(empty->name, "HOROVOD_CYCLE_TIME");
  EXPECT_FALSE(
      FindKnobVariable(k, InMap(Env{{"KOLO_CYCLE_TIME_MS", ""}})).has_value());
}

TEST(KnobEnv, SetsOnlyTheListedKnobs) {
  const absl::flat_hash_map<std::string, std::string> env = {
      {"HOROVOD_START_TIMEOUT", "7"},
      {"KOLO_START_TIMEOUT", "9"},
      {"HOROVOD_GLOO_TIMEOUT_SECONDS", "12"},
      {"HOROVOD_LOG_LEVEL", "DEBUG"},
      {"KOLO_HEARTBEAT_INTERVAL_MS", "100"},
      {"KOLO_STALL_CHECK_TIME_SECONDS", "0"}};
  const Knob* listed[] = {&knobs::kStartTimeout, &knobs::kDataTimeout,
                          &knobs::kLogLevel, &knobs::kStallCheck};
  KnobValues v;
  ASSERT_TRUE(SetKnobsFromEnv(listed, InMap(env), v).ok());
  EXPECT_EQ(v.start_timeout, absl::Seconds(9));
  EXPECT_EQ(v.data_timeout, absl::Seconds(12));
  EXPECT_EQ(v.log_level, "debug");
  EXPECT_EQ(v.stall_check, absl::ZeroDuration());
  EXPECT_EQ(v.heartbeat_interval, absl::Milliseconds(500));  // not listed

  // A bad value is an error naming the variable it came from.
  KnobValues w;
  absl::Status s = SetKnobsFromEnv(
      listed, InMap(Env{{"HOROVOD_GLOO_TIMEOUT_SECONDS", "soon"}}), w);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "bad value HOROVOD_GLOO_TIMEOUT_SECONDS='soon': expected a "
            "positive number of seconds up to 10000000");
}

TEST(KnobParse, BadValuesSayWhatWhereAllowedAndGiven) {
  struct Case {
    const Knob* knob;
    const char* text;
    const char* variable_error;
    const char* flag_error;  // nullptr: the knob has no flag
  };
  const Case cases[] = {
      {&knobs::kCycleTime, "0",
       "bad value KOLO_CYCLE_TIME_MS='0': expected a positive number of "
       "milliseconds up to 60000",
       "--cycle-time-ms: expected a positive number of milliseconds up to "
       "60000, got '0'"},
      {&knobs::kStallCheck, "-1",
       "bad value KOLO_STALL_CHECK_TIME_SECONDS='-1': expected a non-negative "
       "number of seconds up to 10000000 (0 turns it off)",
       "--stall-check-time-seconds: expected a non-negative number of seconds "
       "up to 10000000 (0 turns it off), got '-1'"},
      {&knobs::kStartTimeout, "soon",
       "bad value KOLO_START_TIMEOUT='soon': expected a positive number of "
       "seconds up to 10000000",
       "--start-timeout: expected a positive number of seconds up to "
       "10000000, got 'soon'"},
      {&knobs::kHeartbeatInterval, "1.5",
       "bad value KOLO_HEARTBEAT_INTERVAL_MS='1.5': expected an integer "
       "number of milliseconds in 1..600000",
       nullptr},
      {&knobs::kHeartbeatInterval, "0",
       "bad value KOLO_HEARTBEAT_INTERVAL_MS='0': expected an integer number "
       "of milliseconds in 1..600000",
       "--heartbeat-interval-seconds: expected a positive number of seconds "
       "up to 600, got '0'"},
      {&knobs::kDataTimeout, "",
       "bad value KOLO_TIMEOUT_SECONDS='': expected a positive number of "
       "seconds up to 10000000",
       nullptr},
      {&knobs::kLogLevel, "loud",
       "bad value KOLO_LOG_LEVEL='loud': expected trace, debug, info, warn (or "
       "warning), error, critical (or fatal) or off",
       "--log-level: expected trace, debug, info, warn (or warning), error, "
       "critical (or fatal) or off, got 'loud'"},
  };
  for (const Case& c : cases) {
    auto v = FromVariable(*c.knob, c.text);
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument)
        << c.knob->variable << "=" << c.text;
    EXPECT_EQ(v.status().message(), c.variable_error);
    if (c.flag_error != nullptr) {
      auto f = FromFlag(*c.knob, c.text);
      EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument)
          << c.knob->flag << " " << c.text;
      EXPECT_EQ(f.status().message(), c.flag_error);
    }
  }
  // The alias is named when the value came from it.
  KnobValues v;
  absl::Status s =
      SetKnobFromVariable(knobs::kCycleTime, "HOROVOD_CYCLE_TIME", "fast", v);
  EXPECT_EQ(s.message(),
            "bad value HOROVOD_CYCLE_TIME='fast': expected a positive number "
            "of milliseconds up to 60000");
  EXPECT_EQ(v.cycle_time, absl::Milliseconds(1));  // untouched
}

TEST(KnobParse, RangeLimits) {
  struct Case {
    const Knob* knob;
    KnobSpelling spelling;
    const char* text;
    bool ok;
  };
  using enum KnobSpelling;
  const Case cases[] = {
      // Zero: only where it turns the knob off.
      {&knobs::kStallCheck, kVariable, "0", true},
      {&knobs::kStallShutdown, kFlag, "0", true},
      {&knobs::kCycleTime, kVariable, "0", false},
      {&knobs::kStartTimeout, kFlag, "0", false},
      {&knobs::kHeartbeatTimeout, kFlag, "0", false},
      {&knobs::kDataTimeout, kVariable, "0", false},
      // The largest value, and just past it.
      {&knobs::kCycleTime, kVariable, "60000", true},
      {&knobs::kCycleTime, kFlag, "60000.001", false},
      {&knobs::kStallShutdown, kVariable, "10000000", true},
      {&knobs::kStallShutdown, kVariable, "10000000.5", false},
      {&knobs::kHeartbeatTimeout, kFlag, "10000000", true},
      {&knobs::kHeartbeatTimeout, kFlag, "1e8", false},
      {&knobs::kHeartbeatInterval, kVariable, "600000", true},
      {&knobs::kHeartbeatInterval, kVariable, "600001", false},
      {&knobs::kHeartbeatInterval, kFlag, "600", true},
      {&knobs::kHeartbeatInterval, kFlag, "600.5", false},
      // The variable takes whole milliseconds; the flag, fractions of seconds.
      {&knobs::kHeartbeatInterval, kVariable, "1", true},
      {&knobs::kHeartbeatInterval, kFlag, "0.001", true},
      // Negative, not a number, infinite.
      {&knobs::kStallCheck, kFlag, "-0.5", false},
      {&knobs::kStartTimeout, kVariable, "nan", false},
      {&knobs::kStallCheck, kVariable, "nan", false},
      {&knobs::kStartTimeout, kVariable, "inf", false},
      {&knobs::kHeartbeatInterval, kVariable, "-5", false},
  };
  for (const Case& c : cases) {
    auto v = c.spelling == kFlag ? FromFlag(*c.knob, c.text)
                                 : FromVariable(*c.knob, c.text);
    EXPECT_EQ(v.ok(), c.ok) << c.knob->variable << " "
                            << (c.spelling == kFlag ? "flag" : "variable")
                            << " '" << c.text << "': " << v.status();
  }
}

TEST(KnobParse, UnitsAndFractions) {
  auto cycle = FromVariable(knobs::kCycleTime, "0.25");
  ASSERT_TRUE(cycle.ok()) << cycle.status();
  EXPECT_EQ(cycle->cycle_time, absl::Microseconds(250));
  auto start = FromFlag(knobs::kStartTimeout, "2.5");
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(start->start_timeout, absl::Milliseconds(2500));
  auto hb_var = FromVariable(knobs::kHeartbeatInterval, "100");
  ASSERT_TRUE(hb_var.ok()) << hb_var.status();
  EXPECT_EQ(hb_var->heartbeat_interval, absl::Milliseconds(100));
  auto hb_flag = FromFlag(knobs::kHeartbeatInterval, "0.25");
  ASSERT_TRUE(hb_flag.ok()) << hb_flag.status();
  EXPECT_EQ(hb_flag->heartbeat_interval, absl::Milliseconds(250));
  auto stall = FromFlag(knobs::kStallShutdown, "90");
  ASSERT_TRUE(stall.ok()) << stall.status();
  EXPECT_EQ(stall->stall_shutdown, absl::Seconds(90));
}

TEST(KnobParse, LogLevels) {
  for (const char* level : {"trace", "debug", "info", "warn", "warning",
                            "error", "critical", "fatal", "off"}) {
    auto v = FromVariable(knobs::kLogLevel, level);
    ASSERT_TRUE(v.ok()) << level << ": " << v.status();
    EXPECT_EQ(v->log_level, level);
  }
  auto upper = FromFlag(knobs::kLogLevel, "DEBUG");
  ASSERT_TRUE(upper.ok()) << upper.status();
  EXPECT_EQ(upper->log_level, "debug");
  EXPECT_FALSE(FromFlag(knobs::kLogLevel, "").ok());
  EXPECT_FALSE(FromVariable(knobs::kLogLevel, "err").ok());
  EXPECT_FALSE(FromVariable(knobs::kLogLevel, "warn ").ok());
}

TEST(KnobFormat, FillKnobDefaults) {
  const Knob* listed[] = {&knobs::kHeartbeatInterval, &knobs::kLogLevel};
  EXPECT_EQ(FillKnobDefaults("a (default <--heartbeat-interval-seconds>), "
                             "b (default <--log-level>), "
                             "c (default <--cycle-time-ms>), [3]<stdout>",
                             listed),
            "a (default 0.5), b (default warn), "
            "c (default <--cycle-time-ms>), [3]<stdout>");
}

TEST(KnobFormat, VariableTextReadsBackExactly) {
  EXPECT_EQ(KnobVariableText(knobs::kStartTimeout, absl::Seconds(30)), "30");
  EXPECT_EQ(KnobVariableText(knobs::kCycleTime, absl::Microseconds(500)),
            "0.5");
  EXPECT_EQ(KnobVariableText(knobs::kStallShutdown, absl::ZeroDuration()), "0");
  EXPECT_EQ(KnobVariableText(knobs::kStallCheck, absl::Seconds(10000000)),
            "10000000");
  EXPECT_EQ(
      KnobVariableText(knobs::kStartTimeout, absl::Milliseconds(1234567500)),
      "1234567.5");
  // What kolorun passes to a worker parses back to the same value.
  for (absl::Duration d : {absl::Microseconds(250), absl::Milliseconds(1),
                           absl::Milliseconds(2500), absl::Seconds(59)}) {
    auto v =
        FromVariable(knobs::kCycleTime, KnobVariableText(knobs::kCycleTime, d));
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->cycle_time, d);
  }
}

}  // namespace
}  // namespace kolo
