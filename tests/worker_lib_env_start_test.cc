// Workers started without kolorun, from torchrun-style environment
// variables (rank 0 hosts the coordinator): topology on every rank, a wrong
// secret, and the lease — when rank 0 (and with it the coordinator) is killed
// or stopped, every other worker exits with status 75 within the lease.
#include <signal.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/timeouts.h"

namespace kolo {
namespace {

using ::kolo::testing::BinDir;
using ::kolo::testing::Scaled;
using ::kolo::testing::Subprocess;
using ::testing::HasSubstr;

constexpr int kLostCoordinatorExitCode = 75;

struct Job {
  std::vector<std::unique_ptr<Subprocess>> workers;
};

// Starts `n` kolo-test-worker processes as torchrun would.
Job StartJob(int n, const std::string& mode,
             std::map<std::string, std::optional<std::string>> extra = {},
             std::map<int, std::string> secret_of = {}) {
  auto port = net::PickFreePort();
  EXPECT_TRUE(port.ok()) << port.status();
  Job job;
  for (int r = 0; r < n; ++r) {
    std::map<std::string, std::optional<std::string>> env = {
        {"RANK", std::to_string(r)},
        {"WORLD_SIZE", std::to_string(n)},
        {"LOCAL_RANK", std::to_string(r)},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", std::to_string(port.ok() ? *port : 1)},
        {"KOLO_SECRET", secret_of.contains(r) ? secret_of[r] : "job-secret"},
        {"KOLO_START_TIMEOUT",
         absl::StrCat(absl::ToDoubleSeconds(Scaled(absl::Seconds(20))))},
        {"KOLO_LAUNCHER", std::nullopt},
        {"KOLO_COORDINATOR", std::nullopt},
        {"KOLO_SECRET_FILE", std::nullopt},
        {"KOLO_HOST_COORDINATOR", std::nullopt},
    };
    for (const auto& [k, v] : extra) env[k] = v;
    job.workers.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{BinDir() + "/kolo-test-worker", mode}, env));
    EXPECT_TRUE(job.workers.back()->Start().ok());
  }
  return job;
}

TEST(EnvStart, TorchrunStyleTopologyAndAgreement) {
  for (int n : {1, 3}) {
    Job job = StartJob(n, "agree");
    std::string all;
    for (int r = 0; r < n; ++r) {
      Subprocess& w = *job.workers[r];
      ASSERT_TRUE(w.Wait(Scaled(absl::Seconds(30))).ok()) << w.output();
      EXPECT_TRUE(w.exit_info().exited && w.exit_info().code == 0)
          << w.exit_info().ToString() << "\n"
          << w.output();
      EXPECT_THAT(w.output(),
                  HasSubstr(absl::StrCat("ready rank ", r, " of ", n, " local ",
                                         r, " of ", n, " cross 0 of 1")));
      std::string expected;
      for (int i = 0; i < n; ++i) {
        absl::StrAppend(&expected, i == 0 ? "" : ",", i * 10);
      }
      EXPECT_THAT(w.output(), HasSubstr(absl::StrCat("rank ", r, " agreed [",
                                                     expected, "]")));
    }
  }
}

TEST(EnvStart, WrongSecretIsNamedOnTheWorker) {
  Job job = StartJob(
      2, "agree",
      {{"KOLO_START_TIMEOUT",
        absl::StrCat(absl::ToDoubleSeconds(Scaled(absl::Seconds(3))))}},
      {{1, "not-the-job-secret"}});
  Subprocess& bad = *job.workers[1];
  ASSERT_TRUE(bad.Wait(Scaled(absl::Seconds(20))).ok()) << bad.output();
  EXPECT_EQ(bad.exit_info().code, 1) << bad.output();
  EXPECT_THAT(bad.output(), HasSubstr("UNAUTHENTICATED"));
  EXPECT_THAT(bad.output(), HasSubstr("refused worker rank1@"));
  EXPECT_THAT(bad.output(), HasSubstr("authentication failed"));
  // Rank 0 waits for a second worker that never joins, then says so.
  Subprocess& good = *job.workers[0];
  ASSERT_TRUE(good.Wait(Scaled(absl::Seconds(20))).ok()) << good.output();
  EXPECT_EQ(good.exit_info().code, 1) << good.output();
  EXPECT_THAT(good.output(), HasSubstr("no membership from the coordinator"));
}

// Starts 3 holding workers, waits until all are in, and hurts rank 0 (which
// hosts the coordinator) with `sig`.
void ExpectOthersExitWhenRank0Gets(int sig, absl::Duration within) {
  Job job = StartJob(
      3, "hold",
      {{"KOLO_LEASE_SECONDS", "2"}, {"KOLO_HEARTBEAT_INTERVAL_MS", "200"}});
  for (auto& w : job.workers) {
    ASSERT_TRUE(w->WaitForOutput("ready rank", Scaled(absl::Seconds(30))))
        << w->output();
  }
  const absl::Time start = absl::Now();
  job.workers[0]->Signal(sig);
  for (int r = 1; r < 3; ++r) {
    Subprocess& w = *job.workers[r];
    ASSERT_TRUE(w.Wait(within).ok()) << "rank " << r << " lingers\n"
                                     << w.output();
    EXPECT_TRUE(w.exit_info().exited &&
                w.exit_info().code == kLostCoordinatorExitCode)
        << w.exit_info().ToString() << "\n"
        << w.output();
    EXPECT_THAT(w.output(), HasSubstr("lost the coordinator at 127.0.0.1:"));
  }
  EXPECT_LT(absl::Now() - start, within);
  job.workers[0]->Signal(SIGKILL);
}

TEST(EnvStart, KilledCoordinatorMakesWorkersExit) {
  // A broken stream is seen at once; the lease (2 s) is the upper bound.
  ExpectOthersExitWhenRank0Gets(SIGKILL, Scaled(absl::Seconds(5)));
}

TEST(EnvStart, SilentCoordinatorMakesWorkersExitWithinTheLease) {
  ExpectOthersExitWhenRank0Gets(SIGSTOP, Scaled(absl::Seconds(8)));
}

}  // namespace
}  // namespace kolo
