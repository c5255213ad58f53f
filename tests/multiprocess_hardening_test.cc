// Hardening against a careless caller (issue 16 point 1), through real
// processes: kolorun jobs of kolo-hardening-worker
// (tests/workers/hardening_worker.cc). Huge and overflowing shapes fail with
// kInvalidArgument on the ranks that gave them and with an error on the
// others, and the job goes on; over-long names and control values are
// refused on the submitting rank without an abort; a group whose member
// count differs across ranks fails on every rank, nobody left waiting;
// shutdown() names the ops it abandoned; a process that returns from main
// without shutdown() exits cleanly, also after a peer was stopped.
#include <signal.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/job_run.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/timeouts.h"

namespace kolo::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kInvalidArgument = 3;
constexpr int kFailedPrecondition = 9;

JobRun Launch(int n, const std::vector<std::string>& flags,
              const std::string& mode,
              std::map<std::string, std::optional<std::string>> env = {}) {
  std::vector<std::string> argv = {Bin("kolorun"), "-np", std::to_string(n)};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back(Bin("kolo-hardening-worker"));
  argv.push_back(mode);
  return RunJob(argv, std::move(env));
}

// The "HARD_CASE case=<name> ..." lines of `output`.
std::vector<std::string> CaseLines(const std::string& output,
                                   const std::string& name) {
  return Lines(output, absl::StrCat("HARD_CASE case=", name, " "));
}

void ExpectOk(const JobRun& run, int n, const std::string& mode) {
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  EXPECT_EQ(Lines(run.output, "HARD_OK mode=" + mode).size(),
            static_cast<size_t>(n))
      << run.output;
  EXPECT_THAT(run.output, Not(HasSubstr("HARD_FAIL"))) << run.output;
}

class Huge : public ::testing::TestWithParam<int> {};

TEST_P(Huge, OverflowingAndHugeShapesFailOnEveryRankAndTheJobGoesOn) {
  const int n = GetParam();
  JobRun run = Launch(n, {}, "huge");
  ExpectOk(run, n, "huge");
  for (const std::string& name : std::vector<std::string>{
           "2^62", "2^61", "2^32x2^32", "blocking", "allgather", "grouped"}) {
    std::vector<std::string> lines = CaseLines(run.output, name);
    ASSERT_EQ(lines.size(), static_cast<size_t>(n)) << name << run.output;
    for (const std::string& line : lines) {
      EXPECT_THAT(line, HasSubstr(absl::StrCat("code=", kInvalidArgument)))
          << name;
      EXPECT_THAT(line, HasSubstr("larger than kolo takes")) << name;
    }
  }
  // Only the last rank's shape is huge: it fails there with
  // kInvalidArgument, and with an error (naming it) on the others.
  std::vector<std::string> lines = CaseLines(run.output, "one-rank");
  ASSERT_EQ(lines.size(), static_cast<size_t>(n)) << run.output;
  for (const std::string& line : lines) {
    EXPECT_THAT(line, Not(HasSubstr("code=0 "))) << line;
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, Huge, ::testing::Values(1, 3),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return absl::StrCat(p.param, "ranks");
                         });

TEST(Hardening, OverlongNamesAndControlValuesAreRefusedOnTheirRank) {
  const int n = 2;
  JobRun run = Launch(n, {}, "long-name");
  ExpectOk(run, n, "long-name");
  for (const std::string& name : {absl::StrCat("name", (size_t{64} << 20) + 1),
                                  absl::StrCat("name", 16 * 1024 + 1)}) {
    std::vector<std::string> lines = CaseLines(run.output, name);
    ASSERT_EQ(lines.size(), static_cast<size_t>(n)) << name << run.output;
    for (const std::string& line : lines) {
      EXPECT_THAT(line, HasSubstr(absl::StrCat("code=", kInvalidArgument)));
      EXPECT_THAT(line, HasSubstr("kolo takes names of at most 16384 bytes"));
    }
  }
  std::vector<std::string> lines = CaseLines(run.output, "exchange");
  ASSERT_EQ(lines.size(), static_cast<size_t>(n)) << run.output;
  for (const std::string& line : lines) {
    EXPECT_THAT(line, HasSubstr(absl::StrCat("code=", kInvalidArgument)));
    EXPECT_THAT(line, HasSubstr("values of at most 65536 bytes"));
  }
  EXPECT_THAT(run.output, Not(HasSubstr("internal error")));
}

TEST(Hardening, GroupMemberCountMismatchFailsOnEveryRank) {
  const int n = 3;
  JobRun run = Launch(n, {}, "group-count");
  ExpectOk(run, n, "group-count");
  std::vector<std::string> lines = CaseLines(run.output, "group");
  ASSERT_EQ(lines.size(), static_cast<size_t>(n)) << run.output;
  for (const std::string& line : lines) {
    EXPECT_THAT(line, HasSubstr(absl::StrCat("code=", kFailedPrecondition)))
        << line;
    EXPECT_THAT(line, HasSubstr("group size")) << line;
  }
}

TEST(Hardening, ShutdownNamesTheOpsItAbandoned) {
  const int n = 3;
  JobRun run = Launch(n, {}, "abandon");
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  std::vector<std::string> zero = Lines(run.output, "HARD_ABANDON rank=0 ");
  ASSERT_EQ(zero.size(), 1u) << run.output;
  EXPECT_THAT(zero[0], HasSubstr(absl::StrCat("code=", kFailedPrecondition)));
  EXPECT_THAT(zero[0], HasSubstr("abandoned 1 op(s) still in flight: "
                                 "'only-0' (allreduce"));
  EXPECT_THAT(zero[0], HasSubstr("waiting for every rank"));
  for (int r = 1; r < n; ++r) {
    std::vector<std::string> other =
        Lines(run.output, absl::StrCat("HARD_ABANDON rank=", r, " "));
    ASSERT_EQ(other.size(), 1u) << run.output;
    EXPECT_THAT(other[0], HasSubstr("code=0 "));
    // Their op that needed rank 0 failed when it left, naming it.
    std::vector<std::string> waited =
        Lines(run.output, absl::StrCat("HARD_WAITED rank=", r, " "));
    ASSERT_EQ(waited.size(), 1u) << run.output;
    EXPECT_THAT(waited[0],
                HasSubstr(absl::StrCat("code=", kFailedPrecondition)));
    EXPECT_THAT(waited[0], HasSubstr("worker w0 (rank 0"));
  }
  // The warning on rank 0's log.
  EXPECT_THAT(run.output, HasSubstr("[kolo rank 0] [runtime] [warning] "
                                    "kolo::shutdown() on rank 0 abandoned"));
}

TEST(Hardening, ReturningFromMainWithoutShutdownExitsCleanly) {
  const int n = 3;
  for (int trial = 0; trial < 3; ++trial) {
    JobRun run = Launch(n, {}, "no-shutdown");
    EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
        << run.exit.ToString() << "\n"
        << run.output;
    EXPECT_EQ(Lines(run.output, "HARD_EXIT rank=").size(),
              static_cast<size_t>(n))
        << run.output;
    EXPECT_THAT(run.output, HasSubstr("kolo::shutdown() was not called"));
  }
}

// A stopped worker is the one blamed everywhere (issue 16 point 2): by the
// coordinator, in every survivor's error, and by kolorun's last line and
// exit code — whether the heartbeat timeout finds it first or the
// survivors' data-plane timeout (KOLO_TIMEOUT_SECONDS shorter than the
// heartbeat timeout: their reports make the coordinator judge at once).
struct Blame {
  std::string name;
  std::vector<std::string> flags;
  std::map<std::string, std::optional<std::string>> env;
};

class StoppedPeer : public ::testing::TestWithParam<Blame> {};

TEST_P(StoppedPeer, TheStoppedWorkerIsBlamedEverywhere) {
  const int n = 3;
  JobRun run = Launch(n, GetParam().flags, "stopped-peer", GetParam().env);
  EXPECT_TRUE(run.exit.exited && run.exit.code == 1)
      << run.exit.ToString() << "\n"
      << run.output;
  for (int r : {0, 2}) {
    std::vector<std::string> lines =
        Lines(run.output, absl::StrCat("HARD_STOPPED rank=", r, " "));
    ASSERT_EQ(lines.size(), 1u) << run.output;
    EXPECT_THAT(lines[0], HasSubstr("code=10 ")) << lines[0];  // kAborted
    EXPECT_THAT(lines[0], HasSubstr("worker w1 (rank 1, host localhost)"))
        << lines[0];
  }
  EXPECT_THAT(run.output, HasSubstr("ended in failure: worker w1 (rank 1, "
                                    "host localhost) silent for"));
  std::vector<std::string> last = Lines(run.output, "kolorun: ");
  ASSERT_FALSE(last.empty()) << run.output;
  EXPECT_THAT(last.back(), HasSubstr("the coordinator ended the job: worker "
                                     "w1 (rank 1, host localhost) silent"))
      << run.output;
  EXPECT_THAT(run.output, Not(HasSubstr("worker w0 (rank 0, host localhost) "
                                        "disconnected")));
  EXPECT_THAT(run.output, Not(HasSubstr("worker w2 (rank 2, host localhost) "
                                        "disconnected")));
  EXPECT_THAT(run.output, Not(HasSubstr("signal 11")));
}

INSTANTIATE_TEST_SUITE_P(
    Detection, StoppedPeer,
    ::testing::Values(
        Blame{"heartbeat", {"--heartbeat-timeout-seconds", "3"}, {}},
        Blame{"data_plane_report",
              {"--heartbeat-timeout-seconds", "60"},
              {{"KOLO_TIMEOUT_SECONDS", "3"}}}),
    [](const ::testing::TestParamInfo<Blame>& p) { return p.param.name; });

// A worker killed mid-transfer: the coordinator, every survivor and kolorun
// name it, never a survivor that went down after it (several trials: the
// order of the disconnects varies).
TEST(Hardening, AKilledWorkerIsBlamedEverywhere) {
  const int n = 3;
  for (int trial = 0; trial < 4; ++trial) {
    SCOPED_TRACE(absl::StrCat("trial ", trial));
    JobRun run = Launch(n, {}, "killed-peer");
    EXPECT_TRUE(run.exit.exited && run.exit.code == 128 + SIGKILL)
        << run.exit.ToString() << "\n"
        << run.output;
    EXPECT_THAT(run.output, HasSubstr("ended in failure: worker w1 (rank 1, "
                                      "host localhost)"));
    EXPECT_THAT(run.output, Not(HasSubstr("ended in failure: worker w0")));
    EXPECT_THAT(run.output, Not(HasSubstr("ended in failure: worker w2")));
    // A survivor may be stopped by kolorun before it prints its error;
    // what it prints names w1.
    for (const std::string& line : Lines(run.output, "HARD_STOPPED rank=")) {
      EXPECT_THAT(line, HasSubstr("worker w1 (rank 1, host localhost)"))
          << line;
    }
    std::vector<std::string> last = Lines(run.output, "kolorun: ");
    ASSERT_FALSE(last.empty()) << run.output;
    EXPECT_THAT(last.back(), HasSubstr("w1 (rank 1, host localhost)"))
        << run.output;
  }
}

// SIGTERM to kolorun: the coordinator says the launcher stopped the job,
// not that some worker disconnected.
TEST(Hardening, SigtermToKolorunIsTheJobsEnd) {
  std::vector<std::string> argv = {Bin("kolorun"), "-np", "3",
                                   Bin("kolo-hardening-worker"), "hold"};
  auto p = std::make_unique<Subprocess>(argv);
  ASSERT_TRUE(p->Start().ok());
  ASSERT_TRUE(
      p->WaitForOutput("HARD_HOLDING rank=2", Scaled(absl::Seconds(30))))
      << p->output();
  absl::SleepFor(absl::Milliseconds(300));
  p->Signal(SIGTERM);
  ASSERT_TRUE(p->Wait(Scaled(absl::Seconds(30))).ok()) << p->output();
  EXPECT_TRUE(p->exit_info().exited && p->exit_info().code == 143)
      << p->exit_info().ToString() << "\n"
      << p->output();
  EXPECT_THAT(p->output(), HasSubstr("ended in failure: the job was stopped "
                                     "by the launcher (kolorun received "
                                     "SIGTERM)"));
  EXPECT_THAT(p->output(), Not(HasSubstr("disconnected without leaving")));
}

}  // namespace
}  // namespace kolo::testing
