#include "bench/step.h"

#include <chrono>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "bench/case.h"

namespace kolo::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Millis(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

absl::Status Prefixed(const absl::Status& st, absl::string_view what) {
  return absl::Status(st.code(), absl::StrCat(what, ": ", st.message()));
}

std::string SettingName(const StepSetting& s) {
  return absl::StrCat(
      "fusion threshold ", SettingText(s.fusion_threshold, /*bytes=*/true),
      ", cache capacity ", SettingText(s.cache_capacity, /*bytes=*/false));
}

// Applies `s` on this rank (kFromEnv leaves the job's setting).
absl::Status Apply(const StepSetting& s) {
  if (s.fusion_threshold != StepSetting::kFromEnv) {
    if (absl::Status st = set_fusion_threshold(s.fusion_threshold); !st.ok()) {
      return Prefixed(st, "set_fusion_threshold");
    }
  }
  if (s.cache_capacity != StepSetting::kFromEnv) {
    if (absl::Status st = set_cache_capacity(s.cache_capacity); !st.ok()) {
      return Prefixed(st, "set_cache_capacity");
    }
  }
  return absl::OkStatus();
}

// One setting: warm-up, timed steps, check, figures agreed over the ranks.
absl::Status RunSetting(const BenchOptions& o, const StepSetting& s,
                        StepCase& c, StepRow& row) {
  if (absl::Status st = Apply(s); !st.ok()) return st;
  for (int i = 0; i < o.warmup; ++i) {
    BusyFor(o.gap_us);
    if (absl::StatusOr<StepCase::Timing> t = c.RunOnce(); !t.ok()) {
      return t.status();
    }
  }
  std::vector<double> step_ms, enqueue_ms;
  step_ms.reserve(o.steps);
  enqueue_ms.reserve(o.steps);
  for (int i = 0; i < o.steps; ++i) {
    if (i + 1 == o.steps) c.PrepareCheckedStep();  // the check sees the last
    BusyFor(o.gap_us);
    absl::StatusOr<StepCase::Timing> t = c.RunOnce();
    if (!t.ok()) return t.status();
    step_ms.push_back(t->step_ms);
    enqueue_ms.push_back(t->enqueue_ms);
  }
  const int rank = kolo::rank(), n = kolo::size();
  if (rank == o.corrupt_rank) c.Corrupt();
  const absl::Status check = c.Check();
  if (!check.ok()) {
    std::fprintf(stderr, "kolo-bench: CHECK FAILED: %s (%s)\n",
                 std::string(check.message()).c_str(), SettingName(s).c_str());
  }
  std::vector<double> agreed = {Median(step_ms), Percentile(step_ms, 90),
                                Median(enqueue_ms), check.ok() ? 0.0 : 1.0};
  if (absl::Status st = MaxOverRanks(Mode::kStep, agreed); !st.ok()) {
    return st;
  }
  row.preset = std::string(PresetName(*o.preset));
  row.ranks = n;
  row.tensors = c.tensors();
  row.bytes = c.bytes();
  row.fusion_threshold = s.fusion_threshold;
  row.cache_capacity = s.cache_capacity;
  row.steps = o.steps;
  row.warmup = o.warmup;
  row.step_ms = agreed[0];
  row.step_p90_ms = agreed[1];
  row.enqueue_ms = agreed[2];
  row.check_ok = agreed[3] == 0;
  ComputeStepBandwidth(row);
  return absl::OkStatus();
}

}  // namespace

StepCase::StepCase(Preset preset, int rank, int n, bool inplace)
    : preset_(preset),
      rank_(rank),
      n_(n),
      expected_(ExactFloat32Average(n)),
      inplace_(inplace) {
  const absl::Span<const int64_t> counts = PresetCounts(preset);
  const Periodic input = InputStream(DataType::kFloat32, ReduceOp::kSum, rank);
  for (size_t i = 0; i < counts.size(); ++i) {
    names_.push_back(PresetTensorName(preset, static_cast<int>(i)));
    in_.emplace_back(counts[i]);
    out_.emplace_back(counts[i]);
    input.Fill(static_cast<int64_t>(i), counts[i], in_.back().data());
    if (inplace_) out_.back() = in_.back();
  }
  handles_.reserve(counts.size());
}

absl::StatusOr<StepCase::Timing> StepCase::RunOnce() {
  AllreduceOptions average;
  average.op = ReduceOp::kAverage;
  auto vector = [](std::vector<float>& data) {
    Tensor t;
    t.dtype = DataType::kFloat32;
    t.shape = {static_cast<int64_t>(data.size())};
    t.data = data.data();
    return t;
  };
  handles_.clear();
  const Clock::time_point start = Clock::now();
  for (int i = tensors() - 1; i >= 0; --i) {
    absl::StatusOr<Handle> handle =
        allreduce_async(vector(in_[i]), vector(inplace_ ? in_[i] : out_[i]),
                        average, names_[i]);
    if (!handle.ok()) return Prefixed(handle.status(), names_[i]);
    handles_.push_back(*handle);
  }
  const Clock::time_point enqueued = Clock::now();
  const std::vector<absl::Status> done = synchronize_all(handles_, kOpTimeout);
  const Clock::time_point finished = Clock::now();
  for (size_t j = 0; j < done.size(); ++j) {
    if (!done[j].ok()) return Prefixed(done[j], names_[tensors() - 1 - j]);
  }
  return Timing{Millis(enqueued - start), Millis(finished - start)};
}

void StepCase::PrepareCheckedStep() {
  for (size_t i = 0; i < out_.size(); ++i) {
    if (inplace_) {
      in_[i] = out_[i];
    } else {
      Poison(out_[i].data(), out_[i].size() * sizeof(float));
    }
  }
}

void StepCase::Corrupt() {
  std::vector<std::vector<float>>& results = inplace_ ? in_ : out_;
  if (results.empty() || results[0].empty()) return;
  // Two exponent bits: the damaged value is far from any expected one, so
  // the message shows the difference.
  uint32_t bits = 0;
  std::memcpy(&bits, results[0].data(), sizeof(bits));
  bits ^= 0x21000000u;
  std::memcpy(results[0].data(), &bits, sizeof(bits));
}

absl::Status StepCase::Check() const {
  for (int i = 0; i < tensors(); ++i) {
    const std::vector<float>& got = results()[static_cast<size_t>(i)];
    absl::Status st = expected_.Check(
        i, static_cast<int64_t>(got.size()), got.data(),
        absl::StrCat(names_[i], " on rank ", rank_, " of ", n_));
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status RunStepMode(const BenchOptions& o, std::vector<StepRow>& rows) {
  StepCase c(*o.preset, kolo::rank(), kolo::size(), o.inplace);
  for (const StepSetting& s : StepSettings(o)) {
    StepRow row;
    if (absl::Status st = RunSetting(o, s, c, row); !st.ok()) {
      return Prefixed(st, absl::StrCat(PresetName(*o.preset), " step with ",
                                       SettingName(s)));
    }
    rows.push_back(row);
    if (kolo::rank() == 0) {
      std::fputs(StepTableLine(row).c_str(), stdout);
      std::fflush(stdout);
    }
  }
  return absl::OkStatus();
}

}  // namespace kolo::bench
