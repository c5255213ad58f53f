// CoordinatorCore's autotuning (coordinator/autotune.h): each epoch's
// Negotiator starts from the tuner's settings, and the plans it sends end
// steps, whose samples may switch the settings. The switch goes into the
// plan at which it is decided (Plan.autotune), which every rank runs (it logs
// the switch, and the timeline marks it); the plans after it use the new
// settings.
//
// Thread-safety: CoordinatorCore's methods, called with mu_ held.
#include <cstdint>
#include <optional>
#include <utility>

#include "coordinator/autotune.h"
#include "coordinator/core.h"
#include "coordinator/negotiator.h"

namespace kolo::coordinator {

namespace {

NegotiatorTuning TuningOf(const Autotuner& tuner) {
  NegotiatorTuning t;
  t.fusion_threshold = tuner.current().fusion_threshold;
  t.cycle_time = tuner.current().cycle_time;
  t.cache_enabled = tuner.current().cache_enabled;
  // The tuner must see every step until it is done.
  t.hold_fast_path = !tuner.done();
  return t;
}

}  // namespace

void CoordinatorCore::TuneNewEpoch(bool membership_changed) {
  Autotuner* tuner = options_.autotuner.get();
  if (tuner == nullptr || ep_.negotiator == nullptr) return;
  step_detector_.Reset();
  if (membership_changed && !tuner->done()) {
    // The scores so far measured another job (docs/tensor-fusion.md
    // "Autotune"): tuning starts over; a finished tuning keeps its choice.
    tuner->Restart();
    Event("autotune_restart", nlohmann::ordered_json::object());
  }
  ep_.negotiator->SetTuning(TuningOf(*tuner));
  // The new epoch's ranks start from their own settings: their announce
  // window (KOLO_CYCLE_TIME_MS) and data planes (and KOLO_HIERARCHICAL's
  // choice). Settings autotune has switched to go to them again.
  autotune_resend_ = tuner->done() || tuner->scored_samples() > 0 ||
                     tuner->tunes_data_plane() || tuner->tunes_hierarchical();
}

void CoordinatorCore::TuneOnPlan(proto::Plan& plan) {
  Autotuner* tuner = options_.autotuner.get();
  if (tuner == nullptr || ep_.negotiator == nullptr) return;
  const bool resend = std::exchange(autotune_resend_, false);
  bool changed = false;
  const std::optional<RanksDataPlane>& ranks =
      ep_.negotiator->ranks_data_plane();
  const bool had_sizes = tuner->tunes_data_plane();
  if (ranks.has_value() && !tuner->done() &&
      tuner->TuneDataPlane(*ranks).has_value()) {
    // Every rank's allreduce runs the message algorithms, or every rank's
    // hierarchy is tunable: the tuning starts over with the data plane's
    // settings (the sizes, the hierarchy or both) added.
    step_detector_.Reset();
    Event("autotune_restart",
          {{"why", had_sizes ? "hierarchy" : "data plane"}});
    changed = true;
  } else if (!tuner->done() && step_detector_.Observe(plan)) {
    uint64_t bytes = 0;
    for (const auto& [op, s] : stats_.negotiation.by_op) bytes += s.bytes;
    changed =
        tuner->EndStep(bytes, options_.clock()).has_value() || tuner->done();
  }
  if (!changed && !resend) return;
  const TunedSettings& now = tuner->current();
  ep_.negotiator->SetTuning(TuningOf(*tuner));
  proto::AutotuneSwitch& sw = *plan.mutable_autotune();
  sw.set_fusion_threshold(now.fusion_threshold);
  sw.set_cycle_time_us(absl::ToInt64Microseconds(now.cycle_time));
  sw.set_cache_enabled(now.cache_enabled);
  sw.set_data_plane(now.data_plane);
  sw.set_small_allreduce_bytes(now.small_allreduce_bytes);
  sw.set_segment_bytes(now.segment_bytes);
  sw.set_hierarchical_tuned(now.hierarchical_tuned);
  sw.set_hierarchical(now.hierarchical);
  sw.set_sample(static_cast<uint32_t>(tuner->scored_samples()));
  sw.set_done(tuner->done());
  if (!changed) return;  // the same settings again, for a new epoch
  Event(tuner->done() ? "autotune_chosen" : "autotune_switch",
        {{"plan", plan.seq()},
         {"fusion_threshold", now.fusion_threshold},
         {"cycle_time_us", sw.cycle_time_us()},
         {"cache_enabled", now.cache_enabled},
         {"data_plane", now.data_plane},
         {"small_allreduce_bytes", now.small_allreduce_bytes},
         {"segment_bytes", now.segment_bytes},
         {"hierarchical", now.hierarchical_tuned
                              ? nlohmann::ordered_json(now.hierarchical)
                              : nlohmann::ordered_json(nullptr)},
         {"sample", tuner->scored_samples()}});
}

}  // namespace kolo::coordinator
