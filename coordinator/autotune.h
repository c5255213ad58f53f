// Autotuner: the coordinator's tuning of the negotiation settings during the
// first steps of a job (kolorun --autotune, KOLO_AUTOTUNE=1, Horovod's
// HOROVOD_AUTOTUNE), as a plain class with no gRPC, no sockets and no clock
// of its own: the owner tells it when a training step ended, how many bytes
// were reduced so far and the time; it answers with the settings to use from
// that step on. CoordinatorCore owns one for the life of the coordinator and
// applies its settings to each epoch's Negotiator, so every rank switches at
// the same plan (the choice is the coordinator's, never a rank's).
//
// Settings tuned (TunedSettings): the fusion threshold, the cycle time and
// the response cache on or off, all the coordinator's; and, once every rank
// said that its allreduce runs the message algorithms (TuneDataPlane: over
// TCP or a hierarchy, not one shared-memory segment), the data plane's
// small-message cut-off and segment size, which the plans carry to the
// ranks; and, once every rank said that its collectives may run in two
// levels (TuneDataPlane: its ranks span several hosts, some host has
// several, KOLO_HIERARCHICAL is auto), whether they do ("hierarchical", a
// boolean dimension), which the plans carry too (docs/tensor-fusion.md
// "Autotune" says what is not tuned).
//
// Protocol, in samples of steps_per_sample steps each:
// - The first warmup_samples samples run the starting settings and are not
//   scored (caches fill, allocators settle).
// - Then each sample runs one setting and is scored by the bytes reduced per
//   second over it. The first scored setting is the starting one; with the
//   hierarchy tuned, the second is the starting one with the hierarchy
//   flipped (the two compared at equal settings); each next one comes from
//   dlib's global_function_search (dlib/global_optimization.h, Debian's
//   libdlib-dev), told every score so far.
// - Then, with a budget of at least 4 * kConfirmedSettings samples, the
//   search ends kConfirmedSettings samples early, and the best settings it
//   scored (up to kConfirmedSettings distinct ones, best first) each run one
//   more sample, back to back: the best of those fresh scores is chosen
//   (the best score among many noisy ones is most often a lucky one; the
//   fresh ones are not chosen for their luck). With a smaller budget the
//   best setting seen is chosen. The choice is kept; tuning is done. Each
//   sample and the choice are one CSV line of the log file (when one is named):
//   "sample,fusion_threshold_mb,cycle_time_ms,
//   cache_enabled,small_allreduce_kb,segment_kb,hierarchical,
//   score_bytes_per_second" with sample "best" for the choice; the two
//   data-plane columns and hierarchical (1 or 0) are empty when they are not
//   tuned, and segment_kb 0 is the automatic segment size.
// - Restart(): a change of membership discards every score (they measured
//   another job) and starts over with warmup; a tuner that is done keeps its
//   choice. TuneDataPlane() before the choice starts over the same way, from
//   the ranks' data-plane settings, with the dimensions it adds.
//
// Thread-safety: none; the owner serialises calls (CoordinatorCore holds its
// mutex).
// Invariants: current() is always within the options' bounds; after done()
// current() never changes.
#ifndef KOLO_COORDINATOR_AUTOTUNE_H_
#define KOLO_COORDINATOR_AUTOTUNE_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/autotune_config.h"
#include "coordinator/negotiator.h"
#include "proto/kolo.pb.h"

namespace kolo::coordinator {

// The settings the tuner chooses.
struct TunedSettings {
  uint64_t fusion_threshold = 0;  // bytes
  absl::Duration cycle_time;
  bool cache_enabled = true;  // the response cache (false: capacity 0)
  // Whether the next two are tuned (else the ranks keep their own).
  bool data_plane = false;
  uint64_t small_allreduce_bytes = 0;  // the small-message cut-off
  uint64_t segment_bytes = 0;          // 0: the automatic segment size
  // Whether the next one is tuned (else the ranks keep KOLO_HIERARCHICAL's
  // choice): the collectives run in two levels (true) or flat.
  bool hierarchical_tuned = false;
  bool hierarchical = false;
  bool operator==(const TunedSettings& o) const {
    return fusion_threshold == o.fusion_threshold &&
           cycle_time == o.cycle_time && cache_enabled == o.cache_enabled &&
           data_plane == o.data_plane &&
           small_allreduce_bytes == o.small_allreduce_bytes &&
           segment_bytes == o.segment_bytes &&
           hierarchical_tuned == o.hierarchical_tuned &&
           hierarchical == o.hierarchical;
  }
};

// How many of the search's best settings run again before the choice (see
// the header comment).
inline constexpr int kConfirmedSettings = 3;

struct AutotuneOptions {
  bool enabled = false;
  std::string log_file;  // CSV, one line per sample; empty: none
  // Horovod's defaults (HOROVOD_AUTOTUNE_*).
  int warmup_samples = 3;
  int steps_per_sample = 10;
  int max_samples = 20;
  // dlib's relative noise magnitude of the scores (Horovod's Gaussian
  // process noise has the same role: how much a score may vary by chance).
  double noise = 0.8;
  // The settings the job starts with.
  TunedSettings initial;
  // The search space: the fusion threshold in [min, max] bytes (searched on
  // a log scale), the cycle time in [min, max].
  uint64_t min_fusion_threshold = uint64_t{1} << 20;
  uint64_t max_fusion_threshold = uint64_t{256} << 20;
  absl::Duration min_cycle_time = absl::Microseconds(500);
  absl::Duration max_cycle_time = absl::Milliseconds(25);
  // The data plane's, once tuned (TuneDataPlane): the small-message cut-off
  // in [min, max] bytes, and the segment size either automatic or in [min,
  // max] bytes (both searched on a log scale; the segment's scale reaches
  // one step below min, which stands for automatic).
  uint64_t min_small_allreduce_bytes = uint64_t{4} << 10;
  uint64_t max_small_allreduce_bytes = uint64_t{1} << 20;
  uint64_t min_segment_bytes = uint64_t{64} << 10;
  uint64_t max_segment_bytes = uint64_t{4} << 20;
};

// Checks `options` (counts positive, noise not negative, bounds ordered);
// the message names the flag.
absl::Status ValidateAutotuneOptions(const AutotuneOptions& options);

class Autotuner;

// The tuner for a job whose user settings are `config` and whose
// negotiators start from `negotiator` (the starting fusion threshold and
// cycle time); null when config.enabled is false. Errors name the flag.
absl::StatusOr<std::shared_ptr<Autotuner>> MakeAutotuner(
    const AutotuneConfig& config, const NegotiatorOptions& negotiator);

class Autotuner {
 public:
  // Opens the log file (truncating it) and writes its header.
  static absl::StatusOr<std::unique_ptr<Autotuner>> Create(
      AutotuneOptions options);
  ~Autotuner();
  Autotuner(const Autotuner&) = delete;
  Autotuner& operator=(const Autotuner&) = delete;

  // A step ended at `now`; `bytes`: the bytes reduced since the job began
  // (a counter that only grows). Returns the settings to use from the next
  // step on when they change here.
  std::optional<TunedSettings> EndStep(uint64_t bytes, absl::Time now);
  // Membership changed: see the header comment. Returns the settings to use
  // when they change (back to the starting ones).
  std::optional<TunedSettings> Restart();
  // The ranks' data-plane settings, `ranks`: unless done, the tuner adds to
  // its search what they newly allow — the data plane's two sizes when every
  // rank's allreduce runs the message algorithms, starting from the ranks'
  // (within the bounds); the hierarchy on or off when every rank's is
  // tunable, starting from the ranks' — and, if it added any, starts over
  // as Restart() does. Returns the settings to use when they change.
  std::optional<TunedSettings> TuneDataPlane(const RanksDataPlane& ranks);
  bool tunes_data_plane() const { return options_.initial.data_plane; }
  bool tunes_hierarchical() const {
    return options_.initial.hierarchical_tuned;
  }

  const TunedSettings& current() const { return current_; }
  bool done() const { return done_; }
  int scored_samples() const { return scored_; }
  // Steps counted since the tuner began (or restarted).
  int64_t steps() const { return steps_; }

 private:
  struct Search;  // dlib's state (autotune.cc)
  explicit Autotuner(AutotuneOptions options);
  // The sample that just ended scored `score`: returns the next setting.
  TunedSettings Next(double score);
  // Samples the search may score: the budget, less the confirmation's.
  int SearchSamples() const;
  // The search ended: the confirmation's first setting, or the choice.
  TunedSettings EndSearch();
  // Done with `chosen`, scored `score`: logs it and returns it.
  TunedSettings Choose(const TunedSettings& chosen, double score,
                       absl::string_view how);
  // The settings at a point of the search space (see autotune.cc), and
  // back.
  TunedSettings FromPoint(absl::Span<const double> x) const;
  std::vector<double> ToPoint(const TunedSettings& s) const;
  void LogLine(const std::string& sample, const TunedSettings& s, double score);

  AutotuneOptions options_;
  std::FILE* log_ = nullptr;
  std::unique_ptr<Search> search_;
  TunedSettings current_;
  // Every setting the search scored, and its score (for the confirmation).
  std::vector<std::pair<TunedSettings, double>> scored_settings_;
  // The confirmation: the settings to run again, best first, and the fresh
  // scores of those that ran (confirming_ while it lasts).
  std::vector<TunedSettings> confirm_;
  std::vector<double> confirm_scores_;
  bool confirming_ = false;
  bool done_ = false;
  int warmups_left_ = 0;
  int scored_ = 0;
  int steps_in_sample_ = 0;
  int64_t steps_ = 0;
  bool sample_started_ = false;
  uint64_t sample_bytes_ = 0;
  absl::Time sample_start_;
};

// Finds the ends of training steps in the plans the coordinator sends: a
// step ends when a tensor comes again that the current step already ran (by
// name; a response sent by cache bit names its tensors through the plan that
// gave each bit out). Plain, no clock.
// Thread-safety: none. Invariant: seen_ holds the current step's tensors.
class StepDetector {
 public:
  // Whether `plan` begins a new step.
  bool Observe(const proto::Plan& plan);
  void Reset() {
    seen_.clear();
    names_by_bit_.clear();
  }

 private:
  absl::flat_hash_set<std::string> seen_;
  absl::flat_hash_map<int32_t, std::string> names_by_bit_;
};

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_AUTOTUNE_H_
