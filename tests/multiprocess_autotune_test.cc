// Autotune through real processes (issue 36 point 3): kolorun --autotune
// jobs of kolo-fusion-worker (tests/workers/fusion_worker.cc, which checks
// every output bit for bit). Every rank logs each switch the coordinator
// sends (worker_lib/runtime/op_runtime_plans.cc: "autotune: switch after
// plan N ..."); the test checks that every rank switched at the same plans to
// the same settings, that the last switch is the choice, after the sample
// budget, and the CSV log (one line per sample and the choice). The same
// with Horovod's variables instead of the flags, and with the coordinator
// that rank 0 hosts when the workers start without kolorun (torchrun's
// variables), which reads KOLO_AUTOTUNE itself. Over TCP the data plane's
// small-message cut-off and segment size are tuned too, but not the
// hierarchy on one host; on two fake hosts of two ranks (kolorun -H with
// KOLO_TEST_FAKE_HOST, as multiprocess_hierarchical_test) every switch
// carries the hierarchy on or off, alike on every rank, and every result
// stays exact; with KOLO_HIERARCHICAL=1 there it is the user's and is not
// tuned.
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/net.h"
#include "gtest/gtest.h"
#include "tests/testing/job_run.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/timeouts.h"

namespace kolo::testing {
namespace {

using Env = std::map<std::string, std::optional<std::string>>;

constexpr absl::string_view kSwitchTag = "[runtime] [info] autotune: ";

// Per rank, its "autotune: ..." log lines without the prefix and timestamp:
// "switch after plan 6: fusion threshold ... (sample 1)". `output`: a
// kolorun job's (lines prefixed "[rank]"), or one worker's with `rank`.
std::map<int, std::vector<std::string>> SwitchesByRank(
    const std::string& output, std::optional<int> rank = std::nullopt) {
  std::map<int, std::vector<std::string>> by_rank;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    const size_t at = line.find(kSwitchTag);
    if (!absl::StartsWith(line, "[") || at == absl::string_view::npos) {
      continue;
    }
    int r = rank.value_or(-1);
    if (!rank.has_value() &&
        !absl::SimpleAtoi(line.substr(1, line.find(']') - 1), &r)) {
      continue;
    }
    by_rank[r].emplace_back(line.substr(at + kSwitchTag.size()));
  }
  return by_rank;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every rank's switches are the same; the last is the choice after
// `samples` samples; the CSV `log` has a line per sample and the choice.
void ExpectSameSwitches(const std::map<int, std::vector<std::string>>& by_rank,
                        int n, int samples, const std::string& log,
                        const std::string& output) {
  ASSERT_EQ(by_rank.size(), static_cast<size_t>(n)) << output;
  const std::vector<std::string>& first = by_rank.begin()->second;
  ASSERT_FALSE(first.empty());
  for (const auto& [rank, lines] : by_rank) {
    EXPECT_EQ(lines, first) << "rank " << rank << "\n" << output;
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
            "small_allreduce_kb,segment_kb,hierarchical,"
            "score_bytes_per_second");
  EXPECT_TRUE(absl::StartsWith(csv.back(), "best,")) << csv.back();
}

// The CSV log's last line ("best,..."), split.
std::vector<std::string> BestLine(const std::string& log) {
  std::vector<std::string> csv =
      absl::StrSplit(ReadAll(log), '\n', absl::SkipEmpty());
  if (csv.empty()) return {};
  return absl::StrSplit(csv.back(), ',');
}

void ExpectSameSwitches(const JobRun& run, int n, int samples,
                        const std::string& log) {
  ASSERT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "FUS_FAIL")) << run.output;
  ExpectSameSwitches(SwitchesByRank(run.output), n, samples, log, run.output);
}

// A kolorun --autotune job of kolo-fusion-worker on two fake hosts of two
// ranks (kolorun -H a:2,b:2 with KOLO_TEST_FAKE_HOST) that takes `samples`
// samples and logs them to `log` (removed first), with KOLO_HIERARCHICAL
// `hierarchical` (nullopt: unset, auto).
JobRun RunOnTwoFakeHosts(const std::string& log, int samples,
                         std::optional<std::string> hierarchical) {
  std::remove(log.c_str());
  return RunJob(
      {Bin("kolorun"), "-np", "4", "-H", "a:2,b:2", "--launcher-cmd",
       "env KOLO_TEST_FAKE_HOST={host}", "--autotune",
       "--autotune-warmup-samples", "1", "--autotune-steps-per-sample", "2",
       "--autotune-bayes-opt-max-samples", std::to_string(samples),
       "--autotune-log-file", log, Bin("kolo-fusion-worker"), "allreduce",
       "30"},
      Env{{"KOLO_LOG_LEVEL", "info"},
          {"KOLO_AUTOTUNE", std::nullopt},
          {"KOLO_HIERARCHICAL", std::move(hierarchical)}},
      absl::Seconds(180));
}

// Every switch (as rank 0 logged them; ExpectSameSwitches checked that every
// rank's are the same) carries the data plane's sizes and never the
// hierarchy, and the CSV's best line has a cut-off and no hierarchy column.
void ExpectDataPlaneTunedWithoutHierarchy(const JobRun& run,
                                          const std::string& log) {
  const std::map<int, std::vector<std::string>> by_rank =
      SwitchesByRank(run.output);
  ASSERT_FALSE(by_rank.empty());
  for (const std::string& line : by_rank.begin()->second) {
    EXPECT_TRUE(absl::StrContains(line, "small-message cut-off ")) << line;
    EXPECT_FALSE(absl::StrContains(line, "hierarchical")) << line;
  }
  const std::vector<std::string> best = BestLine(log);
  ASSERT_EQ(best.size(), 8u) << ReadAll(log);
  EXPECT_FALSE(best[4].empty()) << ReadAll(log);
  EXPECT_TRUE(best[6].empty()) << ReadAll(log);
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
  // One host, shared memory: the data plane's settings are not tuned.
  EXPECT_FALSE(absl::StrContains(run.output, "small-message cut-off"))
      << run.output;
}

// Over TCP (KOLO_SHM=0) every rank's allreduce runs the message algorithms:
// the small-message cut-off and the segment size are tuned too, every rank
// switches them at the same plans, and every result stays exact.
TEST(MultiprocessAutotune, TcpDataPlaneSettingsAreTunedToo) {
  const std::string log = ::testing::TempDir() + "/mp_autotune_tcp.csv";
  std::remove(log.c_str());
  JobRun run = RunJob(
      {Bin("kolorun"), "-np", "2", "--autotune", "--autotune-warmup-samples",
       "1", "--autotune-steps-per-sample", "2",
       "--autotune-bayes-opt-max-samples", "4", "--autotune-log-file", log,
       Bin("kolo-fusion-worker"), "allreduce", "30"},
      Env{{"KOLO_LOG_LEVEL", "info"},
          {"KOLO_AUTOTUNE", std::nullopt},
          {"KOLO_SHM", "0"}});
  ExpectSameSwitches(run, 2, 4, log);
  // One host: no hierarchy to tune.
  ExpectDataPlaneTunedWithoutHierarchy(run, log);
}

// Two fake hosts of two ranks (KOLO_HIERARCHICAL auto: two levels): every
// rank's data plane can switch between flat and two levels, so every switch
// carries the choice, the same on every rank at the same plan, and the
// allreduces stay exact (the worker checks every bit) whichever runs.
TEST(MultiprocessAutotune, HierarchyIsTunedAcrossHosts) {
  const std::string log = ::testing::TempDir() + "/mp_autotune_hier.csv";
  JobRun run = RunOnTwoFakeHosts(log, 6, std::nullopt);
  ExpectSameSwitches(run, 4, 6, log);
  EXPECT_EQ(Lines(run.output,
                  "hierarchical collectives "
                  "(KOLO_HIERARCHICAL=auto)")
                .size(),
            4u)
      << run.output;
  const std::map<int, std::vector<std::string>> by_rank =
      SwitchesByRank(run.output);
  ASSERT_FALSE(by_rank.empty());
  const std::vector<std::string>& switches = by_rank.begin()->second;
  ASSERT_FALSE(switches.empty());
  // The first switch starts over from the ranks' own: two levels.
  EXPECT_TRUE(absl::StrContains(switches.front(), ", hierarchical on"))
      << switches.front();
  for (const std::string& line : switches) {
    EXPECT_TRUE(absl::StrContains(line, ", hierarchical on") ||
                absl::StrContains(line, ", hierarchical off"))
        << line;
  }
  const std::vector<std::string> best = BestLine(log);
  ASSERT_EQ(best.size(), 8u) << ReadAll(log);
  EXPECT_TRUE(best[6] == "0" || best[6] == "1") << ReadAll(log);
  EXPECT_TRUE(absl::StrContains(switches.back(), best[6] == "1"
                                                     ? ", hierarchical on"
                                                     : ", hierarchical off"))
      << switches.back() << "\n"
      << ReadAll(log);
}

// KOLO_HIERARCHICAL=1 forces the two levels on the same fake hosts: the
// user's choice, so the switches never carry the hierarchy and the CSV's
// column stays empty; the data plane's sizes are tuned as ever.
TEST(MultiprocessAutotune, AForcedHierarchyIsNotTuned) {
  const std::string log = ::testing::TempDir() + "/mp_autotune_forced.csv";
  JobRun run = RunOnTwoFakeHosts(log, 3, "1");
  ExpectSameSwitches(run, 4, 3, log);
  ExpectDataPlaneTunedWithoutHierarchy(run, log);
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

// Without kolorun, rank 0 hosts the coordinator (worker_lib/config.h:
// host_coordinator) and reads KOLO_AUTOTUNE and its settings itself.
TEST(MultiprocessAutotune, CoordinatorHostedByRank0) {
  const std::string log = ::testing::TempDir() + "/mp_autotune_hosted.csv";
  std::remove(log.c_str());
  absl::StatusOr<int> port = net::PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  const int n = 2;
  std::vector<std::unique_ptr<Subprocess>> workers;
  for (int r = 0; r < n; ++r) {
    Env env{{"KOLO_LAUNCHER", std::nullopt},
            {"KOLO_COORDINATOR", std::nullopt},
            {"KOLO_SECRET_FILE", std::nullopt},
            {"KOLO_SECRET", "hosted-autotune-secret-0123456789abcdef"},
            {"RANK", std::to_string(r)},
            {"WORLD_SIZE", std::to_string(n)},
            {"LOCAL_RANK", std::to_string(r)},
            {"MASTER_ADDR", "127.0.0.1"},
            {"MASTER_PORT", std::to_string(*port)},
            {"KOLO_LOG_LEVEL", "info"},
            {"KOLO_AUTOTUNE", "1"},
            {"KOLO_AUTOTUNE_LOG", log},
            {"KOLO_AUTOTUNE_WARMUP_SAMPLES", "1"},
            {"KOLO_AUTOTUNE_STEPS_PER_SAMPLE", "2"},
            {"KOLO_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "3"}};
    workers.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{Bin("kolo-fusion-worker"), "allreduce", "30"},
        env));
    ASSERT_TRUE(workers.back()->Start().ok());
  }
  std::map<int, std::vector<std::string>> by_rank;
  std::string outputs;
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(workers[r]->Wait(Scaled(absl::Seconds(120))).ok())
        << workers[r]->output();
    const std::string& out = workers[r]->output();
    absl::StrAppend(&outputs, "--- rank ", r, "\n", out);
    ASSERT_TRUE(workers[r]->exit_info().exited &&
                workers[r]->exit_info().code == 0)
        << workers[r]->exit_info().ToString() << "\n"
        << out;
    EXPECT_FALSE(absl::StrContains(out, "FUS_FAIL")) << out;
    by_rank.merge(SwitchesByRank(out, r));
  }
  ExpectSameSwitches(by_rank, n, 3, log, outputs);
}

}  // namespace
}  // namespace kolo::testing
