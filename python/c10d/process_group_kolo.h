// ProcessGroupKolo: torch 1.13's c10d::ProcessGroup over kolo's collectives,
// the backend that `import kolo.torch.distributed` registers as "kolo".
//
// Each collective is submitted to kolo (through kolo._kolo's API table,
// python/c_api.h) under the name "c10d.<uid>.<seq>": uid tells process
// groups on the same kolo process set apart, seq counts this group's
// collectives. Every member calls the same collectives in the same order
// (torch's rule), so the names match across ranks and kolo checks that the
// ranks agree on each (a disagreement fails the op on every rank). The op
// kind is not in the name on purpose: two ranks that call different
// collectives meet under one name and fail, rather than wait for each other.
// A KoloWork completes when kolo's handle does, on whichever thread claims
// it first: a thread in wait() completes its own op (no hand-off: the cost
// of a blocking collective is kolo's); otherwise the group's progress
// thread (class Progress), which drives the works whose futures were asked
// for (DDP's comm hooks) in order, copies results out (staging buffers,
// non-contiguous tensors) and completes the work and its future. An error
// becomes a std::runtime_error (RuntimeError in Python) that wait()
// rethrows and the future carries; one that a membership change caused (an
// elastic job's epoch ended) says so, with a tag kolo.torch.elastic reads
// ("[kolo membership=KIND code=N]"). A group serves the epoch it was made
// in: kolo.torch.distributed.reinit() makes the next epoch's.
//
// CPU tensors only (strided); point-to-point (send/recv) is refused: kolo
// has none.
//
// Thread-safety: the collectives may be called from any thread (torch calls
// them from the Python thread and DDP's autograd hooks); Progress's queue is
// guarded by its mu_; a KoloWork's op is completed by the one thread that
// claimed it (an atomic flag). KoloWork is thread-safe as c10d::Work is.
// Invariants: each kolo handle is synchronized exactly once, by the thread
// that claimed its work (which then completes the work, with success or an
// error), or, for a work dropped unclaimed, by the progress thread (which
// holds the op's tensors until then); the progress thread runs until the
// group is destroyed and its queue is empty.
#ifndef KOLO_PYTHON_C10D_PROCESS_GROUP_KOLO_H_
#define KOLO_PYTHON_C10D_PROCESS_GROUP_KOLO_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "python/c_api.h"

namespace kolo::c10d_backend {

// What completing one op takes.
struct Pending {
  std::string what;             // "allreduce c10d.0.0.3", for messages
  std::vector<Handle> handles;  // kolo's, waited for in order
  // Runs after every handle succeeded, with their results: copies out;
  // throws to fail the op. May be empty.
  std::function<void(const std::vector<OpResult>&)> finish;
  // Tensors kolo reads or writes (inputs, staging copies, scratch outputs):
  // held until the handles completed.
  std::vector<at::Tensor> keep;
};

class Progress;

// One op of the group: completes when its kolo handles have. Whoever claims
// it first completes it: a thread in wait() (no timeout) at once, with no
// hand-off; isCompleted() once kolo finished it; or the progress thread,
// once the future was asked for (or wait() with a timeout). A work dropped
// unclaimed hands its op to the progress thread, which waits for it.
class KoloWork : public c10d::Work {
 public:
  KoloWork(const python::CApi* api, std::shared_ptr<Progress> progress,
           int rank, c10d::OpType type, const char* title,
           std::vector<at::Tensor> outputs, Pending pending);
  ~KoloWork() override;
  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override;
  // The progress thread: waits until kolo finished the op or a waiter
  // claimed it, then completes it unless a waiter did.
  void Drive();

 private:
  bool Claim() { return !claimed_.exchange(true); }
  // Has the progress thread complete the work (once).
  void EnsureDriven();
  // The claimer: synchronizes, runs finish, completes work and future.
  void Run();

  const python::CApi* const api_;
  const std::shared_ptr<Progress> progress_;
  const std::vector<at::Tensor> outputs_;
  const c10::intrusive_ptr<c10::ivalue::Future> future_;
  // what and handles are read by every thread, the rest by the claimer only.
  Pending pending_;
  std::atomic<bool> claimed_{false};
  std::atomic<bool> driven_{false};
};

// A group's progress thread: it completes the works whose futures were
// asked for (nobody may wait() on them) and releases the ops of works
// dropped unfinished. Shared with the works, which may outlive the group;
// after Stop() both calls do their work at once, on the caller's thread.
class Progress {
 public:
  explicit Progress(const python::CApi* api);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // Completes `work` once kolo finished it, unless a waiter claimed it.
  void Drive(c10::intrusive_ptr<KoloWork> work);
  // Waits for an abandoned op's handles, then drops its tensors.
  void Drain(Pending pending);
  // Finishes what is queued and joins the thread.
  void Stop();

 private:
  struct Item {
    c10::intrusive_ptr<KoloWork> work;  // or else:
    Pending pending;
  };
  void Loop();
  // Queues `item` for the thread, or runs it here once stopped.
  void Enqueue(Item item);
  void Run(Item item);

  const python::CApi* const api_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

class ProcessGroupKolo : public c10d::ProcessGroup {
 public:
  // rank/size: in the group; process_set: kolo's set of the group's ranks
  // (0 = every rank); uid: tells groups on one set apart, identical on
  // every member. `api` outlives the group.
  ProcessGroupKolo(const python::CApi* api, int rank, int size,
                   ProcessSet process_set, std::string uid);
  ~ProcessGroupKolo() override;
  ProcessGroupKolo(const ProcessGroupKolo&) = delete;
  ProcessGroupKolo& operator=(const ProcessGroupKolo&) = delete;

  const std::string getBackendName() const override { return "kolo"; }

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors,
      const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output, at::Tensor& input,
      std::vector<int64_t>& output_splits, std::vector<int64_t>& input_splits,
      const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;

 private:
  // The next op's name, "c10d.<uid>.<seq>".
  std::string NextName();
  // Queues an op whose handles kolo returned, holding `keep` until they
  // completed; throws (on this rank) the first submission error, after
  // queueing what was submitted.
  c10::intrusive_ptr<c10d::Work> Submit(
      c10d::OpType type, const char* title, const std::string& name,
      std::vector<absl::StatusOr<Handle>> submitted,
      std::vector<at::Tensor> outputs,
      std::function<void(const std::vector<OpResult>&)> finish,
      std::vector<at::Tensor> keep);
  // A global rank of kolo's process set from a rank of this group.
  int GlobalRank(int64_t group_rank, const char* what) const;

  const python::CApi* const api_;
  const ProcessSet process_set_;
  const std::string uid_;
  std::vector<int> global_ranks_;  // the set's ranks, ascending
  std::atomic<uint64_t> seq_{0};

  std::shared_ptr<Progress> progress_;
};

}  // namespace kolo::c10d_backend

#endif  // KOLO_PYTHON_C10D_PROCESS_GROUP_KOLO_H_
