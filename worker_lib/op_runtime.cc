#include "worker_lib/op_runtime.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/log.h"
#include "proto/op_names.h"
#include "worker_lib/plan_executor.h"

namespace kolo::worker {
namespace {

// How long a Done on the link waits for a submission to travel with (one
// write, one wake-up of the coordinator instead of two) before it goes alone.
// A tight submit/synchronize loop resubmits well within it; when nothing
// follows, the coordinator learns that this rank is idle this much later.
constexpr absl::Duration kDoneDelay = absl::Microseconds(200);

std::shared_ptr<spdlog::logger> Log() {
  static const auto logger = GetLogger("runtime");
  return logger;
}

}  // namespace

OpRuntime::OpRuntime(std::shared_ptr<SessionClient> session,
                     std::unique_ptr<NegotiationLink> link, DataPlane* data,
                     int rank, int size)
    : session_(std::move(session)),
      link_(std::move(link)),
      data_(data),
      rank_(rank),
      size_(size) {
  thread_ = std::thread([this] { ThreadMain(); });
}

OpRuntime::~OpRuntime() { Stop(); }

absl::StatusOr<Handle> OpRuntime::Submit(std::unique_ptr<PendingOp> op) {
  std::shared_ptr<PendingOp> shared;
  uint64_t done_seq = 0;  // a Done to send first, in the same write
  proto::WorkerMessage msg;
  proto::Announce& announce = *msg.mutable_announce();
  {
    MutexLock lock(&mu_);
    if (!terminal_.ok()) return terminal_;
    if (op->name.empty()) {
      op->name =
          absl::StrCat(proto::OpTypeName(op->op), ".noname.", next_noname_++);
    }
    if (auto it = names_.find(op->name); it != names_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          proto::OpTypeName(op->op), " '", op->name, "' on rank ", rank_,
          ": an op with this name is already in flight on this rank (handle ",
          it->second, "); wait for it, or give each op a distinct name"));
    }
    op->handle = next_handle_++;
    *announce.add_requests() = MakeRequest(*op, rank_, size_);
    done_seq = std::exchange(unsent_done_, 0);
    shared = std::shared_ptr<PendingOp>(std::move(op));
    names_[shared->name] = shared->handle;
    ops_[shared->handle] = shared;
  }
  const Handle handle = shared->handle;
  absl::Status sent;
  if (done_seq != 0) {
    proto::WorkerMessage both[2];
    both[0].mutable_done()->set_seq(done_seq);
    both[1] = std::move(msg);
    sent = link_->SendAll(absl::MakeSpan(both, 2));
  } else {
    sent = SendUp(std::move(msg));
  }
  if (absl::Status s = std::move(sent); !s.ok()) {
    Fail(s);  // the session ended: nothing can be negotiated any more
  }
  return handle;
}

void OpRuntime::Deliver(const proto::Plan& plan) {
  MutexLock lock(&mu_);
  if (!terminal_.ok()) return;
  plans_.push_back(plan);
  plan_cv_.SignalAll();
  if (link_ != nullptr) link_->Wake();
}

absl::Status OpRuntime::SendUp(proto::WorkerMessage msg) {
  if (link_ != nullptr) return link_->Send(std::move(msg));
  if (msg.has_announce()) {
    return session_->Announce(std::move(*msg.mutable_announce()));
  }
  return session_->Done(msg.done().seq());
}

void OpRuntime::Fail(absl::Status why) {
  MutexLock lock(&mu_);
  if (terminal_.ok()) terminal_ = std::move(why);
  int failed = 0;
  for (auto& [handle, op] : ops_) {
    // An op on the data plane completes when its collective returns (the
    // aborted data plane makes that prompt): its buffers are in use.
    if (op->done || op->running) continue;
    op->done = true;
    op->status = terminal_;
    ++failed;
  }
  names_.clear();
  plans_.clear();
  if (failed > 0) {
    Log()->info("{} pending op(s) failed: {}", failed,
                std::string(terminal_.message()));
  }
  plan_cv_.SignalAll();
  done_cv_.SignalAll();
  if (link_ != nullptr) link_->Wake();
}

void OpRuntime::Stop() {
  {
    MutexLock lock(&mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  absl::Status why =
      absl::AbortedError(absl::StrCat("kolo::shutdown() was called on rank ",
                                      rank_, " while this op was pending"));
  Fail(why);
  data_->Abort(why);  // a collective in flight returns at once
  if (thread_.joinable()) thread_.join();
}

std::optional<proto::Plan> OpRuntime::NextPlanFromLink() {
  while (true) {
    bool done_waits = false;
    {
      MutexLock lock(&mu_);
      if (stop_) return std::nullopt;
      if (!plans_.empty()) {
        proto::Plan plan = std::move(plans_.front());
        plans_.pop_front();
        return plan;
      }
      done_waits = unsent_done_ != 0;
    }
    absl::StatusOr<std::optional<proto::CoordinatorMessage>> msg =
        link_->Receive(done_waits ? kDoneDelay : absl::Seconds(1));
    if (done_waits) {
      // No submission took the Done along: it goes alone now.
      uint64_t seq;
      {
        MutexLock lock(&mu_);
        seq = std::exchange(unsent_done_, 0);
      }
      if (seq != 0) {
        proto::WorkerMessage done;
        done.mutable_done()->set_seq(seq);
        (void)link_->Send(std::move(done));
      }
    }
    if (msg.ok()) {
      if (msg->has_value() && (*msg)->has_plan()) {
        return std::move(*(*msg)->mutable_plan());
      }
      if (msg->has_value()) {
        Log()->warn("ignored a message of kind {} on the negotiation link",
                    (*msg)->body_case());
      }
      continue;
    }
    // The link broke: wait for the Session's verdict a little, then give
    // ours (announcements cannot reach the coordinator any more either).
    bool verdict = false;
    {
      MutexLock lock(&mu_);
      const absl::Time verdict_by = absl::Now() + absl::Seconds(2);
      while (terminal_.ok() && !stop_) {
        if (plan_cv_.WaitWithDeadline(&mu_, verdict_by)) break;
      }
      verdict = !terminal_.ok() || stop_;
    }
    if (!verdict) {
      Fail(absl::UnavailableError(
          absl::StrCat("rank ", rank_, ": ", msg.status().message(),
                       "; no plan can reach this rank any more")));
    }
    MutexLock lock(&mu_);
    while (!stop_) plan_cv_.Wait(&mu_);  // Fail cleared the queue for good
    return std::nullopt;
  }
}

void OpRuntime::ThreadMain() {
  if (link_ != nullptr) {
    while (std::optional<proto::Plan> plan = NextPlanFromLink()) {
      RunPlan(*plan);
    }
    return;
  }
  while (true) {
    proto::Plan plan;
    {
      MutexLock lock(&mu_);
      while (plans_.empty() && !stop_) plan_cv_.Wait(&mu_);
      if (stop_) return;
      plan = std::move(plans_.front());
      plans_.pop_front();
    }
    RunPlan(plan);
  }
}

void OpRuntime::RunPlan(const proto::Plan& plan) {
  // Resolve the names first (the table may change meanwhile: only this
  // thread completes ops, but Fail may complete them all).
  struct Step {
    const proto::Response* response;
    std::vector<std::shared_ptr<PendingOp>> ops;
  };
  std::vector<Step> steps;
  {
    MutexLock lock(&mu_);
    if (!terminal_.ok()) return;
    if (plan.seq() != last_seq_ + 1) {
      Log()->error("plan {} arrived after plan {}; plans must arrive in order",
                   plan.seq(), last_seq_);
    }
    last_seq_ = plan.seq();
    for (const proto::Response& r : plan.responses()) {
      Step step{&r, {}};
      for (const std::string& name : r.names()) {
        auto it = names_.find(name);
        if (it == names_.end()) {
          Log()->error("plan {} names '{}', which is not pending on rank {}",
                       plan.seq(), name, rank_);
          continue;
        }
        std::shared_ptr<PendingOp> op = ops_.at(it->second);
        op->running = true;
        step.ops.push_back(std::move(op));
      }
      steps.push_back(std::move(step));
    }
  }
  std::vector<absl::Status> results;
  for (Step& step : steps) {
    for (auto& op : step.ops) {
      results.push_back(
          Execute(*step.response, *op, *data_, rank_, size_, &op->result));
    }
  }
  // On the stream, Done goes before the callers wake: their next
  // announcement must not reach the coordinator ahead of it (the coordinator
  // would think this rank busy). On a link it waits (unsent_done_) for a
  // caller's next submission to carry it in the same write, or kDoneDelay.
  if (link_ == nullptr) {
    proto::WorkerMessage done;
    done.mutable_done()->set_seq(plan.seq());
    (void)SendUp(std::move(done));
  }
  MutexLock lock(&mu_);
  if (link_ != nullptr) unsent_done_ = plan.seq();
  size_t i = 0;
  for (Step& step : steps) {
    for (auto& op : step.ops) {
      op->running = false;
      op->done = true;
      op->status = std::move(results[i++]);
      if (auto it = names_.find(op->name);
          it != names_.end() && it->second == op->handle) {
        names_.erase(it);
      }
    }
  }
  done_cv_.SignalAll();
}

absl::Status OpRuntime::Unknown(Handle handle) const {
  return absl::NotFoundError(
      absl::StrCat("handle ", handle, " is not pending on rank ", rank_,
                   ": it was never returned by a *_async call of this job, or "
                   "synchronize() already released it"));
}

absl::Status OpRuntime::Take(Handle handle, OpResult* result) {
  auto it = ops_.find(handle);
  std::shared_ptr<PendingOp> op = std::move(it->second);
  ops_.erase(it);
  if (result != nullptr) *result = std::move(op->result);
  return op->status;
}

absl::StatusOr<bool> OpRuntime::Poll(Handle handle) {
  MutexLock lock(&mu_);
  auto it = ops_.find(handle);
  if (it == ops_.end()) return Unknown(handle);
  return it->second->done;
}

absl::Status OpRuntime::Synchronize(Handle handle, absl::Duration timeout,
                                    OpResult* result) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  auto it = ops_.find(handle);
  if (it == ops_.end()) return Unknown(handle);
  std::shared_ptr<PendingOp> op = it->second;
  while (!op->done) {
    if (done_cv_.WaitWithDeadline(&mu_, deadline) && !op->done) {
      return absl::DeadlineExceededError(absl::StrCat(
          proto::OpTypeName(op->op), " '", op->name, "' on rank ", rank_,
          " did not finish within ", absl::FormatDuration(timeout),
          "; the handle stays valid (the coordinator's stall warnings name "
          "ranks that have not submitted it)"));
    }
  }
  return Take(handle, result);
}

std::vector<absl::Status> OpRuntime::SynchronizeAll(
    absl::Span<const Handle> handles, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<absl::Status> out;
  out.reserve(handles.size());
  for (Handle h : handles) {
    out.push_back(Synchronize(h, deadline - absl::Now(), nullptr));
  }
  return out;
}

absl::StatusOr<size_t> OpRuntime::WaitAny(absl::Span<const Handle> handles,
                                          absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  if (handles.empty()) {
    return absl::InvalidArgumentError("wait_any() needs at least one handle");
  }
  bool timed_out = false;
  while (true) {
    for (size_t i = 0; i < handles.size(); ++i) {
      auto it = ops_.find(handles[i]);
      if (it == ops_.end()) return Unknown(handles[i]);
      if (it->second->done) return i;
    }
    if (timed_out) {
      return absl::DeadlineExceededError(
          absl::StrCat("none of ", handles.size(), " ops on rank ", rank_,
                       " finished within ", absl::FormatDuration(timeout)));
    }
    timed_out = done_cv_.WaitWithDeadline(&mu_, deadline);
  }
}

}  // namespace kolo::worker
