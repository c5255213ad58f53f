// LocalFabric: an in-process Transport for N ranks run as N threads, for
// testing the collective algorithms without sockets.
//
// Each ordered pair (src, dst) has a mailbox: a FIFO of started sends and a
// FIFO of started receives. Whenever both are non-empty the heads are
// matched: the operation sequences (BeginOperation) and the lengths must
// agree, else both ops fail with an error naming the peer; then the bytes are
// copied straight from the sender's buffer into the receiver's (rendezvous:
// nothing is buffered, so a send completes only once its receive exists;
// algorithms that would deadlock without transport buffering deadlock here
// too, which the inactivity deadline turns into an error).
//
// Wait(op) blocks on a condition variable until the op is done, the
// transport is aborted (returns the abort reason at once), or no op of this
// rank has completed for the inactivity timeout (kDeadlineExceeded naming
// the peer). Abort(why) also withdraws the rank's unmatched ops from the
// mailboxes, so after it returns no copy touches that rank's buffers.
//
// Thread-safety: one fabric-wide Mutex guards every mailbox and op; each
// rank's Transport is used by one thread (Abort from any thread), as the
// Transport contract says.
#ifndef KOLO_TESTS_TESTING_LOCAL_TRANSPORT_H_
#define KOLO_TESTS_TESTING_LOCAL_TRANSPORT_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "allreduce/transport.h"
#include "common/mutex.h"

namespace kolo::testing {

class LocalFabric {
 public:
  // REQUIRES: size >= 1, timeout > 0.
  LocalFabric(int size, absl::Duration inactivity_timeout);
  // A fabric whose ranks use the given transports (one per rank, rank i's
  // at index i, e.g. shared memory) instead of the in-process mailboxes;
  // Run's rank threads and abort-on-failure work the same.
  explicit LocalFabric(std::vector<std::unique_ptr<Transport>> transports);
  ~LocalFabric();
  LocalFabric(const LocalFabric&) = delete;
  LocalFabric& operator=(const LocalFabric&) = delete;

  int size() const { return size_; }
  // Rank `rank`'s transport, owned by the fabric.
  Transport& transport(int rank);
  // Aborts every rank's transport.
  void AbortAll(const absl::Status& why);

  // Runs fn(transport) for every rank, each on that rank's thread (started
  // on the first Run and kept, so that a test can run thousands of
  // collectives cheaply), and returns the statuses by rank. A rank that
  // returns OK with ops it never waited for fails with kInternal. When one
  // rank fails, the others are aborted with an error naming it, so a failing
  // test ends at once instead of at the deadline; the fabric then stays
  // aborted. REQUIRES: one Run at a time.
  std::vector<absl::Status> Run(
      const std::function<absl::Status(Transport&)>& fn);

 private:
  using Job = std::function<absl::Status(Transport&)>;
  void RankThread(int rank);

  class RankTransport;
  struct Op;
  struct Mailbox {
    std::deque<Op*> sends;
    std::deque<Op*> recvs;
  };

  Mailbox& BoxLocked(int src, int dst) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return boxes_[static_cast<size_t>(src * size_ + dst)];
  }
  void MatchLocked(int src, int dst) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CompleteLocked(Op* op, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int size_;
  const absl::Duration timeout_;
  Mutex mu_;
  CondVar cv_;
  std::vector<Mailbox> boxes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<RankTransport>> ranks_;
  std::vector<std::unique_ptr<Transport>> external_;  // or these

  // The rank threads and the job they run.
  Mutex run_mu_;
  CondVar run_cv_;
  const Job* job_ ABSL_GUARDED_BY(run_mu_) = nullptr;
  uint64_t generation_ ABSL_GUARDED_BY(run_mu_) = 0;
  int running_ ABSL_GUARDED_BY(run_mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(run_mu_) = false;
  std::vector<absl::Status> results_ ABSL_GUARDED_BY(run_mu_);
  std::vector<std::thread> threads_;  // only the thread calling Run
};

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_LOCAL_TRANSPORT_H_
