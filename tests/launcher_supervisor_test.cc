// The Supervisor with a fake coordinator probe: the start timeout (only once
// a worker has reached the coordinator), a coordinator that ends the job in
// failure, and jobs with no coordinator contact at all. Guards are the real
// kolorun binary in guard mode.
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "launcher/supervisor.h"
#include "tests/testing/timeouts.h"

extern char** environ;

namespace kolo::launcher {
namespace {

using kolo::testing::BinDir;
using kolo::testing::Scaled;

class SupervisorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    sigset_t blocked;
    BlockSupervisorSignals(&blocked);
  }

  // `n` local workers running `sh -c script`.
  std::vector<WorkerLaunch> Workers(int n, const std::string& script) {
    std::vector<WorkerLaunch> out;
    for (int r = 0; r < n; ++r) {
      WorkerLaunch l;
      l.plan.rank = r;
      l.plan.worker_id = absl::StrCat("w", r);
      l.plan.host = "localhost";
      l.spec.argv = {"sh", "-c", script};
      for (char** e = environ; *e != nullptr; ++e) l.spec.env.emplace_back(*e);
      l.spec.env.push_back(absl::StrCat("KOLO_RANK=", r));
      out.push_back(std::move(l));
    }
    return out;
  }

  SupervisorOptions Options(absl::Duration start_timeout) {
    SupervisorOptions o;
    o.start_timeout = start_timeout;
    o.coordinator_address = "127.0.0.1:1234";
    o.self_exe = BinDir() + "/kolorun";
    return o;
  }
};

TEST_F(SupervisorTest, AllWorkersSucceedWithoutACoordinator) {
  Supervisor s(Options(absl::Seconds(30)), Workers(2, "exit 0"), nullptr);
  EXPECT_EQ(s.Run(), 0);
  EXPECT_EQ(s.failure_reason(), "");
}

TEST_F(SupervisorTest, StartTimeoutIgnoresWorkersThatNeverConnect) {
  // Nobody ever reaches the coordinator: plain commands are not timed.
  int probes = 0;
  Supervisor s(Options(absl::Milliseconds(100)), Workers(2, "sleep 1"),
               [&probes] {
                 ++probes;
                 return CoordinatorView{};
               });
  EXPECT_EQ(s.Run(), 0);
  EXPECT_GT(probes, 0);
}

TEST_F(SupervisorTest, StartTimeoutNamesTheWorkersThatHaveNotJoined) {
  absl::Time start = absl::Now();
  Supervisor s(Options(absl::Milliseconds(300)), Workers(3, "sleep 60"), [] {
    CoordinatorView v;
    v.connected = 1;
    v.joined = {"w1"};
    return v;
  });
  EXPECT_EQ(s.Run(), 1);
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(10)));
  const std::string& reason = s.failure_reason();
  EXPECT_NE(reason.find("2 of 3 workers have not joined"), std::string::npos)
      << reason;
  EXPECT_NE(reason.find("w0 (rank 0, host localhost)"), std::string::npos)
      << reason;
  EXPECT_NE(reason.find("w2 (rank 2, host localhost)"), std::string::npos)
      << reason;
  EXPECT_EQ(reason.find("w1 ("), std::string::npos) << reason;
  EXPECT_NE(reason.find("127.0.0.1:1234"), std::string::npos) << reason;
}

TEST_F(SupervisorTest, NoStartTimeoutOnceTheEpochFormed) {
  Supervisor s(Options(absl::Milliseconds(100)), Workers(2, "sleep 1"), [] {
    CoordinatorView v;
    v.phase = CoordinatorView::Phase::kRunning;
    v.connected = 2;
    v.joined = {"w0", "w1"};
    return v;
  });
  EXPECT_EQ(s.Run(), 0);
}

TEST_F(SupervisorTest, CoordinatorFailureEndsTheJob) {
  absl::Time start = absl::Now();
  Supervisor s(Options(absl::Seconds(30)), Workers(2, "sleep 60"), [] {
    CoordinatorView v;
    v.phase = CoordinatorView::Phase::kEndedFailure;
    v.reason = "worker w1 (rank 1, host localhost) missed heartbeats for 5s";
    return v;
  });
  EXPECT_EQ(s.Run(), 1);
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(10)));
  EXPECT_EQ(s.failure_reason(),
            "worker w1 (rank 1, host localhost) missed heartbeats for 5s");
}

TEST_F(SupervisorTest, WorkerExitWinsOverTheCoordinatorsAccount) {
  // The coordinator sees the same failure; the worker's own exit code is
  // the better message.
  Supervisor s(
      Options(absl::Seconds(30)),
      Workers(2, "if [ \"$KOLO_RANK\" = 1 ]; then exit 4; fi; sleep 60"), [] {
        CoordinatorView v;
        v.phase = CoordinatorView::Phase::kEndedFailure;
        v.reason = "worker w1's stream broke";
        return v;
      });
  EXPECT_EQ(s.Run(), 4);
  EXPECT_EQ(s.failure_reason(),
            "worker w1 (rank 1, host localhost) exited with code 4");
}

// A worker that exits non-zero because the coordinator judged another one
// failed (a stopped neighbour): kolorun reports the verdict, blaming the
// other worker, and exits 1 while that one still runs (issue 16).
TEST_F(SupervisorTest, TheCoordinatorsVerdictNamesWhoFailed) {
  const absl::Time start = absl::Now();
  Supervisor s(Options(absl::Seconds(30)),
               Workers(2,
                       "if [ \"$KOLO_RANK\" = 0 ]; then sleep 1; exit 7; fi; "
                       "sleep 60"),
               [start] {
                 CoordinatorView v;
                 v.phase = CoordinatorView::Phase::kRunning;
                 v.joined = {"w0", "w1"};
                 if (absl::Now() - start > absl::Milliseconds(1200)) {
                   v.phase = CoordinatorView::Phase::kEndedFailure;
                   v.reason =
                       "worker w1 (rank 1, host localhost) silent for 5.0 s";
                   v.failed_worker = "w1";
                 }
                 return v;
               });
  EXPECT_EQ(s.Run(), 1);
  EXPECT_EQ(s.failure_reason(),
            "worker w1 (rank 1, host localhost) silent for 5.0 s");
}

// No verdict within the wait: kolorun names the worker that exited.
TEST_F(SupervisorTest, WithoutAVerdictTheExitedWorkerIsNamed) {
  Supervisor s(Options(absl::Seconds(30)),
               Workers(2,
                       "if [ \"$KOLO_RANK\" = 0 ]; then sleep 1; exit 7; fi; "
                       "sleep 60"),
               [] {
                 CoordinatorView v;
                 v.phase = CoordinatorView::Phase::kRunning;
                 v.joined = {"w0", "w1"};
                 return v;
               });
  EXPECT_EQ(s.Run(), 7);
  EXPECT_EQ(s.failure_reason(),
            "worker w0 (rank 0, host localhost) exited with code 7");
}

}  // namespace
}  // namespace kolo::launcher
