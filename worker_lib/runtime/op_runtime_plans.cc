// OpRuntime (op_runtime.h), part 3 of 4: running plans — the background
// thread's loop, the plans that come on the stream (Deliver), each plan's
// run on the data plane (RunPlan) and its timeline events.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "allreduce/data_plane.h"
#include "allreduce/kernels.h"
#include "proto/autotune_text.h"
#include "proto/op_names.h"
#include "worker_lib/runtime/op_runtime.h"
#include "worker_lib/runtime/op_runtime_internal.h"
#include "worker_lib/runtime_log.h"

namespace kolo::worker {

using op_runtime_internal::kDoneDelay;

void OpRuntime::Deliver(const proto::Plan& plan) {
  MutexLock lock(&mu_);
  if (!terminal_.ok()) return;
  plans_.push_back(plan);
  plan_cv_.SignalAll();
  link_->Wake();
}

void OpRuntime::ThreadMain() {
  std::unique_ptr<PlanRunner> held;
  while (std::optional<proto::Plan> plan = NextPlanFromLink(held)) {
    RunPlan(*plan, absl::Now(), *held);
    MutexLock lock(&mu_);
    runner_ = std::move(held);
    // Its Done waits for the caller's next step (see NextPlanFromLink).
    if (outbox_.unsent_done != 0) bg_park_until_ = absl::Now() + kDoneDelay;
  }
}

void OpRuntime::TracePlan(Timeline& timeline, const proto::Plan& plan,
                          absl::Time arrived,
                          const absl::flat_hash_set<std::string>& mine) {
  size_t tensors = 0;
  for (const proto::Response& r : plan.responses()) {
    tensors += static_cast<size_t>(r.names_size());
    for (int i = 0; i < r.names_size(); ++i) {
      const std::string& name = r.names(i);
      if (!mine.contains(name)) continue;  // another set's, or joined
      // Each rank's ready tick, placed back from the arrival by how much
      // earlier than the last rank it announced (the coordinator's clock).
      if (r.ready_us_size() == r.names_size() * size_) {
        int64_t last = 0;
        for (int k = 0; k < size_; ++k) {
          last = std::max(last, r.ready_us(i * size_ + k));
        }
        for (int k = 0; k < size_; ++k) {
          timeline.Instant(
              name, absl::StrCat("rank ", k, " ready"),
              arrived - absl::Microseconds(last - r.ready_us(i * size_ + k)));
        }
      }
      timeline.End(name, arrived);  // NEGOTIATE_*
      timeline.Begin(name, "QUEUE", arrived);
    }
  }
  timeline.Marker(absl::StrCat("plan ", plan.seq()), arrived,
                  {{"responses", absl::StrCat(plan.responses_size())},
                   {"tensors", absl::StrCat(tensors)}});
  if (plan.has_autotune()) {
    const proto::AutotuneSwitch& a = plan.autotune();
    std::vector<std::pair<std::string, std::string>> args = {
        {"fusion_threshold", absl::StrCat(a.fusion_threshold())},
        {"cycle_time_us", absl::StrCat(a.cycle_time_us())},
        {"cache_enabled", a.cache_enabled() ? "1" : "0"},
        {"sample", absl::StrCat(a.sample())}};
    if (a.data_plane()) {
      args.emplace_back("small_allreduce_bytes",
                        absl::StrCat(a.small_allreduce_bytes()));
      args.emplace_back("segment_bytes", absl::StrCat(a.segment_bytes()));
    }
    if (a.hierarchical_tuned()) {
      args.emplace_back("hierarchical", a.hierarchical() ? "1" : "0");
    }
    timeline.Marker(a.done() ? "autotune: chosen" : "autotune: switch", arrived,
                    args);
  }
}

namespace {

// An allreduce this rank runs without having submitted it (it has joined):
// its input and output are a buffer of the reduce op's identity.
struct JoinedOp : PendingOp {
  std::vector<char> buffer;
};

// The op a joined rank runs for names(i) of `r`, or null when it cannot.
std::shared_ptr<PendingOp> MakeJoinedOp(const proto::Response& r, int i) {
  if (r.counts_size() != r.names_size() || r.dtype() < 0 ||
      r.dtype() >= kNumDataTypes || r.reduce_op() < 0 ||
      r.reduce_op() >= kNumReduceOps) {
    return nullptr;
  }
  auto op = std::make_shared<JoinedOp>();
  op->name = r.names(i);
  op->op = proto::ALLREDUCE;
  const auto dtype = static_cast<DataType>(r.dtype());
  const int64_t count = r.counts(i);
  if (count < 0) return nullptr;
  op->buffer.resize(static_cast<size_t>(count) * DataTypeSize(dtype));
  op->input = Tensor{dtype, {count}, op->buffer.data(), kCpu};
  op->output = op->input;
  op->reduce.op = static_cast<ReduceOp>(r.reduce_op());
  op->reduce.postscale = r.postscale();  // the prescale is for real inputs
  if (!FillIdentity(dtype, op->reduce.op, op->buffer.data(),
                    static_cast<size_t>(count))
           .ok()) {
    return nullptr;
  }
  return op;
}

}  // namespace

void OpRuntime::RunPlan(proto::Plan& plan, absl::Time arrived,
                        PlanRunner& runner) {
  PlanRun run;
  if (!ResolvePlan(plan, run)) return;
  if (run.timeline != nullptr) {
    TracePlan(*run.timeline, plan, arrived, run.traced);
  }
  if (plan.has_autotune()) {
    // Every rank gets the switch in the same plan (coordinator/autotune.h).
    const proto::AutotuneSwitch& a = plan.autotune();
    RuntimeLog()->info(
        "autotune: {} after plan {}: fusion threshold {} bytes, cycle time {} "
        "us, response cache {}{}{} (sample {})",
        a.done() ? "chosen" : "switch", plan.seq(), a.fusion_threshold(),
        a.cycle_time_us(), a.cache_enabled() ? "on" : "off",
        a.data_plane() ? absl::StrCat(", ", proto::DataPlaneSettingsText(
                                                a.small_allreduce_bytes(),
                                                a.segment_bytes()))
                       : std::string(),
        a.hierarchical_tuned()
            ? (a.hierarchical() ? ", hierarchical on" : ", hierarchical off")
            : "",
        a.sample());
  }
  StepResults results = runner.Run(plan.seq(), run.steps, run.timeline.get());
  if (plan.has_autotune() && plan.autotune().data_plane()) {
    // After this plan, as on every rank.
    data_->Tune(static_cast<size_t>(plan.autotune().small_allreduce_bytes()),
                static_cast<size_t>(plan.autotune().segment_bytes()));
  }
  if (plan.has_autotune() && plan.autotune().hierarchical_tuned()) {
    // Flat or two levels from the next plan on, as on every rank.
    data_->SetHierarchical(plan.autotune().hierarchical());
  }
  SendOrHoldDone(plan.seq(), run.in_plan);
  CompleteSteps(run.steps, results);
  // After the unlock: a caller woken under the lock would block on it at
  // once and need a second wake-up.
  done_cv_.SignalAll();
}

bool OpRuntime::ResolvePlan(proto::Plan& plan, PlanRun& run) {
  // Resolve the names first (the table may change meanwhile: only this
  // thread completes ops, but Fail may complete them all).
  MutexLock lock(&mu_);
  run.timeline = timeline_;
  if (!terminal_.ok()) return false;
  if (plan.seq() != last_seq_ + 1) {
    RuntimeLog()->error(
        "plan {} arrived after plan {}; plans must arrive in order", plan.seq(),
        last_seq_);
  }
  last_seq_ = plan.seq();
  ApplyCacheChanges(plan, run.timeline != nullptr);
  if (plan.has_autotune() && plan.autotune().cycle_time_us() > 0) {
    // The cycle time is this rank's announce window too, as the knob's is
    // (KOLO_CYCLE_TIME_MS): autotune tunes both, as an exhaustive sweep of
    // the knob does (the background thread wakes once per window while the
    // caller submits, which costs a busy host CPU time).
    announce_window_ = absl::Microseconds(plan.autotune().cycle_time_us());
  }
  const bool joined = join_handle_ != 0;
  for (const proto::Response& r : plan.responses()) {
    PlanStep& step = run.steps.emplace_back();
    step.response = &r;
    step.rank = rank_;
    step.size = size_;
    if (!PlaceInSet(step)) continue;  // another set's names: nothing here
    if (r.by_bit() && r.names_size() == 0) {  // every bit resolves here
      for (int32_t bit : r.cache_bits()) {
        std::shared_ptr<PendingOp> op =
            ops_.at(by_bit_[static_cast<size_t>(bit)]);
        op->running = true;
        step.ops.push_back(std::move(op));
        ++run.in_plan;
      }
      continue;
    }
    ResolveNames(plan.seq(), joined, step, run);
  }
  return true;
}

void OpRuntime::ApplyCacheChanges(proto::Plan& plan, bool timeline) {
  // The cache changes apply before this plan can be reported done (see
  // cache_mirror.h).
  // A plan of hits lists them by bit (Response.by_bit); they resolve to
  // this rank's ops by the bits they were announced by. Names are filled
  // in only for the timeline, or when a bit names no op pending here (the
  // error message).
  bool need_names = timeline;
  for (const proto::Response& r : plan.responses()) {
    if (need_names) break;
    if (!r.by_bit() || r.names_size() != 0) continue;
    for (int32_t bit : r.cache_bits()) {
      if (bit < 0 || static_cast<size_t>(bit) >= by_bit_.size() ||
          by_bit_[static_cast<size_t>(bit)] == 0) {
        need_names = true;
        break;
      }
    }
  }
  if (need_names) cache_.NameByBit(plan);
  cache_.Apply(plan, [&](const std::string& name) -> const proto::Request* {
    mu_.AssertHeld();  // called by Apply, under the caller's lock
    auto it = names_.find(name);
    if (it == names_.end()) return nullptr;
    const proto::Request& request = ops_.at(it->second)->request;
    // Announced by its bit: the mirror holds the same Request.
    return request.name().empty() ? cache_.RequestOf(name) : &request;
  });
}

bool OpRuntime::PlaceInSet(PlanStep& step) {
  const int32_t set = step.response->process_set();
  if (set == 0) return true;
  auto it = sets_.find(set);
  if (it != sets_.end()) step.members = it->second;
  auto me = std::find(step.members.begin(), step.members.end(), rank_);
  if (me == step.members.end()) {
    step.member = false;
    return false;
  }
  step.rank = static_cast<int>(me - step.members.begin());
  step.size = static_cast<int>(step.members.size());
  return true;
}

void OpRuntime::ResolveNames(uint64_t seq, bool joined, PlanStep& step,
                             PlanRun& run) {
  const proto::Response& r = *step.response;
  const bool joined_here = std::find(r.joined().begin(), r.joined().end(),
                                     rank_) != r.joined().end();
  for (int i = 0; i < r.names_size(); ++i) {
    const std::string& name = r.names(i);
    auto it = names_.find(name);
    if (it == names_.end()) {
      std::shared_ptr<PendingOp> stand_in;
      if (joined_here) stand_in = MakeJoinedOp(r, i);
      // An error for a name this rank never submitted (a group whose
      // members the ranks disagree on) concerns the ranks that did.
      if (stand_in == nullptr && !joined && r.error_code() == 0) {
        RuntimeLog()->error(
            "plan {} names '{}', which is not pending on rank {}", seq, name,
            rank_);
      }
      step.ops.push_back(std::move(stand_in));
      continue;
    }
    std::shared_ptr<PendingOp> op = ops_.at(it->second);
    op->running = true;
    if (run.timeline != nullptr) run.traced.insert(name);
    step.ops.push_back(std::move(op));
    ++run.in_plan;
  }
}

void OpRuntime::SendOrHoldDone(uint64_t seq, size_t in_plan) {
  // Done(seq). On the stream, and whenever ops of this rank still wait for
  // plans (the coordinator may hold their responses until this rank is
  // idle), it goes now, before the callers wake: their next announcement
  // must not reach the coordinator ahead of it (the coordinator would think
  // this rank busy). Otherwise, on a link, it waits (outbox_.unsent_done) to go
  // in the same write as the callers' next announcements (up to one announce
  // window), or alone after kDoneDelay when none comes.
  bool send_done;
  {
    MutexLock lock(&mu_);
    outbox_.unsent_done = seq;
    send_done = !link_->coalesces_writes() || names_.size() > in_plan;
  }
  if (send_done) {
    MutexLock send_lock(&send_mu_);
    (void)Flush();
  }
}

void OpRuntime::CompleteSteps(std::vector<PlanStep>& steps,
                              StepResults& results) {
  MutexLock lock(&mu_);
  for (size_t k = 0; k < steps.size(); ++k) {
    for (size_t i = 0; i < steps[k].ops.size(); ++i) {
      PendingOp* op = steps[k].ops[i].get();
      if (op == nullptr) continue;
      op->running = false;
      op->done = true;
      op->status = std::move(results[k][i]);
      if (absl::IsAborted(op->status) && !terminal_.ok()) {
        // The data plane was aborted because the runtime failed (Fail): the
        // op ends with that reason, as the ops that did not run yet do.
        op->status = terminal_;
      }
      if (op->status.ok() && op->op == proto::PROCESS_SET_ADD) {
        sets_[static_cast<int32_t>(op->result.splits.at(0))] =
            std::vector<int>(op->splits.begin(), op->splits.end());
      } else if (op->status.ok() && op->op == proto::PROCESS_SET_REMOVE) {
        sets_.erase(op->root);
      }
      if (auto it = names_.find(op->name);
          it != names_.end() && it->second == op->handle) {
        names_.erase(it);
      }
      if (op->cache_bit >= 0 &&
          by_bit_[static_cast<size_t>(op->cache_bit)] == op->handle) {
        by_bit_[static_cast<size_t>(op->cache_bit)] = 0;
      }
    }
  }
}

}  // namespace kolo::worker
