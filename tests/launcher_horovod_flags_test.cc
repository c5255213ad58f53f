// Unit tests of horovodrun's command line in kolorun: every flag of the
// table (launcher/horovod_flags.h) is accepted, noted or refused (never an
// "unknown flag"), -x, --config-file (launcher/config_file.h) and its
// precedence, and Horovod's variables (launcher/horovod_variables.h).
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "launcher/args.h"
#include "launcher/check_build.h"
#include "launcher/config_file.h"
#include "launcher/horovod_flags.h"
#include "launcher/horovod_variables.h"

namespace kolo::launcher {
namespace {

using Env = std::map<std::string, std::string>;
using Files = std::map<std::string, std::string>;
using Vars = std::vector<std::pair<std::string, std::string>>;

absl::StatusOr<LaunchOptions> Parse(std::vector<std::string> args,
                                    const Env& env = {},
                                    const Files& files = {}) {
  return ParseArgs(
      args, env,
      [files](const std::string& path) -> absl::StatusOr<std::string> {
        auto it = files.find(path);
        if (it == files.end()) {
          return absl::NotFoundError("no such file");
        }
        return it->second;
      });
}

// A value each flag accepts.
std::string SampleValue(const HorovodFlag& flag) {
  switch (flag.id) {
    case HorovodFlagId::kExtraEnv:
      return "A=1";
    case HorovodFlagId::kHostfile:
      return "hosts.txt";
    case HorovodFlagId::kConfigFile:
      return "c.yaml";
    case HorovodFlagId::kNetworkInterfaces:
      return "eth0";
    case HorovodFlagId::kTimelineFilename:
      return "/tmp/t.json";
    case HorovodFlagId::kOutputFilename:
      return "/tmp/out";
    case HorovodFlagId::kSshIdentityFile:
      return "/home/u/.ssh/id";
    default:
      break;
  }
  if (flag.target != nullptr && absl::StrContains(flag.target, "log-level")) {
    return "info";
  }
  return "2";
}

TEST(HorovodFlagsTest, EveryFlagIsAcceptedNotedOrRefused) {
  const Files files = {{"hosts.txt", "a slots=2\n"}, {"c.yaml", ""}};
  std::set<std::string> seen;
  for (const HorovodFlag& flag : HorovodFlags()) {
    for (const char* spelling : flag.spellings) {
      if (spelling == nullptr) break;
      SCOPED_TRACE(spelling);
      EXPECT_TRUE(seen.insert(spelling).second) << "twice in the table";
      std::vector<std::string> args = {"-np", "2", spelling};
      if (flag.takes_value) args.push_back(SampleValue(flag));
      args.push_back("cmd");
      auto o = Parse(args, {}, files);
      if (!o.ok()) {
        EXPECT_FALSE(absl::StrContains(o.status().message(), "unknown flag"))
            << o.status();
      }
      switch (flag.action) {
        case HorovodFlagAction::kSame:
        case HorovodFlagAction::kAlias:
          ASSERT_NE(flag.target, nullptr);
          break;
        case HorovodFlagAction::kMapped:
          EXPECT_TRUE(o.ok()) << o.status();
          break;
        case HorovodFlagAction::kNotice:
          ASSERT_TRUE(o.ok()) << o.status();
          EXPECT_EQ(o->notices, std::vector<std::string>{
                                    absl::StrCat(spelling, ": ", flag.text)});
          EXPECT_EQ(o->command, std::vector<std::string>{"cmd"});
          break;
        case HorovodFlagAction::kRefused:
          EXPECT_EQ(o.status().message(),
                    absl::StrCat(spelling, ": ", flag.text));
          break;
      }
    }
  }
  // A few that must be there.
  for (const char* name :
       {"-np", "--num-proc", "-H", "-hostfile", "-cb", "-prefix-timestamp",
        "--log-hide-timestamp", "--autotune-gaussian-process-noise", "--jsrun",
        "--binding-args", "--min-num-proc", "-x"}) {
    EXPECT_TRUE(seen.count(name)) << name;
  }
}

TEST(HorovodFlagsTest, ARealisticHorovodrunCommandLine) {
  auto o = Parse({"-np", "4", "-H", "a:2,b:2", "--fusion-threshold-mb", "32",
                  "--cycle-time-ms", "2", "--timeline-filename", "/tmp/t.json",
                  "--no-stall-check", "--network-interface", "eth0", "-p",
                  "2222", "--verbose", "python", "train.py"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->np, 4);
  ASSERT_EQ(o->hosts.size(), 2u);
  EXPECT_EQ(o->hosts[1].name, "b");
  EXPECT_EQ(o->knobs.cycle_time, absl::Milliseconds(2));
  EXPECT_EQ(o->knobs.stall_check, absl::ZeroDuration());
  EXPECT_EQ(o->knobs.stall_shutdown, absl::ZeroDuration());
  EXPECT_EQ(o->worker_vars, (Vars{{"KOLO_FUSION_THRESHOLD", "33554432"},
                                  {"KOLO_TIMELINE", "/tmp/t.json"}}));
  EXPECT_EQ(o->network_interfaces, std::vector<std::string>{"eth0"});
  EXPECT_EQ(o->ssh_port, 2222);
  EXPECT_TRUE(o->verbose);
  EXPECT_EQ(o->knobs.log_level, "debug");
  EXPECT_TRUE(o->notices.empty());
  EXPECT_EQ(o->command, (std::vector<std::string>{"python", "train.py"}));
}

TEST(HorovodFlagsTest, MappedFlags) {
  auto o = Parse({"-np",
                  "1",
                  "--cache-capacity",
                  "0",
                  "--hierarchical-allreduce",
                  "--gloo-timeout-seconds",
                  "45",
                  "--no-hierarchical-allreduce",
                  "-i",
                  "/k",
                  "--network-interfaces",
                  "eth0,ib0",
                  "--network-interface",
                  "eth0",
                  "--output-filename",
                  "/tmp/o",
                  "-prefix-timestamp",
                  "--min-num-proc",
                  "1",
                  "--max-num-proc",
                  "3",
                  "--stall-check-warning-time-seconds",
                  "7",
                  "--stall-check-shutdown-time-seconds",
                  "9",
                  "--log-level",
                  "WARNING",
                  "--verbose",
                  "cmd"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->worker_vars, (Vars{{"KOLO_CACHE_CAPACITY", "0"},
                                  {"KOLO_HIERARCHICAL", "0"},
                                  {"KOLO_TIMEOUT_SECONDS", "45"}}));
  EXPECT_EQ(o->ssh_identity_file, "/k");
  EXPECT_EQ(o->network_interfaces, (std::vector<std::string>{"eth0", "ib0"}));
  EXPECT_EQ(o->output_dir, "/tmp/o");
  EXPECT_TRUE(o->prefix_timestamp);
  EXPECT_EQ(o->min_np, 1);
  EXPECT_EQ(o->max_np, 3);
  EXPECT_EQ(o->knobs.stall_check, absl::Seconds(7));
  EXPECT_EQ(o->knobs.stall_shutdown, absl::Seconds(9));
  EXPECT_EQ(o->knobs.log_level, "warning");  // --log-level beats --verbose
  auto later = Parse({"-np", "1", "--no-stall-check", "--stall-check", "-v"});
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_TRUE(later->version);
  auto off = Parse(
      {"-np", "1", "--log-with-timestamp", "--log-hide-timestamp", "cmd"});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->prefix_timestamp);
  auto cb = Parse({"-cb"});
  ASSERT_TRUE(cb.ok()) << cb.status();
  EXPECT_TRUE(cb->check_build);
}

TEST(HorovodFlagsTest, BadValuesNameTheFlag) {
  EXPECT_EQ(Parse({"-np", "1", "--fusion-threshold-mb", "-1", "c"})
                .status()
                .message(),
            "--fusion-threshold-mb: expected megabytes, an integer from 0 (no "
            "fusion) to 1048576, got '-1'");
  EXPECT_EQ(Parse({"-np", "1", "-p", "70000", "c"}).status().message(),
            "-p: expected a port number (1-65535), got '70000'");
  EXPECT_EQ(Parse({"-np", "1", "--network-interface", "eth0,", "c"})
                .status()
                .message(),
            "--network-interface: expected interface names, comma-separated "
            "(eth0,ib0), got 'eth0,'");
  EXPECT_EQ(Parse({"-np", "1", "--gloo-timeout-seconds", "0", "c"})
                .status()
                .message(),
            "--gloo-timeout-seconds: expected seconds above 0, got '0'");
}

TEST(HorovodFlagsTest, ExtraEnv) {
  auto o = Parse({"-np", "1", "-x", "A=1", "-x", "HOME", "-x", "E=", "c"},
                 {{"HOME", "/home/u"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->extra_env, (Vars{{"A", "1"}, {"HOME", "/home/u"}, {"E", ""}}));
  EXPECT_EQ(Parse({"-np", "1", "-x", "FOO", "c"}).status().message(),
            "-x FOO: FOO is not set in kolorun's environment; give -x "
            "FOO=VALUE, or set it before running kolorun");
  EXPECT_EQ(Parse({"-np", "1", "-x", "1A=2", "c"}).status().message(),
            "-x '1A=2': expected NAME or NAME=VALUE, with NAME letters, digits "
            "and _ (not starting with a digit)");
  EXPECT_FALSE(Parse({"-np", "1", "-x", "=2", "c"}).ok());
}

constexpr char kConfig[] = R"(
controller: gloo
params:
  fusion_threshold_mb: 64
  cycle_time_ms: 3.5
  cache_capacity: 256
  hierarchical_allreduce: true
timeline:
  filename: /tmp/file.json
  mark_cycles: false
stall_check:
  enabled: false
library_options:
  gloo_timeout_seconds: 20
logging:
  level: INFO
  with_timestamp: true
autotune:
  enabled: null
)";

TEST(ConfigFileTest, KeysBecomeFlags) {
  auto entries = ParseConfigFile("c.yaml", kConfig);
  ASSERT_TRUE(entries.ok()) << entries.status();
  std::vector<std::string> flags;
  for (const ConfigEntry& e : *entries) flags.push_back(e.flag + "=" + e.value);
  EXPECT_EQ(
      flags,
      (std::vector<std::string>{
          "--gloo=", "--fusion-threshold-mb=64", "--cycle-time-ms=3.5",
          "--cache-capacity=256", "--hierarchical-allreduce=",
          "--timeline-filename=/tmp/file.json", "--no-timeline-mark-cycles=",
          "--no-stall-check=", "--gloo-timeout-seconds=20", "--log-level=INFO",
          "--log-with-timestamp="}));
  EXPECT_EQ(entries->front().key, "controller");
  EXPECT_EQ((*entries)[1].key, "params.fusion_threshold_mb");
}

TEST(ConfigFileTest, TheCommandLineWinsInAnyOrder) {
  auto o = Parse(
      {"-np", "1", "--fusion-threshold-mb", "32", "--config-file", "c.yaml",
       "--cycle-time-ms", "2", "--stall-check", "--log-level", "error", "cmd"},
      {}, {{"c.yaml", kConfig}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->config_file, "c.yaml");
  EXPECT_EQ(o->worker_vars, (Vars{{"KOLO_FUSION_THRESHOLD", "33554432"},
                                  {"KOLO_CACHE_CAPACITY", "256"},
                                  {"KOLO_HIERARCHICAL", "1"},
                                  {"KOLO_TIMELINE", "/tmp/file.json"},
                                  {"KOLO_TIMEOUT_SECONDS", "20"}}));
  EXPECT_EQ(o->knobs.cycle_time, absl::Milliseconds(2));
  EXPECT_EQ(o->knobs.stall_check, absl::Seconds(60));  // --stall-check won
  EXPECT_EQ(o->knobs.log_level, "error");
  EXPECT_TRUE(o->prefix_timestamp);
  EXPECT_EQ(o->notices.size(), 2u);  // controller: gloo, mark_cycles
  EXPECT_TRUE(
      absl::StartsWith(o->notices[0], "config file c.yaml: controller: "))
      << o->notices[0];

  auto file_only = Parse({"-np", "1", "--config-file", "c.yaml", "cmd"}, {},
                         {{"c.yaml", kConfig}});
  ASSERT_TRUE(file_only.ok()) << file_only.status();
  EXPECT_EQ(file_only->knobs.cycle_time, absl::Microseconds(3500));
  EXPECT_EQ(file_only->knobs.stall_check, absl::ZeroDuration());
  EXPECT_EQ(file_only->knobs.log_level, "info");
  EXPECT_TRUE(file_only->log_level_given);
}

TEST(ConfigFileTest, ErrorsNameTheFileAndTheKey) {
  auto parse = [](const std::string& text) {
    return std::string(Parse({"-np", "1", "--config-file", "/x/c.yaml", "cmd"},
                             {}, {{"/x/c.yaml", text}})
                           .status()
                           .message());
  };
  EXPECT_EQ(parse("params:\n  fusion_treshold_mb: 3\n"),
            "config file /x/c.yaml: unknown key 'params.fusion_treshold_mb' "
            "(did you mean 'params.fusion_threshold_mb'?)");
  EXPECT_EQ(parse("stall_chek:\n  enabled: false\n"),
            "config file /x/c.yaml: unknown key 'stall_chek' (did you mean "
            "'stall_check'?)");
  EXPECT_EQ(parse("frobnicate: 1\n"),
            "config file /x/c.yaml: unknown key 'frobnicate'; the known keys "
            "are horovodrun's (controller, params, autotune, timeline, "
            "stall_check, library_options, logging)");
  EXPECT_EQ(parse("params:\n  cache_capacity: abc\n"),
            "config file /x/c.yaml: params.cache_capacity: expected an "
            "integer, got 'abc'");
  EXPECT_EQ(parse("stall_check:\n  enabled: [1]\n"),
            "config file /x/c.yaml: stall_check.enabled: expected true or "
            "false, got a list");
  EXPECT_EQ(parse("params: 3\n"),
            "config file /x/c.yaml: params: expected a mapping, got '3'");
  EXPECT_EQ(parse("params:\n  fusion_threshold_mb: -4\n"),
            "config file /x/c.yaml: params.fusion_threshold_mb: expected "
            "megabytes, an integer from 0 (no fusion) to 1048576, got '-4'");
  EXPECT_TRUE(absl::StartsWith(parse("controller: mpi\n"),
                               "config file /x/c.yaml: controller: kolorun "
                               "starts the workers itself"));
  EXPECT_TRUE(absl::StartsWith(parse("params: [\n"),
                               "config file /x/c.yaml: not YAML: "));
  EXPECT_EQ(std::string(Parse({"-np", "1", "--config-file", "none.yaml", "c"})
                            .status()
                            .message()),
            "config file none.yaml: no such file");
}

TEST(HorovodVariablesTest, NoticesForTheUnusedOnly) {
  const Env env = {
      {"HOROVOD_AUTOTUNE", "1"},       {"HOROVOD_FUSION_THRESHOLD", "1000"},
      {"HOROVOD_RANK", "0"},           {"HOROVOD_GLOO_IFACE", "eth0"},
      {"HOROVOD_TORUS_ALLREDUCE", ""}, {"HOROVOD_MY_OWN", "1"}};
  EXPECT_EQ(HorovodVariableNotices(env),
            (std::vector<std::string>{
                "HOROVOD_GLOO_IFACE is not used by kolo: use kolorun "
                "--network-interface IF (or KOLO_IFACE)"}));
  auto o = Parse({"-np", "1", "c"}, env);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->notices, HorovodVariableNotices(env));
  EXPECT_TRUE(o->autotune.enabled);  // HOROVOD_AUTOTUNE=1 is honoured
  std::set<std::string> names;
  for (const HorovodVariable& v : HorovodVariables()) {
    EXPECT_TRUE(names.insert(v.name).second) << v.name;
  }
}

TEST(HorovodFlagsTest, AutotuneFlagsOverTheirVariables) {
  auto o = Parse({"-np", "1", "--autotune", "--autotune-warmup-samples", "5",
                  "--autotune-log-file", "/tmp/a.csv",
                  "--autotune-gaussian-process-noise", "0.25", "c"},
                 {{"KOLO_AUTOTUNE_STEPS_PER_SAMPLE", "7"},
                  {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "9"},
                  {"KOLO_AUTOTUNE_WARMUP_SAMPLES", "1"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->autotune.enabled);
  EXPECT_EQ(o->autotune.warmup_samples, 5);
  EXPECT_EQ(o->autotune.steps_per_sample, 7);
  EXPECT_EQ(o->autotune.max_samples, 9);
  EXPECT_EQ(o->autotune.noise, 0.25);
  EXPECT_EQ(o->autotune.log_file, "/tmp/a.csv");
  EXPECT_TRUE(o->notices.empty());
  auto off =
      Parse({"-np", "1", "--no-autotune", "c"}, {{"KOLO_AUTOTUNE", "1"}});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->autotune.enabled);
  EXPECT_EQ(
      std::string(Parse({"-np", "1", "--autotune-steps-per-sample", "0", "c"})
                      .status()
                      .message()),
      "--autotune-steps-per-sample: expected a number of steps, 1 or "
      "more, got '0'");
  EXPECT_EQ(std::string(Parse({"-np", "1", "c"}, {{"KOLO_AUTOTUNE", "yes"}})
                            .status()
                            .message()),
            "KOLO_AUTOTUNE: expected 0 or 1, got 'yes'");
}

TEST(HorovodVariablesTest, StallCheckDisable) {
  auto o = Parse({"-np", "1", "c"}, {{"HOROVOD_STALL_CHECK_DISABLE", "1"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->knobs.stall_check, absl::ZeroDuration());
  auto on = Parse({"-np", "1", "--stall-check", "c"},
                  {{"HOROVOD_STALL_CHECK_DISABLE", "1"}});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(on->knobs.stall_check, absl::Seconds(60));
}

TEST(CheckBuildTest, ListsWhatKoloHas) {
  const std::string text = CheckBuildText(TorchState::kYes);
  EXPECT_TRUE(absl::StrContains(
      text, "Available Frameworks:\n    [X] PyTorch (kolo.torch)\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(CheckBuildText(TorchState::kNo),
                                "    [ ] PyTorch (python3 -c"));
  for (const char* line :
       {"Available Controllers:\n    [X] kolo coordinator\n",
        "    [X] TCP ring\n", "    [X] shared memory\n", " NCCL"}) {
    EXPECT_TRUE(absl::StrContains(text, line)) << line << "\n" << text;
  }
}

}  // namespace
}  // namespace kolo::launcher
