// The Supervisor's elastic launcher policy with a fake coordinator probe and
// real small shell workers (guards are the real kolorun binary in guard
// mode): a failed worker is replaced in its slot as the next incarnation of
// the same worker id; a slot that keeps failing cools down, then is retried;
// a discovery script whose output grows starts new workers with new ids; a
// host removed from it gets SIGTERM (a leave, not replaced); --graceful-term
// forwards SIGTERM and the job ends when the workers have left.
//
// The fake probe also drives each test (it rewrites the host file, sends
// kolorun SIGTERM, creates the STOP file the workers wait for), and ends the
// job in failure past a deadline, so that a bug shows as a failure, not a
// hang.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "launcher/command_line.h"
#include "launcher/line_prefixer.h"
#include "launcher/supervisor.h"
#include "tests/testing/timeouts.h"

extern char** environ;

namespace kolo::launcher {
namespace {

using kolo::testing::BinDir;
using kolo::testing::Scaled;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
  }
  std::rename(tmp.c_str(), path.c_str());  // the script never sees half
}

std::vector<std::string> Lines(const std::string& path) {
  return absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty());
}

bool HasLine(const std::string& path, const std::string& line) {
  for (const std::string& l : Lines(path)) {
    if (l == line) return true;
  }
  return false;
}

CoordinatorView Running() {
  CoordinatorView v;
  v.phase = CoordinatorView::Phase::kRunning;
  v.connected = 1;
  return v;
}

CoordinatorView EndedOk() {
  CoordinatorView v;
  v.phase = CoordinatorView::Phase::kEndedOk;
  return v;
}

class ElasticSupervisorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    sigset_t blocked;
    BlockSupervisorSignals(&blocked);
  }

  void SetUp() override {
    char tmpl[] = "/tmp/kolo_elastic_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    log_ = dir_ + "/log";
    stop_ = dir_ + "/STOP";
    hosts_ = dir_ + "/hosts";
    WriteFile(log_, "");
  }
  void TearDown() override {
    std::system(absl::StrCat("rm -rf '", dir_, "'").c_str());
  }

  SupervisorOptions Options() {
    SupervisorOptions o;
    o.start_timeout = absl::Seconds(30);
    o.coordinator_address = "127.0.0.1:1234";
    o.self_exe = BinDir() + "/kolorun";
    o.elastic = true;
    return o;
  }

  // Workers run `sh -c script` locally whatever their host, with the
  // variables kolorun gives them (WorkerEnv) and LOG / STOP set.
  ElasticSetup MakeSetup(std::vector<HostSlots> hosts, int initial,
                         const std::string& script) {
    ElasticSetup e;
    e.hosts = std::move(hosts);
    e.initial_workers = initial;
    e.slots.cooldown_lo = absl::Milliseconds(500);
    e.slots.cooldown_hi = absl::Seconds(1);
    JobInfo job;
    job.job_id = "kolo-test";
    job.coordinator = "127.0.0.1:1234";
    job.size = initial;
    job.elastic = true;
    std::string log = log_, stop = stop_;
    e.make_spec = [job, script, log, stop](const WorkerPlan& plan) {
      GuardSpec spec;
      spec.argv = {"sh", "-c", script};
      for (char** env = environ; *env != nullptr; ++env) {
        if (!absl::StartsWith(*env, "KOLO_")) spec.env.emplace_back(*env);
      }
      for (const auto& [k, v] : WorkerEnv(job, plan))
        spec.env.push_back(absl::StrCat(k, "=", v));
      spec.env.push_back("LOG=" + log);
      spec.env.push_back("STOP=" + stop);
      return spec;
    };
    return e;
  }

  // Wraps `step` (called on every probe) with the deadline.
  CoordinatorProbe Probe(std::function<CoordinatorView()> step) {
    absl::Time deadline = absl::Now() + Scaled(absl::Seconds(60));
    return [step, deadline] {
      if (absl::Now() > deadline) {
        CoordinatorView v;
        v.phase = CoordinatorView::Phase::kEndedFailure;
        v.reason = "test deadline";
        return v;
      }
      return step();
    };
  }

  std::string dir_, log_, stop_, hosts_;
};

// Logs "start <id> <incarnation> <host>", then waits for STOP.
constexpr const char* kWaitForStop =
    "echo \"start $KOLO_WORKER_ID $KOLO_WORKER_INCARNATION $KOLO_HOSTNAME\" "
    ">> \"$LOG\"; "
    "while [ ! -e \"$STOP\" ]; do sleep 0.05; done";

TEST_F(ElasticSupervisorTest, AFailedWorkerIsReplacedInItsSlot) {
  const std::string script = absl::StrCat(
      "echo \"start $KOLO_WORKER_ID $KOLO_WORKER_INCARNATION $KOLO_HOSTNAME "
      "$KOLO_RANK\" >> \"$LOG\"; ",
      "if [ $KOLO_WORKER_ID = w1 ] && [ $KOLO_WORKER_INCARNATION = 0 ]; then "
      "exit 3; fi; ",
      "while [ ! -e \"$STOP\" ]; do sleep 0.05; done");
  const std::string log = log_, stop = stop_;
  Supervisor s(Options(), MakeSetup({{"localhost", 2}}, 2, script),
               Probe([log, stop] {
                 if (HasLine(log, "start w1 1 localhost 1")) {
                   WriteFile(stop, "");
                   return EndedOk();
                 }
                 return Running();
               }));
  EXPECT_EQ(s.Run(), 0) << s.failure_reason();
  std::vector<std::string> lines = Lines(log_);
  EXPECT_EQ(lines.size(), 3u) << ReadFile(log_);
  EXPECT_TRUE(HasLine(log_, "start w0 0 localhost 0")) << ReadFile(log_);
  EXPECT_TRUE(HasLine(log_, "start w1 0 localhost 1")) << ReadFile(log_);
  EXPECT_TRUE(HasLine(log_, "start w1 1 localhost 1")) << ReadFile(log_);
}

TEST_F(ElasticSupervisorTest, AWorkerThatExitsZeroIsNotReplaced) {
  const std::string log = log_;
  Supervisor s(Options(),
               MakeSetup({{"localhost", 2}}, 2,
                         "echo \"start $KOLO_WORKER_ID "
                         "$KOLO_WORKER_INCARNATION\" >> \"$LOG\"; "
                         "[ $KOLO_WORKER_ID = w0 ] && exit 0; sleep 1"),
               Probe([] { return Running(); }));
  EXPECT_EQ(s.Run(), 0) << s.failure_reason();
  EXPECT_EQ(Lines(log_).size(), 2u) << ReadFile(log_);
}

TEST_F(ElasticSupervisorTest, ASlotThatKeepsFailingCoolsDownThenIsRetried) {
  // Every incarnation fails at once: 0 and 1 back to back, then cooldowns
  // of 0.5 s, 1 s, 1 s (the cap).
  const std::string log = log_;
  Supervisor s(
      Options(),
      MakeSetup({{"localhost", 1}}, 1,
                "echo \"$KOLO_WORKER_INCARNATION $(date +%s%N)\" >> \"$LOG\"; "
                "exit 3"),
      Probe([log] {
        if (Lines(log).size() >= 5) {
          CoordinatorView v;
          v.phase = CoordinatorView::Phase::kEndedFailure;
          v.reason = "below --min-np for too long";
          return v;
        }
        return Running();
      }));
  absl::Time start = absl::Now();
  EXPECT_EQ(s.Run(), 1);
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(30)));
  EXPECT_EQ(s.failure_reason(), "below --min-np for too long");
  std::vector<std::string> lines = Lines(log_);
  ASSERT_GE(lines.size(), 5u) << ReadFile(log_);
  std::vector<int64_t> ns;
  for (size_t i = 0; i < 5; ++i) {
    std::vector<std::string> f = absl::StrSplit(lines[i], ' ');
    ASSERT_EQ(f.size(), 2u) << lines[i];
    EXPECT_EQ(f[0], absl::StrCat(i)) << ReadFile(log_);
    ns.push_back(std::stoll(f[1]));
  }
  auto gap = [&](int i) { return absl::Nanoseconds(ns[i] - ns[i - 1]); };
  EXPECT_GE(gap(2), absl::Milliseconds(500));
  EXPECT_GE(gap(3), absl::Seconds(1));
  EXPECT_GE(gap(4), absl::Seconds(1));
  // Retried after the cooldown, not stuck (generous).
  EXPECT_LT(gap(4), Scaled(absl::Seconds(5)));
}

TEST_F(ElasticSupervisorTest, DiscoveryGrowthStartsNewWorkersWithNewIds) {
  WriteFile(hosts_, "localhost:1\n");
  ElasticSetup e = MakeSetup({{"localhost", 1}}, 1, kWaitForStop);
  e.discovery_script = absl::StrCat("cat '", hosts_, "'");
  e.discovery_interval = absl::Milliseconds(200);
  const std::string log = log_, stop = stop_, hosts = hosts_;
  Supervisor s(Options(), std::move(e), Probe([log, stop, hosts] {
                 if (HasLine(log, "start w1 0 hostb") &&
                     HasLine(log, "start w2 0 hostb")) {
                   WriteFile(stop, "");
                   return EndedOk();
                 }
                 if (HasLine(log, "start w0 0 localhost"))
                   WriteFile(hosts, "localhost:1\n# more\nhostb:2\n");
                 return Running();
               }));
  EXPECT_EQ(s.Run(), 0) << s.failure_reason();
  EXPECT_EQ(Lines(log_).size(), 3u) << ReadFile(log_);
}

TEST_F(ElasticSupervisorTest, MaxNpCapsTheWorkersOfANewHost) {
  WriteFile(hosts_, "localhost:1\n");
  ElasticSetup e = MakeSetup({{"localhost", 1}}, 1, kWaitForStop);
  e.slots.max_workers = 2;
  e.discovery_script = absl::StrCat("cat '", hosts_, "'");
  e.discovery_interval = absl::Milliseconds(200);
  const std::string log = log_, stop = stop_, hosts = hosts_;
  absl::Time grown = absl::InfiniteFuture();
  Supervisor s(
      Options(), std::move(e), Probe([log, stop, hosts, &grown] {
        // Well after hostb:3 appeared and got its one worker.
        if (absl::Now() > grown + absl::Seconds(1)) {
          WriteFile(stop, "");
          return EndedOk();
        }
        if (HasLine(log, "start w1 0 hostb") && grown == absl::InfiniteFuture())
          grown = absl::Now();
        if (HasLine(log, "start w0 0 localhost"))
          WriteFile(hosts, "localhost:1\nhostb:3\n");
        return Running();
      }));
  EXPECT_EQ(s.Run(), 0) << s.failure_reason();
  EXPECT_EQ(Lines(log_).size(), 2u) << ReadFile(log_);
}

TEST_F(ElasticSupervisorTest, AHostRemovedFromTheScriptGetsSigterm) {
  WriteFile(hosts_, "localhost:1\nhostb:1\n");
  const std::string script =
      "echo \"start $KOLO_WORKER_ID $KOLO_WORKER_INCARNATION\" >> \"$LOG\"; "
      "trap 'echo \"term $KOLO_WORKER_ID\" >> \"$LOG\"; exit 0' TERM; "
      "while [ ! -e \"$STOP\" ]; do sleep 0.05; done";
  ElasticSetup e = MakeSetup({{"localhost", 1}, {"hostb", 1}}, 2, script);
  e.discovery_script = absl::StrCat("cat '", hosts_, "'");
  e.discovery_interval = absl::Milliseconds(200);
  const std::string log = log_, stop = stop_, hosts = hosts_;
  Supervisor s(Options(), std::move(e), Probe([log, stop, hosts] {
                 if (HasLine(log, "term w1")) {
                   WriteFile(stop, "");
                   return EndedOk();
                 }
                 if (HasLine(log, "start w0 0") && HasLine(log, "start w1 0"))
                   WriteFile(hosts, "localhost:1\n");
                 return Running();
               }));
  EXPECT_EQ(s.Run(), 0) << s.failure_reason();
  // w1 left (exit 0 after SIGTERM) and was not replaced; w0 never saw it.
  // (The two start in either order.)
  std::vector<std::string> lines = Lines(log_);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines,
            (std::vector<std::string>{"start w0 0", "start w1 0", "term w1"}))
      << ReadFile(log_);
}

TEST_F(ElasticSupervisorTest, AFailingDiscoveryScriptIsRetried) {
  // The script fails until the file exists; the job goes on meanwhile.
  ElasticSetup e = MakeSetup({{"localhost", 1}}, 1, kWaitForStop);
  e.discovery_script =
      absl::StrCat("cat '", hosts_, "' || { echo 'no list yet' >&2; exit 1; }");
  e.discovery_interval = absl::Milliseconds(200);
  const std::string log = log_, stop = stop_, hosts = hosts_;
  int probes = 0;
  Supervisor s(Options(), std::move(e), Probe([&probes, log, stop, hosts] {
                 if (HasLine(log, "start w1 0 hostb")) {
                   WriteFile(stop, "");
                   return EndedOk();
                 }
                 // A few failing runs first.
                 if (++probes == 8) WriteFile(hosts, "localhost\nhostb\n");
                 return Running();
               }));
  EXPECT_EQ(s.Run(), 0) << s.failure_reason();
  EXPECT_EQ(Lines(log_).size(), 2u) << ReadFile(log_);
}

TEST_F(ElasticSupervisorTest, GracefulTermForwardsSigterm) {
  const std::string script =
      "echo \"start $KOLO_WORKER_ID\" >> \"$LOG\"; "
      "trap 'echo \"left $KOLO_WORKER_ID\" >> \"$LOG\"; exit 0' TERM; "
      "while true; do sleep 0.05; done";
  ElasticSetup e = MakeSetup({{"localhost", 2}}, 2, script);
  e.graceful_term = true;
  const std::string log = log_;
  bool sent = false;
  Supervisor s(
      Options(), std::move(e), Probe([&sent, log] {
        if (!sent && HasLine(log, "start w0") && HasLine(log, "start w1")) {
          sent = true;
          ::kill(::getpid(), SIGTERM);
        }
        return Running();
      }));
  EXPECT_EQ(s.Run(), 0) << s.failure_reason();
  EXPECT_TRUE(HasLine(log_, "left w0")) << ReadFile(log_);
  EXPECT_TRUE(HasLine(log_, "left w1")) << ReadFile(log_);
  EXPECT_EQ(Lines(log_).size(), 4u) << ReadFile(log_);  // nobody replaced
}

TEST_F(ElasticSupervisorTest, ASecondSigtermStopsAGracefulTerm) {
  // The worker ignores SIGTERM: the second one stops the job as usual.
  ElasticSetup e = MakeSetup({{"localhost", 1}}, 1,
                             "echo start >> \"$LOG\"; trap '' TERM; "
                             "while true; do sleep 0.05; done");
  e.graceful_term = true;
  const std::string log = log_;
  int sent = 0;
  absl::Time first = absl::InfiniteFuture();
  Supervisor s(
      Options(), std::move(e), Probe([&sent, &first, log] {
        if (sent == 0 && HasLine(log, "start")) {
          sent = 1;
          first = absl::Now();
          ::kill(::getpid(), SIGTERM);
        } else if (sent == 1 && absl::Now() > first + absl::Milliseconds(500)) {
          sent = 2;
          ::kill(::getpid(), SIGTERM);
        }
        return Running();
      }));
  absl::Time start = absl::Now();
  EXPECT_EQ(s.Run(), 128 + SIGTERM);
  EXPECT_EQ(sent, 2);
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(30)));
  EXPECT_NE(s.failure_reason().find("SIGTERM"), std::string::npos)
      << s.failure_reason();
}

// --output-filename: a replacement appends to its worker number's files;
// each file holds the raw output (launcher/line_prefixer.h).
TEST_F(ElasticSupervisorTest, AReplacementAppendsToItsOutputFiles) {
  const std::string script = absl::StrCat(
      "echo \"start $KOLO_WORKER_ID $KOLO_WORKER_INCARNATION $KOLO_HOSTNAME "
      "$KOLO_RANK\" >> \"$LOG\"; ",
      "echo \"out $KOLO_WORKER_ID.$KOLO_WORKER_INCARNATION\"; ",
      "printf 'err %s' $KOLO_WORKER_INCARNATION >&2; ",
      "if [ $KOLO_WORKER_ID = w1 ] && [ $KOLO_WORKER_INCARNATION = 0 ]; then "
      "exit 3; fi; ",
      "while [ ! -e \"$STOP\" ]; do sleep 0.05; done");
  const std::string log = log_, stop = stop_;
  SupervisorOptions o = Options();
  o.output_dir = dir_ + "/out";
  // A file from an earlier job: truncated by the first incarnation.
  ASSERT_TRUE(CreateOutputDir(dir_ + "/out/rank.0").ok());
  WriteFile(dir_ + "/out/rank.0/stdout", "old job\n");
  Supervisor s(o, MakeSetup({{"localhost", 2}}, 2, script), Probe([log, stop] {
                 if (HasLine(log, "start w1 1 localhost 1")) {
                   WriteFile(stop, "");
                   return EndedOk();
                 }
                 return Running();
               }));
  EXPECT_EQ(s.Run(), 0) << s.failure_reason();
  EXPECT_EQ(ReadFile(dir_ + "/out/rank.0/stdout"), "out w0.0\n");
  EXPECT_EQ(ReadFile(dir_ + "/out/rank.0/stderr"), "err 0");
  EXPECT_EQ(ReadFile(dir_ + "/out/rank.1/stdout"), "out w1.0\nout w1.1\n");
  EXPECT_EQ(ReadFile(dir_ + "/out/rank.1/stderr"), "err 0err 1");
}

}  // namespace
}  // namespace kolo::launcher
