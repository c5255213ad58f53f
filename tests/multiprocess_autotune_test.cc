// Autotune through real processes (issue 36 point 3): kolorun --autotune
// jobs of kolo-fusion-worker (tests/workers/fusion_worker.cc, which checks
// every output bit for bit). Every rank logs each switch the coordinator
// sends (worker_lib/runtime/op_runtime_plans.cc: "autotune: switch after
// plan N ..."); the test checks that every rank switched at the same plans to
// the same settings, that the last switch is the choice, after the sample
// budget, and the CSV log (one line per sample and the choice). The same
// with Horovod's variables instead of the flags.
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/testing/job_run.h"

namespace kolo::testing {
namespace {

using Env = std::map<std::string, std::optional<std::string>>;

// Per rank, its "autotune: ..." log lines without the prefix and timestamp:
// "switch after plan 6: fusion threshold ... (sample 1)".
std::map<int, std::vector<std::string>> SwitchesByRank(
    const std::string& output) {
  std::map<int, std::vector<std::string>> by_rank;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    const size_t at = line.find("[runtime] [info] autotune: ");
    if (!absl::StartsWith(line, "[") || at == absl::string_view::npos) {
      continue;
    }
    int rank = -1;
    if (!absl::SimpleAtoi(line.substr(1, line.find(']') - 1), &rank)) continue;
    by_rank[rank].emplace_back(
        line.substr(at + std::string("[runtime] [info] autotune: ").size()));
  }
  return by_rank;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void ExpectSameSwitches(const JobRun& run, int n, int samples,
                        const std::string& log) {
  ASSERT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "FUS_FAIL")) << run.output;
  std::map<int, std::vector<std::string>> by_rank = SwitchesByRank(run.output);
  ASSERT_EQ(by_rank.size(), static_cast<size_t>(n)) << run.output;
  const std::vector<std::string>& first = by_rank.begin()->second;
  ASSERT_FALSE(first.empty());
  for (const auto& [rank, lines] : by_rank) {
    EXPECT_EQ(lines, first) << "rank " << rank << "\n" << run.output;
  }
  EXPECT_TRUE(absl::StartsWith(first.back(), "chosen after plan "))
      << first.back();
  EXPECT_TRUE(
      absl::EndsWith(first.back(), absl::StrCat("(sample ", samples, ")")))
      << first.back();
  for (size_t i = 0; i + 1 < first.size(); ++i) {
    EXPECT_TRUE(absl::StartsWith(first[i], "switch after plan ")) << first[i];
  }
  std::vector<std::string> csv =
      absl::StrSplit(ReadAll(log), '\n', absl::SkipEmpty());
  ASSERT_EQ(csv.size(), static_cast<size_t>(1 + samples + 1)) << ReadAll(log);
  EXPECT_EQ(csv[0],
            "sample,fusion_threshold_mb,cycle_time_ms,cache_enabled,"
            "score_bytes_per_second");
  EXPECT_TRUE(absl::StartsWith(csv.back(), "best,")) << csv.back();
}

TEST(MultiprocessAutotune, EveryRankSwitchesAtTheSamePlan) {
  const std::string log = ::testing::TempDir() + "/mp_autotune.csv";
  std::remove(log.c_str());
  JobRun run = RunJob(
      {Bin("kolorun"), "-np", "3", "--autotune", "--autotune-warmup-samples",
       "1", "--autotune-steps-per-sample", "2",
       "--autotune-bayes-opt-max-samples", "4", "--autotune-log-file", log,
       Bin("kolo-fusion-worker"), "allreduce", "30"},
      Env{{"KOLO_LOG_LEVEL", "info"}, {"KOLO_AUTOTUNE", std::nullopt}});
  ExpectSameSwitches(run, 3, 4, log);
}

TEST(MultiprocessAutotune, HorovodsVariables) {
  const std::string log = ::testing::TempDir() + "/mp_autotune_hvd.csv";
  std::remove(log.c_str());
  JobRun run = RunJob(
      {Bin("kolorun"), "-np", "2", Bin("kolo-fusion-worker"), "steps", "30"},
      Env{{"KOLO_LOG_LEVEL", "info"},
          {"HOROVOD_AUTOTUNE", "1"},
          {"HOROVOD_AUTOTUNE_LOG", log},
          {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "0"},
          {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "3"},
          {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "3"},
          {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.5"}});
  ExpectSameSwitches(run, 2, 3, log);
  EXPECT_FALSE(absl::StrContains(run.output, "HOROVOD_AUTOTUNE is not used"))
      << run.output;
}

}  // namespace
}  // namespace kolo::testing
