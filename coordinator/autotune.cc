// Autotuner and StepDetector (autotune.h), with dlib's global optimizer.
#include "coordinator/autotune.h"

#include <dlib/global_optimization.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "proto/autotune_text.h"

namespace kolo::coordinator {

// The search over (log2 of the fusion threshold in bytes, the cycle time in
// milliseconds, the cache off or on as the integer 0 or 1) and, when the data
// plane is tuned, (log2 of the small-message cut-off in bytes, log2 of the
// segment size in bytes, where a point below log2 of the smallest segment
// stands for the automatic size) and, when the hierarchy is tuned, (the
// collectives flat or in two levels as the integer 0 or 1); the samples
// scored before it began, which it starts from; and the request whose
// setting runs now.
struct Autotuner::Search {
  std::vector<dlib::function_evaluation> seeds;
  std::unique_ptr<dlib::global_function_search> search;  // null: not begun
  std::optional<dlib::function_evaluation_request> pending;
};

namespace {

double CycleMs(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

double Log2(uint64_t bytes) { return std::log2(static_cast<double>(bytes)); }

uint64_t Exp2Within(double log2_bytes, uint64_t lo, uint64_t hi) {
  return std::clamp(static_cast<uint64_t>(std::llround(std::exp2(log2_bytes))),
                    lo, hi);
}

// The search space's bounds, and which dimensions are integers.
struct Space {
  std::vector<double> lo, hi;
  std::vector<bool> integer;
};

Space SpaceOf(const AutotuneOptions& o, bool data_plane, bool hierarchical) {
  Space sp;
  sp.lo = {Log2(o.min_fusion_threshold), CycleMs(o.min_cycle_time), 0};
  sp.hi = {Log2(o.max_fusion_threshold), CycleMs(o.max_cycle_time), 1};
  sp.integer = {false, false, true};
  if (data_plane) {
    sp.lo.insert(sp.lo.end(), {Log2(o.min_small_allreduce_bytes),
                               Log2(o.min_segment_bytes) - 1});
    sp.hi.insert(sp.hi.end(), {Log2(o.max_small_allreduce_bytes),
                               Log2(o.max_segment_bytes)});
    sp.integer.insert(sp.integer.end(), {false, false});
  }
  if (hierarchical) {
    sp.lo.push_back(0);
    sp.hi.push_back(1);
    sp.integer.push_back(true);
  }
  return sp;
}

dlib::matrix<double, 0, 1> Column(const std::vector<double>& v) {
  dlib::matrix<double, 0, 1> m(static_cast<long>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) m(static_cast<long>(i)) = v[i];
  return m;
}

}  // namespace

absl::Status ValidateAutotuneOptions(const AutotuneOptions& o) {
  if (o.warmup_samples < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--autotune-warmup-samples: expected a number of samples "
                     "of at least 0, got ",
                     o.warmup_samples));
  }
  if (o.steps_per_sample < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--autotune-steps-per-sample: expected a number of steps "
                     "of at least 1, got ",
                     o.steps_per_sample));
  }
  if (o.max_samples < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--autotune-bayes-opt-max-samples: expected a number of samples of at "
        "least 2 (the starting setting and one other), got ",
        o.max_samples));
  }
  if (!(o.noise >= 0) || !std::isfinite(o.noise)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--autotune-gaussian-process-noise: expected a number of "
                     "at least 0, got ",
                     o.noise));
  }
  if (o.min_fusion_threshold == 0 ||
      o.min_fusion_threshold >= o.max_fusion_threshold ||
      o.min_cycle_time <= absl::ZeroDuration() ||
      o.min_cycle_time >= o.max_cycle_time ||
      o.min_small_allreduce_bytes == 0 ||
      o.min_small_allreduce_bytes >= o.max_small_allreduce_bytes ||
      o.min_segment_bytes == 0 || o.min_segment_bytes >= o.max_segment_bytes) {
    return absl::InvalidArgumentError(
        "autotune: the search bounds must be positive and ordered (min < max)");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Autotuner>> MakeAutotuner(
    const AutotuneConfig& config, const NegotiatorOptions& negotiator) {
  if (!config.enabled) return nullptr;
  AutotuneOptions o;
  o.enabled = true;
  o.log_file = config.log_file;
  o.warmup_samples = config.warmup_samples;
  o.steps_per_sample = config.steps_per_sample;
  o.max_samples = config.max_samples;
  o.noise = config.noise;
  o.initial.fusion_threshold = negotiator.fusion_threshold;
  o.initial.cycle_time = negotiator.cycle_time;
  absl::StatusOr<std::unique_ptr<Autotuner>> tuner =
      Autotuner::Create(std::move(o));
  if (!tuner.ok()) return tuner.status();
  return std::shared_ptr<Autotuner>(*std::move(tuner));
}

absl::StatusOr<std::unique_ptr<Autotuner>> Autotuner::Create(
    AutotuneOptions options) {
  if (absl::Status s = ValidateAutotuneOptions(options); !s.ok()) return s;
  std::unique_ptr<Autotuner> t(new Autotuner(std::move(options)));
  if (!t->options_.log_file.empty()) {
    t->log_ = std::fopen(t->options_.log_file.c_str(), "w");
    if (t->log_ == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--autotune-log-file: cannot open '",
                       t->options_.log_file, "': ", std::strerror(errno)));
    }
    std::fputs(
        "sample,fusion_threshold_mb,cycle_time_ms,cache_enabled,"
        "small_allreduce_kb,segment_kb,hierarchical,score_bytes_per_second\n",
        t->log_);
    std::fflush(t->log_);
  }
  return t;
}

Autotuner::Autotuner(AutotuneOptions options) : options_(std::move(options)) {
  // The starting setting, inside the bounds.
  options_.initial.fusion_threshold =
      std::clamp(options_.initial.fusion_threshold,
                 options_.min_fusion_threshold, options_.max_fusion_threshold);
  options_.initial.cycle_time =
      std::clamp(options_.initial.cycle_time, options_.min_cycle_time,
                 options_.max_cycle_time);
  current_ = options_.initial;
  warmups_left_ = options_.warmup_samples;
}

Autotuner::~Autotuner() {
  if (log_ != nullptr) std::fclose(log_);
}

void Autotuner::LogLine(const std::string& sample, const TunedSettings& s,
                        double score) {
  if (log_ == nullptr) return;
  const std::string data_plane =
      s.data_plane ? absl::StrFormat(
                         "%.1f,%.1f",
                         static_cast<double>(s.small_allreduce_bytes) / 1024.0,
                         static_cast<double>(s.segment_bytes) / 1024.0)
                   : ",";
  const char* hierarchical =
      !s.hierarchical_tuned ? "" : (s.hierarchical ? "1" : "0");
  std::fputs(absl::StrFormat("%s,%.3f,%.3f,%d,%s,%s,%.0f\n", sample,
                             static_cast<double>(s.fusion_threshold) /
                                 static_cast<double>(1 << 20),
                             CycleMs(s.cycle_time), s.cache_enabled ? 1 : 0,
                             data_plane, hierarchical, score)
                 .c_str(),
             log_);
  std::fflush(log_);
}

TunedSettings Autotuner::FromPoint(absl::Span<const double> x) const {
  const AutotuneOptions& o = options_;
  TunedSettings s;
  s.fusion_threshold =
      Exp2Within(x[0], o.min_fusion_threshold, o.max_fusion_threshold);
  // Whole microseconds: the plans' deadlines need no finer grain.
  s.cycle_time = std::clamp(absl::Microseconds(std::llround(x[1] * 1000)),
                            o.min_cycle_time, o.max_cycle_time);
  s.cache_enabled = x[2] >= 0.5;
  s.data_plane = o.initial.data_plane;
  size_t next = 3;  // the next dimension's index
  if (s.data_plane && x.size() >= next + 2) {
    s.small_allreduce_bytes = Exp2Within(x[next], o.min_small_allreduce_bytes,
                                         o.max_small_allreduce_bytes);
    s.segment_bytes =
        x[next + 1] < Log2(o.min_segment_bytes)
            ? 0
            : Exp2Within(x[next + 1], o.min_segment_bytes, o.max_segment_bytes);
    next += 2;
  }
  s.hierarchical_tuned = o.initial.hierarchical_tuned;
  if (s.hierarchical_tuned && x.size() >= next + 1) {
    s.hierarchical = x[next] >= 0.5;
  }
  return s;
}

std::vector<double> Autotuner::ToPoint(const TunedSettings& s) const {
  const AutotuneOptions& o = options_;
  std::vector<double> x = {Log2(s.fusion_threshold), CycleMs(s.cycle_time),
                           s.cache_enabled ? 1.0 : 0.0};
  if (o.initial.data_plane) {
    x.push_back(Log2(s.small_allreduce_bytes));
    // Automatic: halfway down the step below the smallest segment.
    x.push_back(s.segment_bytes == 0 ? Log2(o.min_segment_bytes) - 0.5
                                     : Log2(s.segment_bytes));
  }
  if (o.initial.hierarchical_tuned) x.push_back(s.hierarchical ? 1.0 : 0.0);
  return x;
}

int Autotuner::SearchSamples() const {
  return options_.max_samples >= 4 * kConfirmedSettings
             ? options_.max_samples - kConfirmedSettings
             : options_.max_samples;
}

TunedSettings Autotuner::Next(double score) {
  ++scored_;
  LogLine(absl::StrCat(scored_), current_, score);
  if (confirming_) {
    confirm_scores_.push_back(score);
    if (confirm_scores_.size() < confirm_.size()) {
      return confirm_[confirm_scores_.size()];
    }
    const size_t best = static_cast<size_t>(
        std::max_element(confirm_scores_.begin(), confirm_scores_.end()) -
        confirm_scores_.begin());
    return Choose(confirm_[best], confirm_scores_[best],
                  absl::StrCat(" (the best of the search's ", confirm_.size(),
                               " best settings, each run again)"));
  }
  scored_settings_.emplace_back(current_, score);
  if (search_ == nullptr) search_ = std::make_unique<Search>();
  if (search_->search == nullptr) {
    // The first score is the starting setting's: the search begins from it.
    search_->seeds.emplace_back(Column(ToPoint(current_)), score);
    if (options_.initial.hierarchical_tuned && search_->seeds.size() == 1 &&
        scored_ < SearchSamples()) {
      // With the hierarchy tuned, the next is the same setting with the
      // hierarchy flipped: the two are compared at equal settings first,
      // and the search starts from both (its local steps around the best
      // point keep that point's integer dimensions, so a boolean it never
      // compared there would stay as the start had it).
      TunedSettings flipped = current_;
      flipped.hierarchical = !flipped.hierarchical;
      return flipped;
    }
    const Space sp = SpaceOf(options_, options_.initial.data_plane,
                             options_.initial.hierarchical_tuned);
    search_->search = std::make_unique<dlib::global_function_search>(
        std::vector<dlib::function_spec>{
            dlib::function_spec(Column(sp.lo), Column(sp.hi), sp.integer)},
        std::vector<std::vector<dlib::function_evaluation>>{search_->seeds},
        options_.noise);
    // Deterministic: every run of a job explores alike.
    search_->search->set_seed(1);
  } else if (search_->pending.has_value()) {
    search_->pending->set(score);
    search_->pending.reset();
  }
  if (scored_ >= SearchSamples()) return EndSearch();
  search_->pending.emplace(search_->search->get_next_x());
  const dlib::matrix<double, 0, 1>& x = search_->pending->x();
  return FromPoint(absl::MakeConstSpan(&x(0), static_cast<size_t>(x.size())));
}

TunedSettings Autotuner::EndSearch() {
  if (SearchSamples() < options_.max_samples) {
    // The search's best distinct settings, best first (a stable order:
    // ties keep the order they were scored in).
    std::vector<std::pair<TunedSettings, double>> ranked = scored_settings_;
    std::stable_sort(
        ranked.begin(), ranked.end(),
        [](const auto& a, const auto& b) { return a.second > b.second; });
    confirm_.clear();
    for (const auto& [settings, s] : ranked) {
      if (confirm_.size() == static_cast<size_t>(kConfirmedSettings)) break;
      if (std::find(confirm_.begin(), confirm_.end(), settings) ==
          confirm_.end()) {
        confirm_.push_back(settings);
      }
    }
    if (confirm_.size() >= 2) {
      confirming_ = true;
      confirm_scores_.clear();
      return confirm_.front();
    }
  }
  dlib::matrix<double, 0, 1> best;
  double best_score = 0;
  size_t index = 0;
  search_->search->get_best_function_eval(best, best_score, index);
  return Choose(FromPoint(absl::MakeConstSpan(
                    &best(0), static_cast<size_t>(best.size()))),
                best_score, "");
}

TunedSettings Autotuner::Choose(const TunedSettings& chosen, double score,
                                absl::string_view how) {
  done_ = true;
  confirming_ = false;
  LogLine("best", chosen, score);
  GetLogger("coordinator")
      ->info(
          "autotune: done after {} samples{}: fusion threshold {} bytes, "
          "cycle time {}, response cache {}{}{} ({:.0f} bytes/s)",
          scored_, std::string(how), chosen.fusion_threshold,
          absl::FormatDuration(chosen.cycle_time),
          chosen.cache_enabled ? "on" : "off",
          chosen.data_plane
              ? absl::StrCat(", ", proto::DataPlaneSettingsText(
                                       chosen.small_allreduce_bytes,
                                       chosen.segment_bytes))
              : std::string(),
          chosen.hierarchical_tuned
              ? (chosen.hierarchical ? ", hierarchical on"
                                     : ", hierarchical off")
              : "",
          score);
  return chosen;
}

std::optional<TunedSettings> Autotuner::EndStep(uint64_t bytes,
                                                absl::Time now) {
  if (done_) return std::nullopt;
  ++steps_;
  if (!sample_started_) {
    // The first step end starts the first sample.
    sample_started_ = true;
    sample_bytes_ = bytes;
    sample_start_ = now;
    steps_in_sample_ = 0;
    return std::nullopt;
  }
  if (++steps_in_sample_ < options_.steps_per_sample) return std::nullopt;
  const uint64_t reduced = bytes - sample_bytes_;
  const double seconds = absl::ToDoubleSeconds(now - sample_start_);
  sample_bytes_ = bytes;
  sample_start_ = now;
  steps_in_sample_ = 0;
  if (warmups_left_ > 0) {
    --warmups_left_;
    return std::nullopt;
  }
  const double score =
      seconds > 0 ? static_cast<double>(reduced) / seconds : 0.0;
  TunedSettings next = Next(score);
  if (next == current_) return std::nullopt;
  current_ = next;
  return current_;
}

std::optional<TunedSettings> Autotuner::TuneDataPlane(
    const RanksDataPlane& ranks) {
  TunedSettings& start = options_.initial;
  const bool sizes = !start.data_plane && ranks.message_allreduce;
  const bool hierarchy =
      !start.hierarchical_tuned && ranks.hierarchical_tunable;
  if (done_ || (!sizes && !hierarchy)) return std::nullopt;
  if (sizes) {
    start.data_plane = true;
    start.small_allreduce_bytes = std::clamp(
        ranks.small_allreduce_bytes, options_.min_small_allreduce_bytes,
        options_.max_small_allreduce_bytes);
    start.segment_bytes =
        ranks.segment_bytes == 0
            ? 0
            : std::clamp(ranks.segment_bytes, options_.min_segment_bytes,
                         options_.max_segment_bytes);
  }
  if (hierarchy) {
    start.hierarchical_tuned = true;
    start.hierarchical = ranks.hierarchical;
  }
  // The scores so far searched a smaller space: start over from the ranks'.
  // (current_ lacks what was added, so it differs from the new start.)
  return Restart();
}

std::optional<TunedSettings> Autotuner::Restart() {
  if (done_) return std::nullopt;
  search_.reset();
  scored_settings_.clear();
  confirm_.clear();
  confirm_scores_.clear();
  confirming_ = false;
  scored_ = 0;
  steps_ = 0;
  sample_started_ = false;
  warmups_left_ = options_.warmup_samples;
  if (current_ == options_.initial) return std::nullopt;
  current_ = options_.initial;
  return current_;
}

bool StepDetector::Observe(const proto::Plan& plan) {
  bool boundary = false;
  for (const proto::Response& r : plan.responses()) {
    if (r.error_code() != 0) continue;
    const int n = r.by_bit() ? r.cache_bits_size() : r.names_size();
    for (int i = 0; i < n; ++i) {
      // A tensor is known by its name: a response by bit names it through
      // the plan that gave the bit out (with the name), so that turning the
      // cache on or off does not change what a step is.
      const int32_t bit = i < r.cache_bits_size() ? r.cache_bits(i) : -1;
      std::string key;
      if (!r.by_bit()) {
        key = r.names(i);
        if (bit >= 0) names_by_bit_[bit] = key;
      } else if (auto it = names_by_bit_.find(bit); it != names_by_bit_.end()) {
        key = it->second;
      } else {
        key = absl::StrCat("bit ", bit);  // given out before we looked
      }
      if (seen_.contains(key) && !boundary) {
        boundary = true;
        seen_.clear();
      }
      seen_.insert(std::move(key));
    }
  }
  return boundary;
}

}  // namespace kolo::coordinator
