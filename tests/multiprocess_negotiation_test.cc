// The negotiated runtime through real processes (issue 4 point 7): kolorun
// jobs of kolo-negotiation-worker (tests/workers/negotiation_worker.cc).
// Many tensors in different orders per rank give exact results; every kind
// of cross-rank disagreement fails on every rank with a message naming the
// tensor, the ranks and the values, and the next op works; a duplicate name
// fails on its rank only; a stall is warned about and then resolves; a stall
// past the shutdown time fails every pending op and ends the job; a killed
// worker fails the others' pending handles within seconds, naming it. The
// same holds with negotiation on the Session streams (KOLO_NEGOTIATION_LINK=0)
// as on the negotiation links (the default), and the default does use links.
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/job_run.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/timeouts.h"
#include "tests/testing/topology.h"

namespace kolo::testing {
namespace {

// kolorun -np n [flags] kolo-negotiation-worker args...
JobRun Launch(int n, const std::vector<std::string>& flags,
              const std::vector<std::string>& args,
              std::map<std::string, std::optional<std::string>> env = {}) {
  std::vector<std::string> argv = {Bin("kolorun"), "-np", std::to_string(n)};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back(Bin("kolo-negotiation-worker"));
  argv.insert(argv.end(), args.begin(), args.end());
  JobRun run = RunJob(argv, std::move(env));
  return run;
}

int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

void ExpectOk(const JobRun& run, int n, const std::string& mode) {
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  std::vector<Fields> ok = ParseTagged(run.output, "NEG_OK");
  EXPECT_EQ(ok.size(), static_cast<size_t>(n)) << run.output;
  for (const Fields& f : ok) {
    EXPECT_EQ(f.at("mode"), mode);
    EXPECT_EQ(IntField(f, "size"), n);
  }
}

class Orders : public ::testing::TestWithParam<int> {};

TEST_P(Orders, ManyTensorsInDifferentOrdersGiveExactResults) {
  const int n = GetParam();
  JobRun run = Launch(n, {}, {"orders"});
  ExpectOk(run, n, "orders");
}

INSTANTIATE_TEST_SUITE_P(Sizes, Orders, ::testing::Values(1, 2, 3, 5),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return absl::StrCat(p.param, "ranks");
                         });

TEST(Negotiation, TheDefaultCarriesNegotiationOnLinks) {
  const int n = 2;
  JobRun run = Launch(n, {"--log-level", "info"}, {"orders"});
  ExpectOk(run, n, "orders");
  EXPECT_EQ(Count(run.output, "negotiation link of worker w0 bound"), 1)
      << run.output;
  EXPECT_EQ(Count(run.output, "negotiation link of worker w1 bound"), 1)
      << run.output;
  EXPECT_EQ(Count(run.output, "negotiation stays on the Session"), 0)
      << run.output;
}

TEST(Negotiation, StreamPathGivesExactResultsWithoutLinks) {
  const int n = 3;
  JobRun run = Launch(n, {"--log-level", "info"}, {"orders"},
                      {{"KOLO_NEGOTIATION_LINK", "0"}});
  ExpectOk(run, n, "orders");
  EXPECT_EQ(Count(run.output, "negotiation link of worker"), 0) << run.output;
}

class Mismatch : public ::testing::TestWithParam<bool> {};

TEST_P(Mismatch, EveryMismatchFailsOnEveryRankAndTheNextOpWorks) {
  const int n = 3;
  JobRun run = Launch(n, {}, {"mismatch"},
                      {{"KOLO_NEGOTIATION_LINK", GetParam() ? "1" : "0"}});
  ExpectOk(run, n, "mismatch");
  std::vector<Fields> errs = ParseTagged(run.output, "NEG_ERR");
  ASSERT_EQ(errs.size(), 11u * n) << run.output;
  for (const Fields& f : errs) {
    const int want = f.at("kind") == "invalid" ? 3   // kInvalidArgument
                                               : 9;  // kFailedPrecondition
    EXPECT_EQ(IntField(f, "code"), want) << f.at("kind") << "\n" << run.output;
  }
  // The exact wording, on every rank.
  const std::vector<std::string> messages = {
      "tensor 'bad/op': op allreduce on ranks 0,1 but broadcast on rank 2",
      "tensor 'bad/dtype': allreduce dtype float32 on ranks 0,1 but int32 on "
      "rank 2",
      "tensor 'bad/shape': allreduce shape [4,3] on ranks 0,1 but [3,4] on "
      "rank 2",
      "tensor 'bad/reduce': allreduce reduce op sum on ranks 0,1 but max on "
      "rank 2",
      "tensor 'bad/prescale': allreduce prescale 1 on ranks 0,1 but 0.5 on "
      "rank 2",
      "tensor 'bad/postscale': allreduce postscale 1 on ranks 0,1 but 2 on "
      "rank 2",
      "tensor 'bad/root': broadcast root 0 on ranks 0,1 but 1 on rank 2",
      "tensor 'bad/allgather-dims': allgather shape [*,4] on ranks 0,1 but "
      "[*,6] on rank 2",
      "tensor 'bad/alltoall-dims': alltoall shape [*,4] on ranks 0,1 but "
      "[*,6] on rank 2",
      "tensor 'bad/reducescatter-counts':",
      "tensor 'bad/invalid': invalid on rank 2: alltoall: splits [13,0,0] add "
      "up to 13 rows, but the input's first dimension is 12",
  };
  for (const std::string& m : messages) {
    EXPECT_EQ(Count(run.output, m), n) << m << "\n" << run.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, Mismatch, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Link" : "Stream";
                         });

TEST(Negotiation, DuplicateNameFailsAtOnceOnItsRankOnly) {
  const int n = 2;
  JobRun run = Launch(n, {}, {"duplicate"});
  ExpectOk(run, n, "duplicate");
  std::vector<Fields> dup = ParseTagged(run.output, "NEG_DUP");
  ASSERT_EQ(dup.size(), 1u) << run.output;
  EXPECT_EQ(IntField(dup[0], "code"), 3) << run.output;  // kInvalidArgument
  std::vector<Fields> group = ParseTagged(run.output, "NEG_DUP_GROUP");
  ASSERT_EQ(group.size(), 1u) << run.output;
  EXPECT_EQ(IntField(group[0], "code"), 3) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output,
                                "allreduce 'dupg.1' on rank 0: an op with this "
                                "name is already in flight on this rank"))
      << run.output;
  EXPECT_TRUE(absl::StrContains(
      run.output,
      "allreduce 'dup' on rank 0: an op with this name is already "
      "in flight on this rank"))
      << run.output;
}

TEST(Negotiation, TrySynchronizeNeverWaitsAndReleasesFinishedOps) {
  for (int n : {1, 3}) {
    JobRun run = Launch(n, {}, {"try"});
    ExpectOk(run, n, "try");
    std::vector<Fields> tries = ParseTagged(run.output, "NEG_TRY");
    int early = 0, bad = 0;
    for (const Fields& f : tries) {
      if (f.count("early_running") != 0) early += IntField(f, "early_running");
      if (f.count("code") != 0) {
        ++bad;
        EXPECT_EQ(IntField(f, "code"), 9) << run.output;  // kFailedPrecondition
      }
    }
    EXPECT_EQ(early, n > 1 ? 1 : 0) << run.output;
    EXPECT_EQ(bad, n > 1 ? n : 0) << run.output;
  }
}

TEST(Negotiation, StallIsWarnedAboutThenResolves) {
  const int n = 3;
  JobRun run = Launch(n, {"--stall-check-time-seconds", "1"}, {"stall", "4"});
  ExpectOk(run, n, "stall");
  // The coordinator (in kolorun) names the tensor and the missing rank.
  EXPECT_TRUE(absl::StrContains(run.output, "'late' waits for rank 2"))
      << run.output;
  EXPECT_GE(Count(run.output, "stall:"), 2) << "repeated while it lasts\n"
                                            << run.output;
}

TEST(Negotiation, StallShutdownFailsEveryPendingOpAndEndsTheJob) {
  const int n = 3;
  JobRun run = Launch(
      n,
      {"--stall-check-time-seconds", "1", "--stall-shutdown-time-seconds", "2"},
      {"stall-shutdown"});
  EXPECT_LT(run.seconds, 30) << run.output;
  std::vector<Fields> failed = ParseTagged(run.output, "NEG_STALL_FAILED");
  EXPECT_EQ(failed.size(), static_cast<size_t>(n)) << run.output;
  std::vector<std::string> messages = Lines(run.output, "NEG_MSG stall:");
  EXPECT_EQ(messages.size(), static_cast<size_t>(n)) << run.output;
  for (const std::string& m : messages) {
    EXPECT_TRUE(absl::StrContains(m, "stall shutdown")) << "says why: " << m;
  }
  EXPECT_TRUE(absl::StrContains(run.output, "'not-last'")) << run.output;
  EXPECT_TRUE(run.exit.exited && run.exit.code != 0)
      << "the job ended in failure\n"
      << run.exit.ToString() << "\n"
      << run.output;
}

class Killed : public ::testing::TestWithParam<bool> {};

TEST_P(Killed, KilledWorkerFailsEveryPendingHandleNamingIt) {
  const int n = 3;
  JobRun run = Launch(n, {}, {"kill", "1"},
                      {{"KOLO_NEGOTIATION_LINK", GetParam() ? "1" : "0"}});
  std::vector<Fields> killed = ParseTagged(run.output, "NEG_KILLED");
  ASSERT_EQ(killed.size(), 3u * (n - 1)) << run.output;
  for (const Fields& f : killed) {
    EXPECT_NE(IntField(f, "code"), 0) << run.output;
    EXPECT_LT(std::stod(f.at("seconds")), 10) << run.output;
  }
  // Every error names the dead worker and its rank.
  std::vector<std::string> messages = Lines(run.output, "NEG_MSG killed:");
  EXPECT_EQ(messages.size(), 3u * (n - 1)) << run.output;
  for (const std::string& m : messages) {
    EXPECT_TRUE(absl::StrContains(m, "worker w1 (rank 1")) << m;
  }
  EXPECT_TRUE(run.exit.exited && run.exit.code != 0) << run.exit.ToString();
}

INSTANTIATE_TEST_SUITE_P(Paths, Killed, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Link" : "Stream";
                         });

// Issue 39: a rank that finishes early (shutdown(), exit 0) while the
// others wait. Before the fix they waited forever.
// Params: (the negotiation link, an elastic job). In an elastic job a
// member that calls shutdown() outside a membership check is no planned
// change either: the same errors, and the others go on.
class EarlyExit : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

// What every EarlyExit run must show: the others' ops fail within seconds
// naming the leaver, and every worker exits 0.
void ExpectEarlyExit(const JobRun& run, int n) {
  std::vector<Fields> left = ParseTagged(run.output, "NEG_LEFT");
  ASSERT_EQ(left.size(), 4u * (n - 1)) << run.output;
  for (const Fields& f : left) {
    EXPECT_EQ(IntField(f, "code"),
              static_cast<int>(absl::StatusCode::kFailedPrecondition))
        << run.output;
    EXPECT_LT(std::stod(f.at("seconds")), 5) << run.output;
  }
  for (const std::string& m : Lines(run.output, "NEG_MSG left:")) {
    EXPECT_TRUE(absl::StrContains(m, "worker w1 (rank 1")) << m;
    EXPECT_TRUE(absl::StrContains(m, "finished execution")) << m;
  }
  // Every worker exited 0 and the coordinator saw every one leave.
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
}

TEST_P(EarlyExit, RankThatShutsDownFailsEveryOpWaitingForItNamingIt) {
  const int n = 3;
  const auto [link, elastic] = GetParam();
  std::vector<std::string> flags;
  if (elastic) flags = {"--min-np", "2"};
  JobRun run = Launch(n, flags, {"early-exit", "1"},
                      {{"KOLO_NEGOTIATION_LINK", link ? "1" : "0"}});
  ExpectEarlyExit(run, n);
}

INSTANTIATE_TEST_SUITE_P(
    Paths, EarlyExit,
    ::testing::Values(std::make_tuple(false, false),
                      std::make_tuple(true, false),
                      std::make_tuple(true, true)),
    [](const ::testing::TestParamInfo<std::tuple<bool, bool>>& p) {
      return std::string(std::get<0>(p.param) ? "Link" : "Stream") +
             (std::get<1>(p.param) ? "Elastic" : "");
    });

// The fast path (KOLO_FAST_PATH=1; docs/design.md "The fast path"): the
// tensors are cache hits, so the ranks wait for each other in the fast
// path's rounds over the data plane, not at the coordinator.
std::map<std::string, std::optional<std::string>> FastPathEnv() {
  return {
      {"KOLO_FAST_PATH", "1"}, {"NEG_WARM", "20"}, {"KOLO_LOG_LEVEL", "debug"}};
}

// A rank that has nothing to run for a second hands over to the
// coordinator, whose stall inspector then names it.
TEST(NegotiationFastPath, StallIsWarnedAboutThenResolves) {
  const int n = 3;
  JobRun run = Launch(n, {"--stall-check-time-seconds", "1"}, {"stall", "4"},
                      FastPathEnv());
  ExpectOk(run, n, "stall");
  EXPECT_TRUE(absl::StrContains(run.output, "fast path granted")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "hands over to the coordinator"))
      << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "'late' waits for rank 2"))
      << run.output;
}

// While the last rank computes, `kolo-ctl status` shows the tensor the
// others wait for on the fast path, and the missing rank (the fast path
// hands the wait over to the coordinator after a second).
TEST(NegotiationFastPath, KoloCtlShowsTheTensorARoundWaitsFor) {
  std::vector<std::string> argv = {
      Bin("kolorun"), "-np",  "3",
      "--log-level",  "info", Bin("kolo-negotiation-worker"),
      "stall",        "5"};
  std::map<std::string, std::optional<std::string>> env = FastPathEnv();
  env.erase("KOLO_LOG_LEVEL");
  Subprocess job(argv, env);
  ASSERT_TRUE(job.Start().ok());
  ASSERT_TRUE(job.WaitForOutput("job state: ", Scaled(absl::Seconds(30))))
      << job.output();
  std::optional<Command> status = CtlStatusJson(job.output());
  ASSERT_TRUE(status.has_value()) << job.output();
  // The warm-up steps submit 'late' too, and kolo-ctl may see one of them
  // pending with another rank missing: wait for the stall to begin, and
  // then for the hand-over to show the stalled rank.
  ASSERT_TRUE(job.WaitForOutput("NEG_STALL_BEGIN", Scaled(absl::Seconds(60))))
      << job.output();
  nlohmann::json waiting;
  const absl::Time until = absl::Now() + absl::Seconds(4);
  while (absl::Now() < until &&
         (waiting.is_null() || waiting["missing"].size() != 1 ||
          waiting["missing"][0]["rank"] != 2)) {
    absl::SleepFor(absl::Milliseconds(500));
    Subprocess ctl(status->argv, status->env);
    ASSERT_TRUE(ctl.Start().ok());
    ASSERT_TRUE(ctl.Wait(Scaled(absl::Seconds(30))).ok()) << ctl.output();
    ASSERT_EQ(ctl.exit_info().code, 0) << ctl.output();
    const nlohmann::json j = nlohmann::json::parse(ctl.output());
    for (const auto& p : j["pending"]) {
      if (p["name"] == "late") waiting = p;
    }
  }
  ASSERT_FALSE(waiting.is_null()) << "'late' never shown pending";
  ASSERT_EQ(waiting["missing"].size(), 1u) << waiting.dump();
  EXPECT_EQ(waiting["missing"][0]["rank"], 2) << waiting.dump();
  ASSERT_TRUE(job.Wait(Scaled(absl::Seconds(60))).ok()) << job.output();
  EXPECT_EQ(job.exit_info().code, 0) << job.output();
  EXPECT_EQ(ParseTagged(job.output(), "NEG_OK").size(), 3u) << job.output();
}

// A rank that shuts down while the others wait in a round leaves the fast
// path with them first: their ops fail naming it, as off the fast path.
TEST(NegotiationFastPath, RankThatShutsDownFailsEveryOpWaitingForIt) {
  const int n = 3;
  JobRun run = Launch(n, {}, {"early-exit", "1"}, FastPathEnv());
  ExpectEarlyExit(run, n);
  EXPECT_TRUE(absl::StrContains(run.output, "fast path granted")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "shutdown: leaving the fast path"))
      << run.output;
}

}  // namespace
}  // namespace kolo::testing
