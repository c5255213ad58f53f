// CompletionWatcher: the thread that sees NCCL work finish. The plan runner
// enqueues a collective on kolo's stream and hands the watcher a poll
// function (typically: has the stream reached its marker event, and has
// ncclCommGetAsyncError reported an error); the watcher calls it, sleeping
// 10 µs growing to 1 ms between calls, until it reports done or an error,
// and wakes the runner. So an NCCL error becomes a typed kolo error instead
// of a hang, and an epoch's end (Abort) wakes the runner at once.
//
// Thread-safety: Await from one thread at a time (the plan runner); Abort
// from any thread. Await returns only once the watcher no longer runs the
// poll function (it may reference the caller's stack).
#ifndef KOLO_ALLREDUCE_NCCL_COMPLETION_H_
#define KOLO_ALLREDUCE_NCCL_COMPLETION_H_

#include <functional>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace kolo::nccl {

class CompletionWatcher {
 public:
  // true: done; false: not yet; an error: failed (returned by Await).
  using Poll = std::function<absl::StatusOr<bool>()>;

  CompletionWatcher();
  ~CompletionWatcher();  // stops and joins the thread
  CompletionWatcher(const CompletionWatcher&) = delete;
  CompletionWatcher& operator=(const CompletionWatcher&) = delete;

  // The poll's verdict; kDeadlineExceeded naming `what` after `deadline`;
  // Abort's status as soon as it is called (also when called before).
  absl::Status Await(Poll poll, absl::Time deadline, absl::string_view what)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Abort(absl::Status why) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Main() ABSL_LOCKS_EXCLUDED(mu_);

  Mutex mu_;
  CondVar cv_;
  Poll job_ ABSL_GUARDED_BY(mu_);              // empty: none
  bool polling_ ABSL_GUARDED_BY(mu_) = false;  // the thread is in job_
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status result_ ABSL_GUARDED_BY(mu_);
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);  // OK: not aborted
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kolo::nccl

#endif  // KOLO_ALLREDUCE_NCCL_COMPLETION_H_
