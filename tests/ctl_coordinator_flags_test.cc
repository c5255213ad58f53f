// Tests of kolo-coordinator's command line (coordinator/flags.h): defaults,
// every flag, the knobs' variables, --max-np, and the messages of bad usage
// (as the hand-written parser before CLI11 gave them).
#include <map>
#include <string>
#include <vector>

#include "coordinator/flags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kolo::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Kind = FlagsOutcome::Kind;
using Env = std::map<std::string, std::string>;

FlagsOutcome Parse(std::vector<std::string> args, const Env& env = {}) {
  std::vector<const char*> argv = {"kolo-coordinator"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  return ParseCoordinatorFlags(static_cast<int>(argv.size()), argv.data(),
                               InMap(env));
}

TEST(CoordinatorFlagsTest, Defaults) {
  FlagsOutcome p = Parse({"--port", "0", "--np", "2"});
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  const ServerOptions& o = p.flags.server;
  EXPECT_EQ(o.listen.port, 0);
  EXPECT_EQ(o.core.expected_size, 2);
  EXPECT_EQ(o.listen.bind_host, "0.0.0.0");
  EXPECT_EQ(p.flags.secret_file, "");
  EXPECT_EQ(o.core.job_id, "default");
  EXPECT_EQ(p.flags.port_file, "");
  EXPECT_FALSE(o.core.elastic);  // no --min-np
  EXPECT_EQ(o.core.min_size, 1);
  EXPECT_EQ(o.core.max_size, 0);
  EXPECT_EQ(o.core.reset_limit, -1);
  KnobValues defaults;
  EXPECT_EQ(p.flags.knobs.heartbeat_timeout, defaults.heartbeat_timeout);
  EXPECT_EQ(p.flags.knobs.cycle_time, defaults.cycle_time);
  EXPECT_EQ(p.flags.knobs.log_level, defaults.log_level);
  // The knobs are in the server's options too.
  EXPECT_EQ(o.core.heartbeat_timeout, defaults.heartbeat_timeout);
  EXPECT_EQ(o.core.negotiator.cycle_time, defaults.cycle_time);
}

TEST(CoordinatorFlagsTest, EveryFlagBothSpellings) {
  FlagsOutcome p = Parse({"--port=29400",
                          "--np",
                          "4",
                          "--bind",
                          "127.0.0.1",
                          "--secret-file",
                          "/s",
                          "--job-id=train",
                          "--port-file",
                          "/p",
                          "--heartbeat-timeout-seconds",
                          "5",
                          "--heartbeat-interval-seconds=0.25",
                          "--cycle-time-ms",
                          "2.5",
                          "--stall-check-time-seconds",
                          "0",
                          "--stall-shutdown-time-seconds",
                          "30",
                          "--log-level",
                          "info",
                          "--min-np",
                          "2",
                          "--max-np",
                          "8",
                          "--elastic-timeout",
                          "60",
                          "--reset-limit",
                          "3",
                          "--metrics-port",
                          "9464",
                          "--metrics-address=0.0.0.0",
                          "--events",
                          "/e"});
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  const CoordinatorFlags& f = p.flags;
  const ServerOptions& o = f.server;
  EXPECT_EQ(o.listen.port, 29400);
  EXPECT_EQ(o.core.expected_size, 4);
  EXPECT_EQ(o.listen.bind_host, "127.0.0.1");
  EXPECT_EQ(f.secret_file, "/s");
  EXPECT_EQ(o.core.job_id, "train");
  EXPECT_EQ(f.port_file, "/p");
  EXPECT_EQ(f.knobs.heartbeat_timeout, absl::Seconds(5));
  EXPECT_EQ(f.knobs.heartbeat_interval, absl::Milliseconds(250));
  EXPECT_EQ(f.knobs.cycle_time, absl::Microseconds(2500));
  EXPECT_EQ(f.knobs.stall_check, absl::ZeroDuration());
  EXPECT_EQ(f.knobs.stall_shutdown, absl::Seconds(30));
  EXPECT_EQ(f.knobs.log_level, "info");
  EXPECT_TRUE(o.core.elastic);
  EXPECT_EQ(o.core.min_size, 2);
  EXPECT_EQ(o.core.max_size, 8);
  EXPECT_EQ(f.knobs.elastic_timeout, absl::Seconds(60));
  EXPECT_EQ(o.core.reset_limit, 3);
  EXPECT_EQ(o.core.heartbeat_timeout, absl::Seconds(5));
  EXPECT_EQ(o.core.heartbeat_interval, absl::Milliseconds(250));
  EXPECT_EQ(o.core.negotiator.cycle_time, absl::Microseconds(2500));
  EXPECT_EQ(o.core.negotiator.stall_check, absl::ZeroDuration());
  EXPECT_EQ(o.core.negotiator.stall_shutdown, absl::Seconds(30));
  EXPECT_EQ(o.core.elastic_timeout, absl::Seconds(60));
  EXPECT_EQ(f.metrics_port, 9464);
  EXPECT_EQ(f.metrics_address, "0.0.0.0");
  EXPECT_EQ(f.events_file, "/e");
}

TEST(CoordinatorFlagsTest, MetricsAreOffByDefaultAndPortsChecked) {
  FlagsOutcome p = Parse({"--port", "0", "--np", "1"});
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  EXPECT_EQ(p.flags.metrics_port, -1);
  EXPECT_EQ(p.flags.metrics_address, "127.0.0.1");
  EXPECT_EQ(p.flags.events_file, "");
  p = Parse({"--port", "0", "--np", "1", "--metrics-port", "70000"});
  EXPECT_EQ(p.kind, Kind::kError);
  EXPECT_THAT(p.text, HasSubstr("--metrics-port"));
}

TEST(CoordinatorFlagsTest, TheLastOfARepeatedFlagWins) {
  FlagsOutcome p = Parse({"--port", "1", "--np", "2", "--port", "2"});
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  EXPECT_EQ(p.flags.server.listen.port, 2);
}

TEST(CoordinatorFlagsTest, VariablesGiveDefaultsAndFlagsWin) {
  Env env = {{"KOLO_CYCLE_TIME_MS", "3"},
             {"HOROVOD_STALL_CHECK_TIME_SECONDS", "7"},
             {"KOLO_LOG_LEVEL", "debug"},
             {"KOLO_ELASTIC_TIMEOUT", "9"}};
  FlagsOutcome p = Parse({"--port", "0", "--np", "2"}, env);
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  EXPECT_EQ(p.flags.knobs.cycle_time, absl::Milliseconds(3));
  EXPECT_EQ(p.flags.knobs.stall_check, absl::Seconds(7));
  EXPECT_EQ(p.flags.knobs.log_level, "debug");
  EXPECT_EQ(p.flags.knobs.elastic_timeout, absl::Seconds(9));
  p = Parse({"--port", "0", "--np", "2", "--cycle-time-ms", "1"}, env);
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  EXPECT_EQ(p.flags.knobs.cycle_time, absl::Milliseconds(1));
  // The heartbeat flags read no variable.
  p = Parse({"--port", "0", "--np", "2"},
            {{"KOLO_HEARTBEAT_TIMEOUT_MS", "9000"}});
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  EXPECT_EQ(p.flags.knobs.heartbeat_timeout, KnobValues().heartbeat_timeout);
}

// TLS (issue 38): the three files from flags, else KOLO_TLS_*; a partial
// set of either is an error naming what is missing.
TEST(CoordinatorFlagsTest, TlsFilesFromFlagsElseVariables) {
  FlagsOutcome p = Parse({"--port", "0", "--np", "1"});
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  EXPECT_FALSE(p.flags.tls_files.enabled());
  p = Parse({"--port", "0", "--np", "1", "--tls-cert", "c", "--tls-key", "k",
             "--tls-ca", "a"},
            {{"KOLO_TLS_CERT", "env-c"}});
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  EXPECT_EQ(p.flags.tls_files.cert, "c");
  EXPECT_EQ(p.flags.tls_files.ca, "a");
  p = Parse(
      {"--port", "0", "--np", "1"},
      {{"KOLO_TLS_CERT", "c"}, {"KOLO_TLS_KEY", "k"}, {"KOLO_TLS_CA", "a"}});
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  EXPECT_EQ(p.flags.tls_files.key, "k");
  p = Parse({"--port", "0", "--np", "1", "--tls-cert", "c"});
  EXPECT_EQ(p.kind, Kind::kError);
  EXPECT_THAT(p.text, HasSubstr("--tls-key and --tls-ca are missing"));
  p = Parse({"--port", "0", "--np", "1"}, {{"KOLO_TLS_CA", "a"}});
  EXPECT_EQ(p.kind, Kind::kError);
  EXPECT_THAT(p.text, HasSubstr("KOLO_TLS_CERT and KOLO_TLS_KEY are missing"));
}

TEST(CoordinatorFlagsTest, Elastic) {
  FlagsOutcome p = Parse({"--port", "0", "--np", "2"}, {{"KOLO_ELASTIC", "1"}});
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  EXPECT_TRUE(p.flags.server.core.elastic);
  EXPECT_EQ(p.flags.server.core.min_size, 1);
  p = Parse({"--port", "0", "--np", "2", "--max-np", "4"});
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  EXPECT_TRUE(p.flags.server.core.elastic);
  EXPECT_EQ(p.flags.server.core.min_size, 1);
  EXPECT_EQ(p.flags.server.core.max_size, 4);
  p = Parse({"--port", "0", "--np", "2", "--min-np", "2", "--max-np", "0"});
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  EXPECT_TRUE(p.flags.server.core.elastic);
  EXPECT_EQ(p.flags.server.core.max_size, 0);
}

TEST(CoordinatorFlagsTest, AutotuneFlagsOverTheirVariables) {
  FlagsOutcome p = Parse({"--port", "0", "--np", "2"});
  ASSERT_EQ(p.kind, FlagsOutcome::Kind::kRun) << p.text;
  EXPECT_FALSE(p.flags.autotune.enabled);
  p = Parse({"--port", "0", "--np", "2", "--autotune-bayes-opt-max-samples",
             "5", "--autotune-log-file=/tmp/t.csv"},
            {{"HOROVOD_AUTOTUNE", "1"}, {"KOLO_AUTOTUNE_WARMUP_SAMPLES", "0"}});
  ASSERT_EQ(p.kind, FlagsOutcome::Kind::kRun) << p.text;
  EXPECT_TRUE(p.flags.autotune.enabled);
  EXPECT_EQ(p.flags.autotune.max_samples, 5);
  EXPECT_EQ(p.flags.autotune.warmup_samples, 0);
  EXPECT_EQ(p.flags.autotune.log_file, "/tmp/t.csv");
  p = Parse({"--port", "0", "--np", "2", "--no-autotune"},
            {{"KOLO_AUTOTUNE", "1"}});
  ASSERT_EQ(p.kind, FlagsOutcome::Kind::kRun) << p.text;
  EXPECT_FALSE(p.flags.autotune.enabled);
  p = Parse(
      {"--port", "0", "--np", "2", "--autotune-gaussian-process-noise", "-1"});
  ASSERT_EQ(p.kind, FlagsOutcome::Kind::kError);
  EXPECT_EQ(p.text,
            "--autotune-gaussian-process-noise: expected a number, 0 or more, "
            "got '-1'");
}

TEST(CoordinatorFlagsTest, Help) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"--help"}, {"-h"}, {"--port", "x", "--help"}}) {
    FlagsOutcome p = Parse(args, {{"KOLO_CYCLE_TIME_MS", "bad"}});
    ASSERT_EQ(p.kind, Kind::kHelp) << p.text;
    EXPECT_EQ(p.text, CoordinatorUsage());
  }
  const std::string usage = CoordinatorUsage();
  EXPECT_THAT(usage, HasSubstr("usage: kolo-coordinator --port P --np N"));
  EXPECT_THAT(usage, HasSubstr("  --max-np M "));
  EXPECT_THAT(usage, HasSubstr("(default 2.5)"));  // heartbeat timeout
  EXPECT_THAT(usage, Not(HasSubstr("<--")));
}

TEST(CoordinatorFlagsTest, Errors) {
  struct Case {
    std::vector<std::string> args;
    Env env;
    std::string message;  // the whole message
  } cases[] = {
      {{"--np", "2"}, {}, "--port is required (0 lets the kernel pick one)"},
      {{"--port", "0"}, {}, "--np is required (the number of workers)"},
      {{"--port", "70000", "--np", "2"},
       {},
       "--port must be 0..65535, got '70000'"},
      {{"--port", "0", "--np", "0"},
       {},
       "--np must be a positive integer, got '0'"},
      {{"--port", "0", "--np", "2", "--min-np", "x"},
       {},
       "--min-np must be a positive integer, got 'x'"},
      {{"--port", "0", "--np", "2", "--min-np", "3"},
       {},
       "--min-np 3 is more than --np 2"},
      {{"--port", "0", "--np", "2", "--reset-limit", "x"},
       {},
       "--reset-limit must be a number of membership changes (0 or more), "
       "got 'x'"},
      {{"--port", "0", "--np", "4", "--min-np", "3", "--max-np", "2"},
       {},
       "--max-np 2 is less than --min-np 3"},
      {{"--port", "0", "--np", "4", "--max-np", "3"},
       {},
       "--max-np 3 is less than --np 4 (the workers that form the first "
       "epoch)"},
      {{"--port", "0", "--np", "2", "--max-np", "x"},
       {},
       "--max-np must be a number of workers (0: no cap), got 'x'"},
      {{"--port", "0", "--np", "2", "--bogus"},
       {},
       "unknown argument '--bogus'"},
      {{"--port", "0", "--np", "2", "--bogus=1"},
       {},
       "unknown argument '--bogus'"},
      {{"--port", "0", "--np", "2", "stray"}, {}, "unknown argument 'stray'"},
      {{"--port", "0", "--np"}, {}, "--np needs a value"},
      {{"--port", "0", "--np", "2", "--cycle-time-ms", "0"},
       {},
       "--cycle-time-ms: expected a positive number of milliseconds up to "
       "60000, got '0'"},
      {{"--port", "0", "--np", "2"},
       {{"KOLO_CYCLE_TIME_MS", "0"}},
       "bad value KOLO_CYCLE_TIME_MS='0': expected a positive number of "
       "milliseconds up to 60000"},
  };
  for (const Case& c : cases) {
    FlagsOutcome p = Parse(c.args, c.env);
    EXPECT_EQ(p.kind, Kind::kError) << testing::PrintToString(c.args);
    EXPECT_EQ(p.text, c.message) << testing::PrintToString(c.args);
  }
}

}  // namespace
}  // namespace kolo::coordinator
