// Tests of the coordinator's autotuner (coordinator/autotune.h): it
// converges on a synthetic workload whose best setting is known, within its
// sample budget; it switches only at sample ends (one decision point per
// sample, after the warmup); the data plane's sizes and the hierarchy on or
// off once the ranks allow them (workloads where two levels win, and where
// flat wins); the CSV log; a restart; the step detector; the words for the
// data-plane settings that its log line and the ranks' share.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "coordinator/autotune.h"
#include "proto/autotune_text.h"

namespace kolo::coordinator {
namespace {

// A synthetic workload: the bytes reduced per second peak at a fusion
// threshold of 32 MiB and a cycle time of 5 ms, and fall off smoothly (on a
// log scale for the threshold) away from them; the response cache on is
// better (by default) or worse (with `cache_hurts`). When the data plane is
// tuned, the rate also peaks at a small-message cut-off of 256 KiB and a
// segment size of 1 MiB (the automatic segment size counts as 45 KiB),
// where it is twice the rate with the data plane not tuned. When the
// hierarchy is tuned, two levels run at the full rate and flat at 0.6 of it
// (or the other way round, with `flat_wins`).
constexpr double kBestLog2Threshold = 25;  // 32 MiB
constexpr double kBestCycleMs = 5;
constexpr double kBestLog2Small = 18;    // 256 KiB
constexpr double kBestLog2Segment = 20;  // 1 MiB
bool cache_hurts = false;
bool flat_wins = false;
double Rate(const TunedSettings& s) {
  const double dt =
      std::log2(static_cast<double>(s.fusion_threshold)) - kBestLog2Threshold;
  const double dc = absl::ToDoubleMilliseconds(s.cycle_time) - kBestCycleMs;
  const double cache = s.cache_enabled != cache_hurts ? 1.0 : 0.8;
  double data = 1;
  if (s.data_plane) {
    const double ds = std::log2(static_cast<double>(s.small_allreduce_bytes)) -
                      kBestLog2Small;
    const double dg = (s.segment_bytes == 0
                           ? 15.5
                           : std::log2(static_cast<double>(s.segment_bytes))) -
                      kBestLog2Segment;
    data = 2 / (1 + 0.3 * ds * ds + 0.3 * dg * dg);
  }
  if (s.hierarchical_tuned) data *= s.hierarchical != flat_wins ? 1.0 : 0.6;
  return data * cache * 1e9 / (1 + 0.5 * dt * dt + 0.02 * dc * dc);
}

struct TuneRun {
  std::vector<int64_t> switch_steps;  // steps after which settings changed
  TunedSettings final;
  int64_t steps = 0;
};

// Drives `tuner` with steps of one second each, reducing rate(current, step)
// bytes per step (Rate by default), until it is done or `max_steps` ran.
TuneRun Drive(
    Autotuner& tuner, int64_t max_steps,
    const std::function<double(const TunedSettings&, int64_t)>& rate =
        [](const TunedSettings& s, int64_t) { return Rate(s); }) {
  TuneRun run;
  absl::Time now = absl::UnixEpoch();
  uint64_t bytes = 0;
  for (int64_t step = 1; step <= max_steps && !tuner.done(); ++step) {
    bytes += static_cast<uint64_t>(rate(tuner.current(), step));
    now += absl::Seconds(1);
    if (tuner.EndStep(bytes, now).has_value()) run.switch_steps.push_back(step);
    run.steps = step;
  }
  run.final = tuner.current();
  return run;
}

AutotuneOptions Options() {
  AutotuneOptions o;
  o.enabled = true;
  o.warmup_samples = 2;
  o.steps_per_sample = 3;
  o.max_samples = 40;
  o.noise = 0.001;
  o.initial = {uint64_t{128} << 20, absl::Milliseconds(1)};
  return o;
}

TEST(Autotune, ConvergesOnTheKnownBestWithinTheBudget) {
  absl::StatusOr<std::unique_ptr<Autotuner>> tuner =
      Autotuner::Create(Options());
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  // One step starts the first sample; (warmup + max_samples) samples.
  const int64_t budget = 1 + (2 + 40) * 3;
  TuneRun run = Drive(**tuner, budget);
  ASSERT_TRUE((*tuner)->done()) << "not done after " << run.steps << " steps";
  EXPECT_EQ(run.steps, budget);
  EXPECT_EQ((*tuner)->scored_samples(), 40);
  const double log2_threshold =
      std::log2(static_cast<double>(run.final.fusion_threshold));
  EXPECT_NEAR(log2_threshold, kBestLog2Threshold, 0.5)
      << run.final.fusion_threshold;
  EXPECT_NEAR(absl::ToDoubleMilliseconds(run.final.cycle_time), kBestCycleMs,
              1.5);
  EXPECT_TRUE(run.final.cache_enabled);
  // Far better than the starting setting.
  EXPECT_GT(Rate(run.final), 0.9 * 1e9);
  EXPECT_LT(Rate(Options().initial), 0.5 * 1e9);
  // Done: settings never change again.
  const TunedSettings chosen = (*tuner)->current();
  EXPECT_FALSE((*tuner)
                   ->EndStep(1ull << 60, absl::UnixEpoch() + absl::Hours(1))
                   .has_value());
  EXPECT_EQ((*tuner)->current(), chosen);
}

// The starting setting's first scored sample is a lucky one (ten times its
// rate: the best score of the whole search). The search's best settings
// run again before the choice, so the luck does not win: the choice is near
// the known best, within the same budget.
TEST(Autotune, ALuckySampleIsRunAgainAndNotChosen) {
  const AutotuneOptions o = Options();
  absl::StatusOr<std::unique_ptr<Autotuner>> tuner = Autotuner::Create(o);
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  // Steps of the first scored sample: after the first step and the warmup.
  const int64_t first = 1 + o.warmup_samples * o.steps_per_sample + 1;
  const int64_t last = first + o.steps_per_sample - 1;
  const int64_t budget = 1 + (o.warmup_samples + o.max_samples) *
                                 static_cast<int64_t>(o.steps_per_sample);
  TuneRun run =
      Drive(**tuner, budget, [&](const TunedSettings& s, int64_t step) {
        return Rate(s) * (step >= first && step <= last ? 10 : 1);
      });
  ASSERT_TRUE((*tuner)->done()) << "not done after " << run.steps << " steps";
  EXPECT_EQ((*tuner)->scored_samples(), o.max_samples);
  // Without the second run the choice is the starting setting (a fifth of
  // the best rate); with it, a setting near the best (the search spent
  // samples near the lucky one, so not as near as without the luck).
  EXPECT_FALSE(run.final == o.initial);
  EXPECT_GT(Rate(run.final), 0.6 * 1e9)
      << run.final.fusion_threshold << " " << run.final.cycle_time;
}

TEST(Autotune, TurnsTheCacheOffWhenThatIsBetter) {
  cache_hurts = true;
  absl::StatusOr<std::unique_ptr<Autotuner>> tuner =
      Autotuner::Create(Options());
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  TuneRun run = Drive(**tuner, 1000);
  cache_hurts = false;
  ASSERT_TRUE((*tuner)->done());
  EXPECT_FALSE(run.final.cache_enabled);
  EXPECT_NEAR(std::log2(static_cast<double>(run.final.fusion_threshold)),
              kBestLog2Threshold, 0.5);
}

TEST(Autotune, SwitchesOnlyAtSampleEndsAfterTheWarmup) {
  AutotuneOptions o = Options();
  o.max_samples = 10;
  absl::StatusOr<std::unique_ptr<Autotuner>> tuner = Autotuner::Create(o);
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  TuneRun run = Drive(**tuner, 1000);
  ASSERT_FALSE(run.switch_steps.empty());
  for (int64_t step : run.switch_steps) {
    // Sample k (counting the warmup) ends at step 1 + k * steps_per_sample;
    // the first scored sample (the starting setting) ends after the warmup.
    EXPECT_EQ((step - 1) % o.steps_per_sample, 0) << step;
    EXPECT_GE(step, 1 + (o.warmup_samples + 1) * o.steps_per_sample) << step;
  }
}

TEST(Autotune, WritesOneCsvLinePerSampleAndTheChoice) {
  AutotuneOptions o = Options();
  o.max_samples = 5;
  o.log_file = ::testing::TempDir() + "/autotune_log.csv";
  absl::StatusOr<std::unique_ptr<Autotuner>> tuner = Autotuner::Create(o);
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  Drive(**tuner, 1000);
  ASSERT_TRUE((*tuner)->done());
  std::ifstream in(o.log_file);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> lines =
      absl::StrSplit(text.str(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1u + 5u + 1u) << text.str();
  EXPECT_EQ(lines[0],
            "sample,fusion_threshold_mb,cycle_time_ms,cache_enabled,"
            "small_allreduce_kb,segment_kb,hierarchical,"
            "score_bytes_per_second");
  // The first scored sample is the starting setting; neither the data plane
  // nor the hierarchy is tuned (their columns are empty).
  EXPECT_EQ(lines[1].substr(0, 21), "1,128.000,1.000,1,,,,") << lines[1];
  EXPECT_EQ(lines.back().substr(0, 5), "best,");
  for (const std::string& line : lines) {
    EXPECT_EQ(std::vector<std::string>(absl::StrSplit(line, ',')).size(), 8u)
        << line;
  }
}

// Once the ranks say that their allreduce runs the message algorithms, the
// tuner starts over with the small-message cut-off and the segment size
// added, from the ranks' settings, and finds the best of all five.
TEST(Autotune, TunesTheDataPlaneOnceTheRanksRunMessages) {
  AutotuneOptions o = Options();
  o.max_samples = 60;
  o.log_file = ::testing::TempDir() + "/autotune_data_plane.csv";
  absl::StatusOr<std::unique_ptr<Autotuner>> tuner = Autotuner::Create(o);
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  Autotuner& t = **tuner;
  // Shared memory: nothing to tune there.
  EXPECT_FALSE(t.TuneDataPlane({.message_allreduce = false}).has_value());
  EXPECT_FALSE(t.tunes_data_plane());
  // A few scored samples, then the ranks turn out to run messages.
  Drive(t, 1 + (2 + 3) * 3);
  ASSERT_GT(t.scored_samples(), 0);
  std::optional<TunedSettings> start =
      t.TuneDataPlane({.message_allreduce = true,
                       .small_allreduce_bytes = 64 << 10,
                       .segment_bytes = 0});
  ASSERT_TRUE(start.has_value());
  EXPECT_TRUE(start->data_plane);
  EXPECT_EQ(start->small_allreduce_bytes, 64u << 10);
  EXPECT_EQ(start->segment_bytes, 0u);
  EXPECT_EQ(start->fusion_threshold, o.initial.fusion_threshold);
  EXPECT_EQ(t.scored_samples(), 0);
  EXPECT_TRUE(t.tunes_data_plane());
  // Only once.
  EXPECT_FALSE(t.TuneDataPlane({.message_allreduce = true,
                                .small_allreduce_bytes = 1 << 20})
                   .has_value());
  TuneRun run = Drive(t, 10000);
  ASSERT_TRUE(t.done());
  EXPECT_EQ(t.scored_samples(), 60);
  ASSERT_TRUE(run.final.data_plane);
  EXPECT_NEAR(std::log2(static_cast<double>(run.final.small_allreduce_bytes)),
              kBestLog2Small, 1.0)
      << run.final.small_allreduce_bytes;
  ASSERT_NE(run.final.segment_bytes, 0u);
  EXPECT_NEAR(std::log2(static_cast<double>(run.final.segment_bytes)),
              kBestLog2Segment, 1.0)
      << run.final.segment_bytes;
  EXPECT_GT(Rate(run.final), 1.6 * 1e9);
  EXPECT_LE(run.final.small_allreduce_bytes, o.max_small_allreduce_bytes);
  EXPECT_GE(run.final.small_allreduce_bytes, o.min_small_allreduce_bytes);
  // The CSV's data-plane columns are filled from the restart on.
  std::ifstream in(o.log_file);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> lines =
      absl::StrSplit(text.str(), '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 3u) << text.str();
  EXPECT_EQ(lines.back().substr(0, 5), "best,");
  const std::vector<std::string> best = absl::StrSplit(lines.back(), ',');
  ASSERT_EQ(best.size(), 8u) << lines.back();
  EXPECT_FALSE(best[4].empty()) << lines.back();
  EXPECT_FALSE(best[5].empty()) << lines.back();
  EXPECT_TRUE(best[6].empty()) << lines.back();  // the hierarchy: not tuned
  EXPECT_FALSE(run.final.hierarchical_tuned);
  // Done: no more changes.
  EXPECT_FALSE(t.TuneDataPlane({.message_allreduce = true}).has_value());
}

// The ranks of a job on several hosts (some with several ranks), with the
// two levels in force and KOLO_HIERARCHICAL auto: the data plane's settings
// and the hierarchy on or off are tuned.
constexpr RanksDataPlane kTwoLevels{.message_allreduce = true,
                                    .small_allreduce_bytes = 64 << 10,
                                    .segment_bytes = 0,
                                    .hierarchical_tunable = true,
                                    .hierarchical = true};

// Tunes a workload where two levels win (or flat, with `flat`) from the
// ranks' kTwoLevels, within a budget of 60 samples; returns the choice and
// checks the CSV's hierarchical column (the second sample: the start, flat).
TunedSettings TuneHierarchy(bool flat) {
  AutotuneOptions o = Options();
  o.max_samples = 60;
  o.log_file = ::testing::TempDir() + "/autotune_hierarchy.csv";
  absl::StatusOr<std::unique_ptr<Autotuner>> tuner = Autotuner::Create(o);
  EXPECT_TRUE(tuner.ok()) << tuner.status();
  if (!tuner.ok()) return {};
  Autotuner& t = **tuner;
  std::optional<TunedSettings> start = t.TuneDataPlane(kTwoLevels);
  EXPECT_TRUE(start.has_value());
  if (!start.has_value()) return {};
  EXPECT_TRUE(start->hierarchical_tuned);
  EXPECT_TRUE(start->hierarchical);  // the ranks' value
  EXPECT_TRUE(t.tunes_hierarchical());
  EXPECT_FALSE(t.TuneDataPlane(kTwoLevels).has_value());  // only once
  flat_wins = flat;
  // One step starts the first sample; (warmup + max_samples) samples.
  TuneRun run = Drive(t, 1 + (2 + 60) * 3);
  flat_wins = false;
  EXPECT_TRUE(t.done()) << "not done after " << run.steps << " steps";
  EXPECT_TRUE(run.final.hierarchical_tuned);
  std::ifstream in(o.log_file);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> lines =
      absl::StrSplit(text.str(), '\n', absl::SkipEmpty());
  EXPECT_EQ(lines.size(), 1u + 60u + 1u) << text.str();
  // The first two samples: the start (two levels), then the same flat.
  if (lines.size() > 2) {
    const std::vector<std::string> first = absl::StrSplit(lines[1], ',');
    const std::vector<std::string> second = absl::StrSplit(lines[2], ',');
    if (first.size() == 8u && second.size() == 8u) {
      EXPECT_EQ(first[6], "1") << lines[1];
      EXPECT_EQ(second[6], "0") << lines[2];
      EXPECT_EQ(
          std::vector<std::string>(first.begin() + 1, first.begin() + 6),
          std::vector<std::string>(second.begin() + 1, second.begin() + 6))
          << lines[1] << "\n"
          << lines[2];
    }
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> f = absl::StrSplit(lines[i], ',');
    EXPECT_EQ(f.size(), 8u) << lines[i];
    if (f.size() == 8u) {
      EXPECT_TRUE(f[6] == "0" || f[6] == "1") << lines[i];
    }
  }
  if (!lines.empty()) {
    const std::vector<std::string> best = absl::StrSplit(lines.back(), ',');
    EXPECT_EQ(best[0], "best");
    EXPECT_EQ(best.size() > 6 ? best[6] : "",
              run.final.hierarchical ? "1" : "0")
        << lines.back();
  }
  return run.final;
}

TEST(Autotune, KeepsTheHierarchyWhenTwoLevelsWin) {
  const TunedSettings chosen = TuneHierarchy(/*flat=*/false);
  EXPECT_TRUE(chosen.hierarchical);
  EXPECT_TRUE(chosen.data_plane);
  EXPECT_GT(Rate(chosen), 1.6 * 1e9);
}

TEST(Autotune, TurnsTheHierarchyOffWhenFlatWins) {
  const TunedSettings chosen = TuneHierarchy(/*flat=*/true);
  EXPECT_FALSE(chosen.hierarchical);
  flat_wins = true;
  EXPECT_GT(Rate(chosen), 1.6 * 1e9);
  flat_wins = false;
}

// The dimension comes only when every rank can switch (the negotiator ANDs
// the ranks' flags); one that comes after the data plane's restarts the
// tuning once more, keeping the data plane's start.
TEST(Autotune, AddsTheHierarchyOnlyWhenEveryRankCanSwitch) {
  absl::StatusOr<std::unique_ptr<Autotuner>> tuner =
      Autotuner::Create(Options());
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  Autotuner& t = **tuner;
  RanksDataPlane one_host = kTwoLevels;
  one_host.hierarchical_tunable = false;
  one_host.hierarchical = false;
  std::optional<TunedSettings> start = t.TuneDataPlane(one_host);
  ASSERT_TRUE(start.has_value());
  EXPECT_TRUE(start->data_plane);
  EXPECT_FALSE(start->hierarchical_tuned);
  EXPECT_FALSE(t.tunes_hierarchical());
  Drive(t, 1 + (2 + 3) * 3);
  ASSERT_GT(t.scored_samples(), 0);
  RanksDataPlane now_off = kTwoLevels;
  now_off.small_allreduce_bytes = 1 << 20;  // ignored: already tuned
  now_off.hierarchical = false;             // KOLO_HIERARCHICAL's start
  start = t.TuneDataPlane(now_off);
  ASSERT_TRUE(start.has_value());
  EXPECT_TRUE(start->hierarchical_tuned);
  EXPECT_FALSE(start->hierarchical);
  EXPECT_EQ(start->small_allreduce_bytes, 64u << 10);
  EXPECT_EQ(t.scored_samples(), 0);
  EXPECT_FALSE(t.TuneDataPlane(kTwoLevels).has_value());
  Drive(t, 10000);
  ASSERT_TRUE(t.done());
  EXPECT_TRUE(t.current().hierarchical_tuned);
  EXPECT_TRUE(t.current().hierarchical);  // two levels win by default
}

TEST(Autotune, RefusesBadOptionsNamingTheFlag) {
  AutotuneOptions o = Options();
  o.steps_per_sample = 0;
  EXPECT_NE(Autotuner::Create(o).status().message().find(
                "--autotune-steps-per-sample"),
            std::string::npos);
  o = Options();
  o.max_samples = 1;
  EXPECT_NE(Autotuner::Create(o).status().message().find(
                "--autotune-bayes-opt-max-samples"),
            std::string::npos);
  o = Options();
  o.noise = -1;
  EXPECT_NE(Autotuner::Create(o).status().message().find(
                "--autotune-gaussian-process-noise"),
            std::string::npos);
  o = Options();
  o.min_segment_bytes = o.max_segment_bytes;
  EXPECT_NE(Autotuner::Create(o).status().message().find("search bounds"),
            std::string::npos);
  o = Options();
  o.log_file = "/nonexistent-dir/x.csv";
  EXPECT_NE(Autotuner::Create(o).status().message().find("--autotune-log-file"),
            std::string::npos);
}

TEST(Autotune, RestartGoesBackToTheStartUnlessDone) {
  AutotuneOptions o = Options();
  o.max_samples = 4;
  absl::StatusOr<std::unique_ptr<Autotuner>> tuner = Autotuner::Create(o);
  ASSERT_TRUE(tuner.ok());
  Autotuner& t = **tuner;
  // Into the scored samples, off the starting setting.
  TuneRun partial = Drive(t, 1 + (2 + 2) * 3);
  ASSERT_FALSE(t.done());
  ASSERT_FALSE(partial.switch_steps.empty());
  std::optional<TunedSettings> back = t.Restart();
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, o.initial);
  EXPECT_EQ(t.scored_samples(), 0);
  Drive(t, 1000);
  ASSERT_TRUE(t.done());
  const TunedSettings chosen = t.current();
  EXPECT_FALSE(t.Restart().has_value());
  EXPECT_EQ(t.current(), chosen);
}

proto::Plan PlanOf(std::vector<std::string> names,
                   std::vector<int32_t> bits = {}, bool by_bit = false) {
  proto::Plan plan;
  proto::Response& r = *plan.add_responses();
  for (const std::string& n : names) r.add_names(n);
  for (int32_t b : bits) r.add_cache_bits(b);
  r.set_by_bit(by_bit);
  return plan;
}

TEST(StepDetector, AStepEndsWhenATensorComesAgain) {
  StepDetector d;
  EXPECT_FALSE(d.Observe(PlanOf({"a", "b"})));
  EXPECT_FALSE(d.Observe(PlanOf({"c"})));
  EXPECT_TRUE(d.Observe(PlanOf({"a"})));
  EXPECT_FALSE(d.Observe(PlanOf({"b", "c"})));
  EXPECT_TRUE(d.Observe(PlanOf({"a", "b", "c"})));
}

TEST(StepDetector, ACachedTensorIsKnownByItsBit) {
  StepDetector d;
  // The first step gives bits 0 and 1 with the names; the next sends bits.
  EXPECT_FALSE(d.Observe(PlanOf({"a", "b"}, {0, 1})));
  EXPECT_TRUE(d.Observe(PlanOf({}, {0, 1}, /*by_bit=*/true)));
  EXPECT_TRUE(d.Observe(PlanOf({}, {0, 1}, /*by_bit=*/true)));
}

// The coordinator's "autotune: done" line and every rank's switch line say
// the data plane's settings in these words (multiprocess_autotune_test looks
// for them in the ranks' lines).
TEST(DataPlaneSettingsText, SaysBothSettingsAndTheAutomaticSegment) {
  EXPECT_EQ(proto::DataPlaneSettingsText(262144, 1048576),
            "small-message cut-off 262144 bytes, segment 1048576 bytes");
  EXPECT_EQ(proto::DataPlaneSettingsText(4096, 0),
            "small-message cut-off 4096 bytes, segment automatic");
}

}  // namespace
}  // namespace kolo::coordinator
