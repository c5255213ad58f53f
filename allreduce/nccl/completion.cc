#include "allreduce/nccl/completion.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace kolo::nccl {

CompletionWatcher::CompletionWatcher() : thread_([this] { Main(); }) {}

CompletionWatcher::~CompletionWatcher() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

void CompletionWatcher::Main() {
  mu_.Lock();
  absl::Duration nap = absl::Microseconds(10);
  while (!stop_) {
    if (!job_ || finished_) {
      cv_.Wait(&mu_);
      nap = absl::Microseconds(10);
      continue;
    }
    Poll poll = job_;  // a copy: Await may clear job_ meanwhile
    polling_ = true;
    mu_.Unlock();
    absl::StatusOr<bool> done = poll();
    mu_.Lock();
    polling_ = false;
    if (job_ && !finished_ && (!done.ok() || *done)) {
      finished_ = true;
      result_ = done.ok() ? absl::OkStatus() : done.status();
    }
    cv_.SignalAll();
    if (!finished_ && job_) {
      cv_.WaitWithTimeout(&mu_, nap);
      nap = std::min(nap * 2, absl::Milliseconds(1));
    }
  }
  mu_.Unlock();
}

absl::Status CompletionWatcher::Await(Poll poll, absl::Time deadline,
                                      absl::string_view what) {
  MutexLock lock(&mu_);
  if (!aborted_.ok()) return aborted_;
  job_ = std::move(poll);
  finished_ = false;
  result_ = absl::OkStatus();
  cv_.SignalAll();
  absl::Status out;
  while (true) {
    if (finished_) {
      out = result_;
      break;
    }
    if (!aborted_.ok()) {
      out = aborted_;
      break;
    }
    if (cv_.WaitWithDeadline(&mu_, deadline) && !finished_ &&
        absl::Now() >= deadline) {
      out = absl::DeadlineExceededError(
          absl::StrCat(what, " did not complete in time"));
      break;
    }
  }
  job_ = nullptr;
  // The poll may reference the caller's stack: wait until it is not running.
  while (polling_) cv_.Wait(&mu_);
  return out;
}

void CompletionWatcher::Abort(absl::Status why) {
  {
    MutexLock lock(&mu_);
    if (aborted_.ok()) {
      aborted_ = why.ok() ? absl::AbortedError("aborted") : std::move(why);
    }
  }
  cv_.SignalAll();
}

}  // namespace kolo::nccl
