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
}

void CoordinatorCore::TuneOnPlan(proto::Plan& plan) {
  Autotuner* tuner = options_.autotuner.get();
  if (tuner == nullptr || tuner->done() || ep_.negotiator == nullptr) return;
  if (!step_detector_.Observe(plan)) return;
  uint64_t bytes = 0;
  for (const auto& [op, s] : stats_.negotiation.by_op) bytes += s.bytes;
  std::optional<TunedSettings> next = tuner->EndStep(bytes, options_.clock());
  if (!next.has_value() && !tuner->done()) return;
  const TunedSettings& now = tuner->current();
  ep_.negotiator->SetTuning(TuningOf(*tuner));
  proto::AutotuneSwitch& sw = *plan.mutable_autotune();
  sw.set_fusion_threshold(now.fusion_threshold);
  sw.set_cycle_time_us(absl::ToInt64Microseconds(now.cycle_time));
  sw.set_cache_enabled(now.cache_enabled);
  sw.set_sample(static_cast<uint32_t>(tuner->scored_samples()));
  sw.set_done(tuner->done());
  Event(tuner->done() ? "autotune_chosen" : "autotune_switch",
        {{"plan", plan.seq()},
         {"fusion_threshold", now.fusion_threshold},
         {"cycle_time_us", sw.cycle_time_us()},
         {"cache_enabled", now.cache_enabled},
         {"sample", tuner->scored_samples()}});
}

}  // namespace kolo::coordinator
