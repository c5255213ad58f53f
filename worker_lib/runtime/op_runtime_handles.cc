// OpRuntime (op_runtime.h), part 2 of 4: the callers' handles — whether an
// op finished, taking its result, poll, synchronize (one, all) and
// wait_any. Each wait is bounded by its timeout and ends at once when the
// runtime fails (done_cv_ is signalled by every completion and by Fail).
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "proto/op_names.h"
#include "worker_lib/runtime/op_runtime.h"
#include "worker_lib/runtime/op_runtime_internal.h"

namespace kolo::worker {

absl::Status OpRuntime::Unknown(Handle handle) const {
  return absl::NotFoundError(
      absl::StrCat("handle ", handle, " is not pending on rank ", rank_,
                   ": it was never returned by a *_async call of this job, or "
                   "synchronize() already released it"));
}

std::optional<bool> OpRuntime::Finished(Handle handle) const {
  if (auto g = groups_.find(handle); g != groups_.end()) {
    for (Handle member : g->second) {
      if (!ops_.at(member)->done) return false;
    }
    return true;
  }
  auto it = ops_.find(handle);
  if (it == ops_.end()) return std::nullopt;
  return it->second->done;
}

absl::Status OpRuntime::Take(Handle handle, OpResult* result,
                             std::vector<std::shared_ptr<PendingOp>>* taken) {
  if (auto g = groups_.find(handle); g != groups_.end()) {
    const std::vector<Handle> members = std::move(g->second);
    groups_.erase(g);
    absl::Status first;
    if (result != nullptr) *result = OpResult{};
    for (Handle member : members) {
      OpResult r;
      absl::Status s = Take(member, &r, taken);
      if (first.ok()) first = s;
      if (result != nullptr) result->members.push_back(std::move(r));
    }
    return first;
  }
  auto it = ops_.find(handle);
  std::shared_ptr<PendingOp> op = std::move(it->second);
  ops_.erase(it);
  if (result != nullptr) *result = std::move(op->result);
  absl::Status status = op->status;
  if (taken != nullptr) taken->push_back(std::move(op));
  return status;
}

absl::StatusOr<bool> OpRuntime::Poll(Handle handle) {
  {
    // A finished op sends nothing: a pending Done stays for the next
    // announcement (see "Announcements" in op_runtime.h).
    MutexLock lock(&mu_);
    std::optional<bool> finished = Finished(handle);
    if (!finished.has_value()) return Unknown(handle);
    if (*finished) return true;
  }
  FlushOutbox();  // the caller waits: nothing more comes soon
  MutexLock lock(&mu_);
  std::optional<bool> finished = Finished(handle);
  if (!finished.has_value()) return Unknown(handle);
  return *finished;
}

absl::StatusOr<bool> OpRuntime::TrySynchronize(Handle handle, OpResult* result,
                                               bool reads_next) {
  // A finished op is taken at once and sends nothing (as in Poll): after
  // the first handle of a step, the others of its plan are finished, and
  // the plan's Done rides with the next step's announcements, as with
  // SynchronizeAll. Recycled after the unlock, as there; one scratch list
  // per thread, so that a caller that synchronizes handle by handle
  // (Horovod's optimizer through kolo.torch) allocates nothing per call.
  thread_local std::vector<std::shared_ptr<PendingOp>> taken;
  absl::Status status;
  bool finished = false;
  {
    MutexLock lock(&mu_);
    std::optional<bool> known = Finished(handle);
    if (!known.has_value()) return Unknown(handle);
    finished = *known;
    if (finished) status = Take(handle, result, &taken);
  }
  if (!finished) {
    FlushOutbox(reads_next);  // the caller waits: nothing more comes soon
    return false;
  }
  Recycle(taken);
  taken.clear();
  if (!status.ok()) return status;
  return true;
}

absl::Status OpRuntime::Synchronize(Handle handle, absl::Duration timeout,
                                    OpResult* result) {
  // Finished (or failed, or unknown): as TrySynchronize says. Else the
  // outbox went (the caller waits) and this waits for it.
  absl::StatusOr<bool> done =
      TrySynchronize(handle, result, /*reads_next=*/true);
  if (!done.ok()) return done.status();
  if (*done) return absl::OkStatus();
  thread_local std::vector<std::shared_ptr<PendingOp>> taken;
  absl::Status status;
  {
    const absl::Time deadline = absl::Now() + timeout;
    MutexLock lock(&mu_);
    status = SynchronizeLocked(handle, deadline, timeout, result, &taken);
  }
  Recycle(taken);
  taken.clear();
  return status;
}

absl::Status OpRuntime::SynchronizeLocked(
    Handle handle, absl::Time deadline, absl::Duration timeout,
    OpResult* result, std::vector<std::shared_ptr<PendingOp>>* taken) {
  std::optional<bool> finished = Finished(handle);
  if (!finished.has_value()) return Unknown(handle);
  while (!*finished) {
    if (AwaitProgress(deadline)) {
      finished = Finished(handle);
      if (*finished) break;
      auto g = groups_.find(handle);
      const PendingOp& op =
          *ops_.at(g == groups_.end() ? handle : g->second[0]);
      return absl::DeadlineExceededError(absl::StrCat(
          g == groups_.end() ? "" : "grouped ", proto::OpTypeName(op.op), " '",
          op.name, "' on rank ", rank_, " did not finish within ",
          absl::FormatDuration(timeout),
          "; the handle stays valid (the coordinator's stall warnings name "
          "ranks that have not submitted it)"));
    }
    finished = Finished(handle);
  }
  return Take(handle, result, taken);
}

std::vector<absl::Status> OpRuntime::SynchronizeAll(
    absl::Span<const Handle> handles, absl::Duration timeout) {
  // The caller waits (nothing more comes soon), reading the link if free.
  FlushOutbox(/*reads_next=*/true);
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<absl::Status> out;
  out.reserve(handles.size());
  // Recycled after the unlock: resetting or freeing hundreds of ops under
  // the lock would hold up the background thread.
  std::vector<std::shared_ptr<PendingOp>> taken;
  taken.reserve(handles.size());
  {
    // One lock for all: a step's hundreds of handles usually complete in one
    // plan, and each wake-up then releases every handle it finished.
    MutexLock lock(&mu_);
    for (Handle h : handles) {
      out.push_back(SynchronizeLocked(h, deadline, timeout, nullptr, &taken));
    }
  }
  Recycle(taken);
  return out;
}

absl::StatusOr<size_t> OpRuntime::WaitAny(absl::Span<const Handle> handles,
                                          absl::Duration timeout) {
  // The caller waits (nothing more comes soon), reading the link if free.
  FlushOutbox(/*reads_next=*/true);
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  if (handles.empty()) {
    return absl::InvalidArgumentError("wait_any() needs at least one handle");
  }
  bool timed_out = false;
  while (true) {
    for (size_t i = 0; i < handles.size(); ++i) {
      std::optional<bool> finished = Finished(handles[i]);
      if (!finished.has_value()) return Unknown(handles[i]);
      if (*finished) return i;
    }
    if (timed_out) {
      return absl::DeadlineExceededError(
          absl::StrCat("none of ", handles.size(), " ops on rank ", rank_,
                       " finished within ", absl::FormatDuration(timeout)));
    }
    timed_out = AwaitProgress(deadline);
  }
}

}  // namespace kolo::worker
