// Unit tests of kolorun's pure parts: argument parsing, host/slot assignment,
// local host detection, worker environment, shell quoting of the remote
// command, template expansion, the line prefixer and the guard's records.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/knobs.h"
#include "gtest/gtest.h"
#include "launcher/args.h"
#include "launcher/command_line.h"
#include "launcher/guard.h"
#include "launcher/hostfile.h"
#include "launcher/line_prefixer.h"

namespace kolo::launcher {
namespace {

using Env = std::map<std::string, std::string>;

absl::StatusOr<LaunchOptions> Parse(std::vector<std::string> args,
                                    const Env& env = {}) {
  return ParseArgs(args, env);
}

TEST(ParseArgsTest, MinimalCommandLine) {
  auto o = Parse({"-np", "3", "python", "train.py", "--lr", "0.1"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->np, 3);
  ASSERT_EQ(o->hosts.size(), 1u);
  EXPECT_EQ(o->hosts[0].name, "localhost");
  EXPECT_EQ(o->hosts[0].slots, 3);
  EXPECT_EQ(o->command,
            (std::vector<std::string>{"python", "train.py", "--lr", "0.1"}));
  EXPECT_EQ(o->knobs.start_timeout, absl::Seconds(30));
  EXPECT_EQ(o->knobs.heartbeat_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(o->ssh_cmd, "ssh -o BatchMode=yes");
  EXPECT_TRUE(o->launcher_cmd.empty());
}

TEST(ParseArgsTest, TlsFlags) {
  auto o = Parse({"-np", "2", "--tls", "./train"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->tls);
  EXPECT_FALSE(o->tls_files.enabled());
  o = Parse({"-np", "2", "--tls-cert", "c.pem", "--tls-key", "k.pem",
             "--tls-ca", "ca.pem", "./train"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->tls);  // the files imply it (launcher/job_tls.h)
  EXPECT_EQ(o->tls_files.cert, "c.pem");
  EXPECT_EQ(o->tls_files.key, "k.pem");
  EXPECT_EQ(o->tls_files.ca, "ca.pem");
  EXPECT_EQ(Parse({"-np", "2", "--tls-ca=", "./train"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ParseArgsTest, DoubleDashEndsFlags) {
  auto o = Parse({"-np", "1", "--", "-weird-command", "-np", "7"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->np, 1);
  EXPECT_EQ(o->command,
            (std::vector<std::string>{"-weird-command", "-np", "7"}));
}

// Everything from the worker command on is the worker's, even what looks
// like kolorun's flags (CLI11 stops at the command; -np is rewritten for it
// only where it is kolorun's).
TEST(ParseArgsTest, TheCommandKeepsItsFlags) {
  auto o = Parse({"-np", "2", "./train", "-np", "4", "--lr", "0.1", "-H", "x",
                  "--np=3", "--", "-h", "--blacklist-cooldown-range=1,2",
                  "--launcher-cmd="});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->np, 2);
  EXPECT_EQ(o->hosts[0].name, "localhost");
  EXPECT_FALSE(o->help);
  EXPECT_EQ(o->command,
            (std::vector<std::string>{
                "./train", "-np", "4", "--lr", "0.1", "-H", "x", "--np=3", "--",
                "-h", "--blacklist-cooldown-range=1,2", "--launcher-cmd="}));
  auto empty = Parse({"-np", "1", "", "x"});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->command, (std::vector<std::string>{"", "x"}));
}

// Every spelling of a flag, the last of a repeated one winning, and errors
// that name the flag as it was typed.
TEST(ParseArgsTest, SpellingsAndRepeats) {
  for (const char* np : {"-np", "--np", "--num-proc"}) {
    auto o = Parse({np, "3", "cmd"});
    ASSERT_TRUE(o.ok()) << np << ": " << o.status();
    EXPECT_EQ(o->np, 3) << np;
    auto bad = Parse({np, "0", "cmd"});
    EXPECT_EQ(bad.status().message(),
              absl::StrCat(np,
                           ": expected a positive number of workers, got "
                           "'0'"));
    auto last = Parse({np});
    EXPECT_EQ(last.status().message(),
              absl::StrCat("flag '", np, "' needs a value"));
  }
  auto slots = Parse({"--host-discovery-script", "s", "--slots", "0", "cmd"});
  EXPECT_EQ(slots.status().message(),
            "--slots: expected a positive number of slots, got '0'");
  auto hosts = Parse({"-np", "2", "--hosts=a:1,b", "cmd"});
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_EQ(hosts->hosts.size(), 2u);

  auto repeated = Parse({"-np", "1", "--np", "2", "-H", "a", "--hosts", "b:2",
                         "--log-level", "info", "--log-level=error", "cmd"});
  ASSERT_TRUE(repeated.ok()) << repeated.status();
  EXPECT_EQ(repeated->np, 2);
  ASSERT_EQ(repeated->hosts.size(), 1u);
  EXPECT_EQ(repeated->hosts[0].name, "b");
  EXPECT_EQ(repeated->knobs.log_level, "error");
  // Each value is checked, in order: the first bad one is the error.
  auto first_bad = Parse({"-np", "0", "-np", "x", "cmd"});
  EXPECT_EQ(first_bad.status().message(),
            "-np: expected a positive number of workers, got '0'");

  auto cooldown =
      Parse({"-np", "1", "--min-np", "1", "--blacklist-cooldown-range", "1",
             "2", "--blacklist-cooldown-range=3,4", "cmd"});
  ASSERT_TRUE(cooldown.ok()) << cooldown.status();
  EXPECT_EQ(cooldown->cooldown_lo, absl::Seconds(3));
  EXPECT_EQ(cooldown->cooldown_hi, absl::Seconds(4));
  EXPECT_EQ(cooldown->command, std::vector<std::string>{"cmd"});
  auto three = Parse({"-np", "1", "--min-np", "1",
                      "--blacklist-cooldown-range=3,9,10", "cmd"});
  EXPECT_NE(three.status().message().find("got '3' '9,10'"), std::string::npos)
      << three.status();
  // A flag's values are taken whatever they look like.
  auto dashes =
      Parse({"-np", "1", "--ssh-cmd", "-x", "--coordinator-addr", "--", "cmd"});
  ASSERT_TRUE(dashes.ok()) << dashes.status();
  EXPECT_EQ(dashes->ssh_cmd, "-x");
  EXPECT_EQ(dashes->coordinator_addr, "--");
  EXPECT_EQ(dashes->command, std::vector<std::string>{"cmd"});
}

// "--flag=" is the empty value, never the next argument: an unset variable
// in --launcher-cmd="$T" must not make the command's first word the template.
TEST(ParseArgsTest, AnEmptyInlineValueIsEmpty) {
  auto o = Parse({"-np", "1", "--launcher-cmd=", "python", "train.py"});
  EXPECT_EQ(o.status().message(), "--launcher-cmd: empty template");
  auto np = Parse({"--np=", "2", "cmd"});
  EXPECT_EQ(np.status().message(),
            "--np: expected a positive number of workers, got ''");
  auto cooldown = Parse(
      {"-np", "1", "--min-np", "1", "--blacklist-cooldown-range=", "cmd"});
  EXPECT_NE(cooldown.status().message().find("got '' ''"), std::string::npos)
      << cooldown.status();
}

TEST(ParseArgsTest, FlagsWithoutAValueRefuseOne) {
  for (const char* arg : {"--graceful-term=1", "--help=x", "--version=no"}) {
    auto o = Parse({"-np", "1", "--min-np", "1", arg, "cmd"});
    EXPECT_EQ(o.status().message(), absl::StrCat("unknown flag '", arg, "'"));
  }
  for (const char* arg : {"-", "-5", "-q", "--frob=1"}) {
    auto o = Parse({"-np", "1", arg, "cmd"});
    EXPECT_EQ(o.status().message(), absl::StrCat("unknown flag '", arg, "'"));
  }
}

TEST(ParseArgsTest, AllFlags) {
  auto o = Parse({"--np=4", "-H", "a:2,b:2", "--ssh-cmd", "ssh -p 2222",
                  "--launcher-cmd", "ip netns exec {host}", "--start-timeout",
                  "2.5", "--heartbeat-timeout-seconds=3", "--log-level",
                  "debug", "--coordinator-addr", "10.0.0.1", "cmd"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->np, 4);
  ASSERT_EQ(o->hosts.size(), 2u);
  EXPECT_EQ(o->ssh_cmd, "ssh -p 2222");
  EXPECT_TRUE(o->ssh_cmd_given);
  EXPECT_EQ(o->launcher_cmd, "ip netns exec {host}");
  EXPECT_EQ(o->knobs.start_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(o->knobs.heartbeat_timeout, absl::Seconds(3));
  EXPECT_EQ(o->knobs.log_level, "debug");
  EXPECT_EQ(o->coordinator_addr, "10.0.0.1");
  EXPECT_EQ(o->command, std::vector<std::string>{"cmd"});
}

TEST(ParseArgsTest, MetricsAndEvents) {
  auto o = Parse({"-np", "2", "cmd"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->metrics_port, -1);  // off
  EXPECT_EQ(o->metrics_address, "127.0.0.1");
  EXPECT_EQ(o->events, "");
  o = Parse({"-np", "2", "--metrics-port", "9464", "--metrics-address=0.0.0.0",
             "--events", "/tmp/e.jsonl", "cmd"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->metrics_port, 9464);
  EXPECT_EQ(o->metrics_address, "0.0.0.0");
  EXPECT_EQ(o->events, "/tmp/e.jsonl");
  o = Parse({"-np", "2", "--metrics-port", "x", "cmd"});
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().message(),
            "--metrics-port: expected a port 0..65535, got 'x'");
}

TEST(ParseArgsTest, HelpAndVersionNeedNothingElse) {
  auto h = Parse({"-h"});
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->help);
  auto v = Parse({"--version"});
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->version);
  EXPECT_NE(UsageText().find("--launcher-cmd"), std::string::npos);
  EXPECT_NE(UsageText().find("not timed"), std::string::npos);
}

TEST(ParseArgsTest, UsageErrorsNameTheProblem) {
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  } cases[] = {
      {{"-np", "2", "--frobnicate", "x"}, "--frobnicate"},
      {{"cmd"}, "-np"},
      {{"-np", "2"}, "no command"},
      {{"-np", "0", "cmd"}, "-np"},
      {{"-np", "x", "cmd"}, "'x'"},
      {{"-np"}, "needs a value"},
      {{"-np", "5", "-H", "a:2,b:2", "cmd"}, "4 slots"},
      {{"-np", "1", "-H", "a:0", "cmd"}, "bad slot count"},
      {{"-np", "1", "-H", "a,,b", "cmd"}, "empty host"},
      {{"-np", "1", "-H", ":3", "cmd"}, "empty host name"},
      {{"-np", "1", "--start-timeout", "-1", "cmd"}, "--start-timeout"},
      {{"-np", "1", "--log-level", "loud", "cmd"}, "loud"},
      {{"-np", "1", "--cycle-time-ms", "0", "cmd"}, "--cycle-time-ms"},
      {{"-np", "1", "--cycle-time-ms=-2", "cmd"}, "--cycle-time-ms"},
      {{"-np", "1", "--cycle-time-ms", "fast", "cmd"}, "'fast'"},
      {{"-np", "1", "--cycle-time-ms"}, "needs a value"},
      {{"-np", "1", "--stall-check-time-seconds", "-1", "cmd"},
       "--stall-check-time-seconds"},
      {{"-np", "1", "--stall-check-time-seconds", "soon", "cmd"}, "'soon'"},
      {{"-np", "1", "--stall-shutdown-time-seconds", "-0.5", "cmd"},
       "--stall-shutdown-time-seconds"},
      {{"-np", "1", "--stall-shutdown-time-seconds=x", "cmd"},
       "--stall-shutdown-time-seconds"},
  };
  for (const Case& c : cases) {
    auto o = Parse(c.args);
    ASSERT_FALSE(o.ok()) << c.args[0];
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(o.status().message().find(c.needle), absl::string_view::npos)
        << o.status().message() << " should mention " << c.needle;
  }
}

TEST(ParseArgsTest, StartTimeoutFromEnvironment) {
  auto a = Parse({"-np", "1", "cmd"}, {{"HOROVOD_START_TIMEOUT", "12"}});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->knobs.start_timeout, absl::Seconds(12));
  auto b = Parse({"-np", "1", "cmd"}, {{"HOROVOD_START_TIMEOUT", "12"},
                                       {"KOLO_START_TIMEOUT", "7"}});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->knobs.start_timeout, absl::Seconds(7));
  auto c = Parse({"-np", "1", "--start-timeout", "3", "cmd"},
                 {{"KOLO_START_TIMEOUT", "7"}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->knobs.start_timeout, absl::Seconds(3));
  auto bad = Parse({"-np", "1", "cmd"}, {{"KOLO_START_TIMEOUT", "soon"}});
  EXPECT_FALSE(bad.ok());
}

TEST(ParseArgsTest, NegotiationFlagsDefaults) {
  auto o = Parse({"-np", "1", "cmd"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->knobs.cycle_time, absl::Milliseconds(1));
  EXPECT_EQ(o->knobs.stall_check, absl::Seconds(60));
  EXPECT_EQ(o->knobs.stall_shutdown, absl::ZeroDuration());
  EXPECT_NE(UsageText().find("--cycle-time-ms"), std::string::npos);
  EXPECT_NE(UsageText().find("--stall-check-time-seconds"), std::string::npos);
  EXPECT_NE(UsageText().find("--stall-shutdown-time-seconds"),
            std::string::npos);
}

TEST(ParseArgsTest, NegotiationFlags) {
  auto o = Parse({"-np", "2", "--cycle-time-ms", "2.5",
                  "--stall-check-time-seconds=0",
                  "--stall-shutdown-time-seconds", "90", "cmd"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->knobs.cycle_time, absl::Microseconds(2500));
  EXPECT_EQ(o->knobs.stall_check, absl::ZeroDuration());  // 0: no warning
  EXPECT_EQ(o->knobs.stall_shutdown, absl::Seconds(90));
  EXPECT_EQ(o->command, std::vector<std::string>{"cmd"});
}

TEST(ParseArgsTest, NegotiationFlagsFromEnvironmentAndAliases) {
  const Env horovod = {{"HOROVOD_CYCLE_TIME", "5"},
                       {"HOROVOD_STALL_CHECK_TIME_SECONDS", "30"},
                       {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "120"}};
  auto a = Parse({"-np", "1", "cmd"}, horovod);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->knobs.cycle_time, absl::Milliseconds(5));
  EXPECT_EQ(a->knobs.stall_check, absl::Seconds(30));
  EXPECT_EQ(a->knobs.stall_shutdown, absl::Seconds(120));

  // KOLO_* wins over HOROVOD_*.
  Env both = horovod;
  both["KOLO_CYCLE_TIME_MS"] = "0.5";
  both["KOLO_STALL_CHECK_TIME_SECONDS"] = "10";
  both["KOLO_STALL_SHUTDOWN_TIME_SECONDS"] = "0";
  auto b = Parse({"-np", "1", "cmd"}, both);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->knobs.cycle_time, absl::Microseconds(500));
  EXPECT_EQ(b->knobs.stall_check, absl::Seconds(10));
  EXPECT_EQ(b->knobs.stall_shutdown, absl::ZeroDuration());

  // A flag wins over both.
  auto c =
      Parse({"-np", "1", "--cycle-time-ms", "3", "--stall-check-time-seconds",
             "4", "--stall-shutdown-time-seconds", "5", "cmd"},
            both);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->knobs.cycle_time, absl::Milliseconds(3));
  EXPECT_EQ(c->knobs.stall_check, absl::Seconds(4));
  EXPECT_EQ(c->knobs.stall_shutdown, absl::Seconds(5));

  // Empty counts as unset.
  auto d = Parse({"-np", "1", "cmd"}, {{"KOLO_CYCLE_TIME_MS", ""}});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->knobs.cycle_time, absl::Milliseconds(1));

  // A bad value is refused, naming the variable it came from.
  for (const auto& [var, value] :
       std::vector<std::pair<std::string, std::string>>{
           {"KOLO_CYCLE_TIME_MS", "0"},
           {"HOROVOD_CYCLE_TIME", "soon"},
           {"KOLO_STALL_CHECK_TIME_SECONDS", "-1"},
           {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "never"},
           {"HOROVOD_START_TIMEOUT", "0"},
           {"KOLO_HEARTBEAT_TIMEOUT_SECONDS", "x"}}) {
    auto bad = Parse({"-np", "1", "cmd"}, {{var, value}});
    ASSERT_FALSE(bad.ok()) << var << "=" << value;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(var), absl::string_view::npos)
        << bad.status().message();
    EXPECT_NE(bad.status().message().find(value), absl::string_view::npos)
        << bad.status().message();
  }
}

// The flags that are knobs (common/knobs.h): the help text gives the table's
// defaults; --log-level over KOLO_LOG_LEVEL over HOROVOD_LOG_LEVEL, and only
// the flag is passed on to workers.
TEST(ParseArgsTest, KnobFlagsComeFromTheTable) {
  const std::string usage = UsageText();
  EXPECT_EQ(usage.find("<--"), std::string::npos) << "a default not filled in";
  for (const Knob* k :
       {&knobs::kStartTimeout, &knobs::kHeartbeatTimeout, &knobs::kCycleTime,
        &knobs::kStallCheck, &knobs::kStallShutdown, &knobs::kLogLevel}) {
    EXPECT_NE(usage.find(k->flag), std::string::npos) << k->flag;
    EXPECT_NE(usage.find(k->variable), std::string::npos) << k->variable;
    if (k->alias != nullptr) {
      EXPECT_NE(usage.find(k->alias), std::string::npos) << k->alias;
    }
    if (k->type == KnobType::kDuration) {
      EXPECT_NE(usage.find(absl::StrCat(
                    "Default: ", KnobDefaultText(*k, KnobSpelling::kFlag))),
                std::string::npos)
          << k->flag;
    }
  }
  EXPECT_NE(usage.find("HOROVOD_LOG_LEVEL, or\n                               "
                       "warn."),
            std::string::npos);

  auto none = Parse({"-np", "1", "cmd"});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->knobs.log_level, "warn");
  EXPECT_FALSE(none->log_level_given);
  auto env = Parse({"-np", "1", "cmd"}, {{"HOROVOD_LOG_LEVEL", "Info"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->knobs.log_level, "info");
  EXPECT_FALSE(env->log_level_given);
  auto flag = Parse({"-np", "1", "--log-level=ERROR", "cmd"},
                    {{"KOLO_LOG_LEVEL", "info"}});
  ASSERT_TRUE(flag.ok()) << flag.status();
  EXPECT_EQ(flag->knobs.log_level, "error");
  EXPECT_TRUE(flag->log_level_given);
  // A bad variable is refused, naming it, the value and what is allowed.
  auto bad = Parse({"-np", "1", "cmd"}, {{"KOLO_LOG_LEVEL", "loud"}});
  EXPECT_EQ(bad.status().message(),
            "bad value KOLO_LOG_LEVEL='loud': expected trace, debug, info, "
            "warn (or warning), error, critical (or fatal) or off");
  // kolorun does not read the knobs that are not its own.
  auto other = Parse(
      {"-np", "1", "cmd"},
      {{"KOLO_TIMEOUT_SECONDS", "x"}, {"KOLO_HEARTBEAT_INTERVAL_MS", "x"}});
  EXPECT_TRUE(other.ok()) << other.status();
}

TEST(ParseArgsTest, ElasticFlagsAndTheirDefaults) {
  auto d = Parse({"-np", "2", "--min-np", "1", "cmd"});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->elastic());
  EXPECT_EQ(d->max_np, 0);
  EXPECT_EQ(d->cooldown_lo, absl::Seconds(2));
  EXPECT_EQ(d->cooldown_hi, absl::Seconds(60));
  EXPECT_EQ(d->discovery_interval, absl::Seconds(1));
  EXPECT_EQ(d->slots_per_host, 1);
  EXPECT_FALSE(d->graceful_term);
  EXPECT_TRUE(d->discovery_script.empty());

  auto o = Parse({"-np", "3", "--min-np", "2", "--max-np", "5",
                  "--blacklist-cooldown-range", "1.5", "30", "--graceful-term",
                  "--reset-limit", "4", "cmd"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->min_np, 2);
  EXPECT_EQ(o->max_np, 5);
  EXPECT_EQ(o->cooldown_lo, absl::Milliseconds(1500));
  EXPECT_EQ(o->cooldown_hi, absl::Seconds(30));
  EXPECT_TRUE(o->graceful_term);
  EXPECT_EQ(o->reset_limit, 4);
  EXPECT_EQ(o->command, std::vector<std::string>{"cmd"});

  auto eq = Parse(
      {"-np", "1", "--min-np=1", "--blacklist-cooldown-range=3,9", "cmd"});
  ASSERT_TRUE(eq.ok()) << eq.status();
  EXPECT_EQ(eq->cooldown_lo, absl::Seconds(3));
  EXPECT_EQ(eq->cooldown_hi, absl::Seconds(9));
}

TEST(ParseArgsTest, HostDiscoveryScript) {
  // No -np: every discovered slot; elastic with --min-np 1.
  auto o = Parse({"--host-discovery-script", "./hosts.sh",
                  "--discovery-interval-seconds", "0.25", "--slots-per-host",
                  "4", "--max-np", "8", "cmd"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->discovery_script, "./hosts.sh");
  EXPECT_EQ(o->discovery_interval, absl::Milliseconds(250));
  EXPECT_EQ(o->slots_per_host, 4);
  EXPECT_TRUE(o->elastic());
  EXPECT_EQ(o->min_np, 1);
  EXPECT_EQ(o->max_np, 8);
  EXPECT_FALSE(o->np_given);
  EXPECT_TRUE(o->hosts.empty());

  auto np = Parse(
      {"-np", "3", "--host-discovery-script", "s", "--slots", "2", "cmd"});
  ASSERT_TRUE(np.ok()) << np.status();
  EXPECT_TRUE(np->np_given);
  EXPECT_EQ(np->np, 3);
  EXPECT_EQ(np->slots_per_host, 2);
}

TEST(ParseArgsTest, SlotsPerHostAppliesToHostsWithoutACount) {
  auto o = Parse({"-np", "5", "-H", "a,b:1", "--slots-per-host", "4", "cmd"});
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->hosts.size(), 2u);
  EXPECT_EQ(o->hosts[0].slots, 4);
  EXPECT_EQ(o->hosts[1].slots, 1);
}

TEST(ParseArgsTest, ElasticValidationMessages) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"-np", "2", "--min-np", "3", "--max-np", "2", "cmd"},
       "--max-np 2 is less than --min-np 3"},
      {{"-np", "2", "--min-np", "3", "cmd"}, "--min-np 3 is more than -np 2"},
      {{"-np", "4", "--min-np", "1", "--max-np", "3", "cmd"},
       "--max-np 3 is less than -np 4"},
      {{"--host-discovery-script", "s", "--min-np", "3", "--max-np", "2",
        "cmd"},
       "--max-np 2 is less than --min-np 3"},
      {{"-np", "2", "-H", "a:2", "--host-discovery-script", "s", "cmd"},
       "-H and --host-discovery-script are exclusive"},
      {{"--host-discovery-script", "", "cmd"},
       "--host-discovery-script: empty command"},
      {{"-np", "2", "--graceful-term", "cmd"},
       "--graceful-term applies to elastic jobs only"},
      {{"-np", "2", "--blacklist-cooldown-range", "1", "2", "cmd"},
       "--blacklist-cooldown-range applies to elastic jobs only"},
      {{"-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "0", "2",
        "cmd"},
       "expected LO HI, seconds with 0 < LO <= HI, got '0' '2'"},
      {{"-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "5", "2",
        "cmd"},
       "got '5' '2'"},
      {{"-np", "2", "--min-np", "1", "--blacklist-cooldown-range=5", "cmd"},
       "got '5' ''"},
      {{"-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "5"},
       "needs two values"},
      {{"-np", "2", "--discovery-interval-seconds", "1", "cmd"},
       "--discovery-interval-seconds needs --host-discovery-script"},
      {{"--host-discovery-script", "s", "--discovery-interval-seconds", "0",
        "cmd"},
       "--discovery-interval-seconds: expected seconds above 0"},
      {{"--host-discovery-script", "s", "--slots-per-host", "0", "cmd"},
       "--slots-per-host: expected a positive number of slots, got '0'"},
      {{"--min-np", "1", "cmd"}, "missing -np"},
  };
  for (const Case& c : cases) {
    auto o = Parse(c.args);
    ASSERT_FALSE(o.ok()) << c.message;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(o.status().message().find(c.message), absl::string_view::npos)
        << o.status().message() << "\nshould contain: " << c.message;
  }
  for (const char* flag :
       {"--host-discovery-script", "--blacklist-cooldown-range",
        "--graceful-term", "--slots-per-host", "--discovery-interval-seconds",
        "--max-np", "KOLO_WORKER_INCARNATION"}) {
    EXPECT_NE(UsageText().find(flag), std::string::npos) << flag;
  }
}

TEST(ParseHostsTest, SlotsDefaultToOne) {
  auto h = ParseHosts("a:3,b,c:1");
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ((*h)[0].name, "a");
  EXPECT_EQ((*h)[0].slots, 3);
  EXPECT_EQ((*h)[1].name, "b");
  EXPECT_EQ((*h)[1].slots, 1);
  EXPECT_EQ((*h)[2].slots, 1);
}

// Found by fuzz/kolorun_args_fuzz.cc: the slots of -H were summed in an int,
// which overflowed (undefined behaviour) for large slot counts.
TEST(ParseHostsTest, HugeSlotCountsDoNotOverflow) {
  auto o = Parse({"-np", "3", "-H", "a:2000000000,b:2000000000", "cmd"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->np, 3);
  ASSERT_EQ(o->hosts.size(), 2u);
  auto many = Parse({"-np", "2147483647", "-H",
                     "a:2147483647,b:2147483647,c:2147483647", "cmd"});
  EXPECT_TRUE(many.ok()) << many.status();
}

TEST(PlanWorkersTest, RanksFillSlotsInHostOrder) {
  auto o = Parse({"-np", "5", "-H", "a:2,b:1,c:3", "cmd"});
  ASSERT_TRUE(o.ok());
  std::vector<WorkerPlan> plan = PlanWorkers(*o, "vm");
  ASSERT_EQ(plan.size(), 5u);
  const char* hosts[] = {"a", "a", "b", "c", "c"};
  int local_rank[] = {0, 1, 0, 0, 1};
  int local_size[] = {2, 2, 1, 2, 2};
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ(plan[r].rank, r);
    EXPECT_EQ(plan[r].worker_id, "w" + std::to_string(r));
    EXPECT_EQ(plan[r].host, hosts[r]);
    EXPECT_EQ(plan[r].local_rank, local_rank[r]);
    EXPECT_EQ(plan[r].local_size, local_size[r]) << r;
    EXPECT_EQ(plan[r].mode, SpawnMode::kSsh);
  }
  EXPECT_FALSE(AllLocal(plan));
}

TEST(PlanWorkersTest, LocalHostsAreLocalUnlessATemplateApplies) {
  EXPECT_TRUE(IsLocalHostName("localhost", "vm"));
  EXPECT_TRUE(IsLocalHostName("127.0.0.1", "vm"));
  EXPECT_TRUE(IsLocalHostName("vm", "vm"));
  EXPECT_FALSE(IsLocalHostName("other", "vm"));
  EXPECT_FALSE(IsLocalHostName("", ""));

  auto o = Parse({"-np", "3", "-H", "localhost:1,vm:1,127.0.0.1:1", "cmd"});
  ASSERT_TRUE(o.ok());
  std::vector<WorkerPlan> plan = PlanWorkers(*o, "vm");
  EXPECT_TRUE(AllLocal(plan));

  auto t = Parse({"-np", "2", "--launcher-cmd", "env X={host}", "cmd"});
  ASSERT_TRUE(t.ok());
  plan = PlanWorkers(*t, "vm");
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].mode, SpawnMode::kTemplate);
  EXPECT_FALSE(AllLocal(plan));

  // --ssh-cmd reaches remote hosts only; localhost stays a local process.
  auto s =
      Parse({"-np", "2", "-H", "localhost,far", "--ssh-cmd", "myssh", "cmd"});
  ASSERT_TRUE(s.ok());
  plan = PlanWorkers(*s, "vm");
  EXPECT_EQ(plan[0].mode, SpawnMode::kLocal);
  EXPECT_EQ(plan[1].mode, SpawnMode::kSsh);
}

TEST(CommandLineTest, WorkerEnvironment) {
  JobInfo job;
  job.job_id = "kolo-1";
  job.coordinator = "127.0.0.1:5000";
  job.size = 4;
  job.knobs.start_timeout = absl::Seconds(30);
  job.knobs.log_level = "info";
  job.log_level_given = true;
  job.knobs.cycle_time = absl::Microseconds(500);
  job.knobs.stall_check = absl::Seconds(45);
  job.knobs.stall_shutdown = absl::ZeroDuration();
  WorkerPlan w{2, "w2", "hostB", 1, 2, SpawnMode::kLocal};
  EnvList env = WorkerEnv(job, w);
  std::map<std::string, std::string> m(env.begin(), env.end());
  EXPECT_EQ(m["KOLO_LAUNCHER"], "kolorun");
  EXPECT_EQ(m["KOLO_COORDINATOR"], "127.0.0.1:5000");
  EXPECT_EQ(m["KOLO_JOB_ID"], "kolo-1");
  EXPECT_EQ(m["KOLO_WORKER_ID"], "w2");
  EXPECT_EQ(m["KOLO_HOSTNAME"], "hostB");
  EXPECT_EQ(m["KOLO_RANK"], "2");
  EXPECT_EQ(m["KOLO_SIZE"], "4");
  EXPECT_EQ(m["KOLO_LOCAL_RANK"], "1");
  EXPECT_EQ(m["KOLO_LOCAL_SIZE"], "2");
  EXPECT_EQ(m["KOLO_START_TIMEOUT"], "30");
  EXPECT_EQ(m["KOLO_LOG_LEVEL"], "info");
  EXPECT_EQ(m["KOLO_CYCLE_TIME_MS"], "0.5");
  EXPECT_EQ(m["KOLO_STALL_CHECK_TIME_SECONDS"], "45");
  EXPECT_EQ(m["KOLO_STALL_SHUTDOWN_TIME_SECONDS"], "0");
  EXPECT_EQ(m.count("KOLO_SECRET"), 0u);
  // horovodrun's variables, read by scripts before init().
  EXPECT_EQ(m["HOROVOD_RANK"], "2");
  EXPECT_EQ(m["HOROVOD_SIZE"], "4");
  EXPECT_EQ(m["HOROVOD_LOCAL_RANK"], "1");
  EXPECT_EQ(m["HOROVOD_LOCAL_SIZE"], "2");
  EXPECT_EQ(m["HOROVOD_CROSS_RANK"], "0");
  EXPECT_EQ(m["HOROVOD_CROSS_SIZE"], "1");
  EXPECT_EQ(m["HOROVOD_HOSTNAME"], "hostB");
}

TEST(CommandLineTest, CrossRanksFollowLocalRanks) {
  // 2 hosts x 2 slots, 3 ranks: a0 a1 b0 -> local ranks 0 1 0, cross ranks
  // 0 0 1 of sizes 2 1 2.
  auto s = Parse({"-np", "3", "-H", "a:2,b:2", "cmd"});
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<WorkerPlan> plan = PlanWorkers(*s, "vm");
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].cross_rank, 0);
  EXPECT_EQ(plan[0].cross_size, 2);
  EXPECT_EQ(plan[1].cross_rank, 0);
  EXPECT_EQ(plan[1].cross_size, 1);
  EXPECT_EQ(plan[2].cross_rank, 1);
  EXPECT_EQ(plan[2].cross_size, 2);
  JobInfo job;
  job.size = 3;
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : WorkerEnv(job, plan[2])) m[k] = v;
  EXPECT_EQ(m["HOROVOD_CROSS_RANK"], "1");
  EXPECT_EQ(m["HOROVOD_CROSS_SIZE"], "2");
  EXPECT_EQ(m["HOROVOD_HOSTNAME"], "b");
}

TEST(CommandLineTest, ElasticWorkerEnvironment) {
  JobInfo job;
  job.job_id = "kolo-1";
  job.coordinator = "127.0.0.1:5000";
  job.size = 2;
  WorkerPlan plain{1, "w1", "a", 1, 2, SpawnMode::kLocal};
  std::map<std::string, std::string> m0;
  for (const auto& [k, v] : WorkerEnv(job, plain)) m0[k] = v;
  EXPECT_EQ(m0.count("KOLO_WORKER_INCARNATION"), 0u);
  EXPECT_EQ(m0.count("KOLO_ELASTIC"), 0u);

  job.elastic = true;
  // w5, third incarnation, slot 3 of its host: the rank hints stay below
  // the size (the coordinator gives the real ranks).
  WorkerPlan later{5, "w5", "b", 3, 4, SpawnMode::kLocal, 2};
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : WorkerEnv(job, later)) m[k] = v;
  EXPECT_EQ(m["KOLO_WORKER_ID"], "w5");
  EXPECT_EQ(m["KOLO_WORKER_INCARNATION"], "2");
  EXPECT_EQ(m["KOLO_ELASTIC"], "1");
  EXPECT_EQ(m["KOLO_SIZE"], "2");
  EXPECT_EQ(m["KOLO_RANK"], "1");
  EXPECT_EQ(m["KOLO_LOCAL_RANK"], "1");
  EXPECT_EQ(m["KOLO_LOCAL_SIZE"], "4");
}

TEST(CommandLineTest, ShellQuote) {
  EXPECT_EQ(ShellQuote("plain-word_1.2/x:y=z,@%+"), "plain-word_1.2/x:y=z,@%+");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("$HOME;rm -rf /"), "'$HOME;rm -rf /'");
}

TEST(CommandLineTest, RemoteCommandCarriesEnvButNeverTheSecret) {
  EnvList env = {{"KOLO_RANK", "1"}, {"KOLO_SECRET", "s3cr3t"}, {"X", "a b"}};
  std::string cmd =
      RemoteCommand(env, "/work dir", {"python", "-c", "print('hi')"});
  EXPECT_EQ(cmd,
            "env KOLO_RANK=1 'X=a b' sh -c 'cd \"$1\" 2>/dev/null; shift; IFS= "
            "read -r "
            "KOLO_SECRET; export KOLO_SECRET; exec \"$@\"' kolo-worker '/work "
            "dir' python -c "
            "'print('\\''hi'\\'')'");
  EXPECT_EQ(cmd.find("s3cr3t"), std::string::npos);
}

TEST(CommandLineTest, TemplateExpansion) {
  EXPECT_EQ(ExpandTemplate("ip netns exec {host}", "ns1"), "ip netns exec ns1");
  EXPECT_EQ(ExpandTemplate("a={host} b={host}", "h"), "a=h b=h");
  EXPECT_EQ(ExpandTemplate("x {host}", "odd host"), "x 'odd host'");
  EXPECT_EQ(ExpandTemplate("no placeholder", "h"), "no placeholder");
}

TEST(CommandLineTest, LaunchArgvPerMode) {
  auto o = Parse({"-np", "1", "--ssh-cmd", "myssh -q", "echo", "hi there"});
  ASSERT_TRUE(o.ok());
  WorkerPlan w{0, "w0", "far", 0, 1, SpawnMode::kLocal};
  EXPECT_EQ(LaunchArgv(*o, w, {}, "/d"),
            (std::vector<std::string>{"echo", "hi there"}));

  w.mode = SpawnMode::kSsh;
  std::vector<std::string> ssh = LaunchArgv(*o, w, {{"K", "v"}}, "/d");
  ASSERT_EQ(ssh.size(), 3u);
  EXPECT_EQ(ssh[0], "/bin/sh");
  EXPECT_EQ(ssh[1], "-c");
  EXPECT_EQ(ssh[2],
            "myssh -q far " + ShellQuote(RemoteCommand({{"K", "v"}}, "/d",
                                                       {"echo", "hi there"})));

  o->launcher_cmd = "env FAKE={host}";
  w.mode = SpawnMode::kTemplate;
  std::vector<std::string> t = LaunchArgv(*o, w, {{"K", "v"}}, "/d");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[2], "env FAKE=far " +
                      RemoteCommand({{"K", "v"}}, "/d", {"echo", "hi there"}));
}

TEST(LinePrefixerTest, CompleteLinesPartialLinesAndEof) {
  LinePrefixer p(3, "stdout");
  EXPECT_EQ(p.Append("hel"), "");
  EXPECT_EQ(p.Append("lo\nwor"), "[3]<stdout>:hello\n");
  EXPECT_EQ(p.Append("ld\n\nx"), "[3]<stdout>:world\n[3]<stdout>:\n");
  EXPECT_EQ(p.Finish(), "[3]<stdout>:x\n");
  EXPECT_EQ(p.Finish(), "");
}

TEST(LinePrefixerTest, VeryLongLinesArePrefixedInPieces) {
  LinePrefixer p(0, "stderr");
  std::string big(LinePrefixer::kMaxLine + 10, 'a');
  std::string out = p.Append(big);
  EXPECT_EQ(out,
            "[0]<stderr>:" + std::string(LinePrefixer::kMaxLine, 'a') + "\n");
  EXPECT_EQ(p.Finish(), "[0]<stderr>:" + std::string(10, 'a') + "\n");
}

TEST(GuardRecordsTest, Parse) {
  GuardReport r;
  ParseGuardRecords("pid 42\n", &r);
  EXPECT_EQ(r.worker_pid, 42);
  EXPECT_FALSE(r.ended);
  ParseGuardRecords("garbage\nsignal 9\n", &r);
  EXPECT_TRUE(r.ended);
  EXPECT_FALSE(r.exited);
  EXPECT_EQ(r.signal, 9);
  GuardReport e;
  ParseGuardRecords("pid 7\nexit 3\n", &e);
  EXPECT_TRUE(e.ended);
  EXPECT_TRUE(e.exited);
  EXPECT_EQ(e.code, 3);
}

}  // namespace
}  // namespace kolo::launcher
