// FaultDriver (launcher/fault_driver.h) on real processes: random terms in
// an elastic job stop at --min-np (a leave frees no slot that kolorun
// refills, so a chaos run must not drain the job); without a minimum every
// drawn term fires; two stops of one worker keep it stopped until the later
// one ends; a kill-coordinator with for= starts the coordinator again when
// it ends, tells the workers it will, and skips a second kill meanwhile.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/fault_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/fault_driver.h"

namespace kolo::launcher {
namespace {

using ::testing::HasSubstr;

class FaultDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      const pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        ::setpgid(0, 0);  // the driver signals the worker's process group
        while (true) ::pause();
      }
      ::setpgid(pid, pid);
      live_.push_back(LiveWorker{absl::StrCat("w", i), 0, "localhost", pid});
    }
    char path[] = "/tmp/kolo-fault-driver-test.XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ::close(fd);
    events_ = path;
  }
  void TearDown() override {
    for (const LiveWorker& w : live_) {
      ::kill(w.pid, SIGKILL);
      ::waitpid(w.pid, nullptr, 0);
    }
    ::unlink(events_.c_str());
  }

  // Every random term of a plan that draws many, fired at once against a
  // job of three members.
  std::vector<FaultRecord> FireTerms(int min_members) {
    FaultDriver::Options o;
    absl::StatusOr<FaultSpec> spec =
        ParseFaultSpec("random:rate=60/min:kinds=term:until=20s");
    EXPECT_TRUE(spec.ok()) << spec.status();
    o.specs = {*spec};
    o.seed = 3;
    o.events_path = events_;
    o.origin = absl::Now() - absl::Hours(1);  // every draw is due
    o.job_view = [] {
      JobView v;
      v.epoch = 1;
      v.rank_of = {{"w0", 0}, {"w1", 1}, {"w2", 2}};
      v.size = 3;
      return v;
    };
    o.min_members = min_members;
    FaultDriver driver(std::move(o));
    driver.Tick(absl::Now(), live_);
    std::vector<FaultRecord> terms;
    for (const FaultRecord& r : driver.records()) {
      if (r.fault.spec.kind == FaultKind::kTerm) terms.push_back(r);
    }
    return terms;
  }

  std::vector<LiveWorker> live_;
  std::string events_;
};

TEST_F(FaultDriverTest, RandomTermsStopAtTheMinimumOfMembers) {
  std::vector<FaultRecord> terms = FireTerms(/*min_members=*/2);
  ASSERT_GE(terms.size(), 3u) << "the plan should draw several terms";
  int fired = 0;
  for (const FaultRecord& r : terms) {
    if (r.state == FaultRecord::State::kFired) {
      ++fired;
    } else {
      EXPECT_EQ(r.state, FaultRecord::State::kSkipped);
      EXPECT_THAT(r.detail, HasSubstr("fewer than --min-np 2"));
    }
  }
  EXPECT_EQ(fired, 1) << "3 members, at least 2 must stay";
}

TEST_F(FaultDriverTest, WithoutAMinimumEveryRandomTermFires) {
  std::vector<FaultRecord> terms = FireTerms(/*min_members=*/0);
  ASSERT_GE(terms.size(), 3u);
  for (const FaultRecord& r : terms) {
    EXPECT_EQ(r.state, FaultRecord::State::kFired) << r.detail;
  }
}

// Whether process `pid` is stopped (state T in /proc/PID/stat), waiting up
// to 2 s for the state to become `stopped` (signals arrive asynchronously).
bool StoppedBecomes(pid_t pid, bool stopped) {
  const absl::Time until = absl::Now() + absl::Seconds(2);
  while (true) {
    char state = '?';
    if (FILE* f =
            std::fopen(absl::StrCat("/proc/", pid, "/stat").c_str(), "r")) {
      // "pid (comm) S ...": the state follows the last ')'.
      std::string text(512, '\0');
      text.resize(std::fread(text.data(), 1, text.size(), f));
      std::fclose(f);
      const size_t paren = text.rfind(')');
      if (paren != std::string::npos && paren + 2 < text.size())
        state = text[paren + 2];
    }
    if ((state == 'T') == stopped) return true;
    if (absl::Now() >= until) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

// Two stops of one worker that overlap (a 4 s one, and a 1 s one fired
// 1 s later): the process stays stopped until the later end (4 s), and both
// stops end then. (The second stop's SIGCONT used to replace the first's:
// the worker ran again after 2 s, and the first stop never ended.)
TEST_F(FaultDriverTest, OverlappingStopsOfAWorkerLastUntilTheLaterEnds) {
  FaultDriver::Options o;
  for (const char* text :
       {"stop:worker=w0:for=4s", "stop:worker=w0:after=1s:for=1s"}) {
    absl::StatusOr<FaultSpec> spec = ParseFaultSpec(text);
    ASSERT_TRUE(spec.ok()) << spec.status();
    o.specs.push_back(*spec);
  }
  o.events_path = events_;
  const absl::Time t0 = absl::Now();
  o.origin = t0;
  FaultDriver driver(std::move(o));
  const pid_t pid = live_[0].pid;
  driver.Tick(t0, live_);
  driver.Tick(t0 + absl::Seconds(1), live_);
  ASSERT_EQ(driver.records()[0].state, FaultRecord::State::kFired);
  ASSERT_EQ(driver.records()[1].state, FaultRecord::State::kFired);
  EXPECT_TRUE(StoppedBecomes(pid, true));
  EXPECT_EQ(driver.NextDue(), t0 + absl::Seconds(4));
  driver.Tick(t0 + absl::Seconds(2.5), live_);
  EXPECT_TRUE(StoppedBecomes(pid, true)) << "continued before the first ended";
  EXPECT_EQ(driver.records()[0].ended_at, absl::InfiniteFuture());
  EXPECT_EQ(driver.records()[1].ended_at, absl::InfiniteFuture());
  driver.Tick(t0 + absl::Seconds(4), live_);
  EXPECT_TRUE(StoppedBecomes(pid, false));
  EXPECT_EQ(driver.records()[0].ended_at, t0 + absl::Seconds(4));
  EXPECT_EQ(driver.records()[1].ended_at, t0 + absl::Seconds(4));
}

// kill-coordinator:for=: killed when due, started again `for` later (the
// soonest thing due meanwhile); a kill due while it is down is skipped; the
// workers are told the coordinator comes back.
TEST_F(FaultDriverTest, KilledCoordinatorIsStartedAgainWhenItsForEnds) {
  FaultDriver::Options o;
  for (const char* text : {"kill-coordinator:after=1s:for=2s",
                           "kill-coordinator:after=2s:for=1s"}) {
    absl::StatusOr<FaultSpec> spec = ParseFaultSpec(text);
    ASSERT_TRUE(spec.ok()) << spec.status();
    o.specs.push_back(*spec);
  }
  o.events_path = events_;
  const absl::Time t0 = absl::Now();
  o.origin = t0;
  std::vector<std::string> calls;
  o.kill_coordinator = [&calls] { calls.push_back("kill"); };
  o.restart_coordinator = [&calls] {
    calls.push_back("restart");
    return absl::OkStatus();
  };
  FaultDriver driver(std::move(o));
  const auto env = driver.WorkerEnv();
  EXPECT_THAT(env, ::testing::Contains(
                       ::testing::Pair("KOLO_COORDINATOR_RETURNS", "1")));
  driver.Tick(t0 + absl::Seconds(1), live_);
  EXPECT_EQ(calls, std::vector<std::string>({"kill"}));
  EXPECT_EQ(driver.NextDue(), t0 + absl::Seconds(2));  // the second kill
  driver.Tick(t0 + absl::Seconds(2), live_);
  EXPECT_EQ(driver.records()[1].state, FaultRecord::State::kSkipped);
  EXPECT_THAT(driver.records()[1].detail, HasSubstr("down already"));
  EXPECT_EQ(driver.NextDue(), t0 + absl::Seconds(3));  // the restart
  driver.Tick(t0 + absl::Seconds(3), live_);
  EXPECT_EQ(calls, std::vector<std::string>({"kill", "restart"}));
  EXPECT_EQ(driver.records()[0].ended_at, t0 + absl::Seconds(3));
  EXPECT_THAT(driver.records()[0].detail, HasSubstr("a new coordinator"));
  EXPECT_FALSE(driver.coordinator_gone());
  EXPECT_EQ(driver.NextDue(), absl::InfiniteFuture());
}

// Without for=, or when starting it again fails, the coordinator is gone for
// good (the job ends); the workers are not told it comes back.
TEST_F(FaultDriverTest, CoordinatorThatCannotBeStartedAgainIsGone) {
  for (const bool restart_fails : {false, true}) {
    FaultDriver::Options o;
    absl::StatusOr<FaultSpec> spec = ParseFaultSpec(
        restart_fails ? "kill-coordinator:for=1s" : "kill-coordinator");
    ASSERT_TRUE(spec.ok()) << spec.status();
    o.specs = {*spec};
    o.events_path = events_;
    const absl::Time t0 = absl::Now();
    o.origin = t0;
    o.restart_coordinator = [] {
      return absl::UnavailableError("port 4242 is taken");
    };
    FaultDriver driver(std::move(o));
    bool told = false;
    for (const auto& [k, v] : driver.WorkerEnv()) {
      told = told || k == "KOLO_COORDINATOR_RETURNS";
    }
    EXPECT_EQ(told, restart_fails);
    driver.Tick(t0, live_);
    EXPECT_EQ(driver.coordinator_gone(), !restart_fails);
    driver.Tick(t0 + absl::Seconds(1), live_);
    EXPECT_TRUE(driver.coordinator_gone());
    if (restart_fails) {
      EXPECT_THAT(driver.records()[0].detail,
                  HasSubstr("starting it again failed: port 4242 is taken"));
    }
  }
}

}  // namespace
}  // namespace kolo::launcher
