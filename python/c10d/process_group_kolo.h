// ProcessGroupKolo: torch 1.13's c10d::ProcessGroup over kolo's collectives,
// the backend that `import kolo.torch.distributed` registers as "kolo".
//
// Each collective is submitted to kolo (through kolo._kolo's API table,
// python/c_api.h) as a call of the group's ordered stream (proto
// Request.order_stream "c10d.<uid>": uid tells process groups on the same
// kolo process set apart) at slot seq mod kOrderSlots, where seq counts the
// group's calls, under the name "c10d.<uid>.<slot>.<op>.<dtype>[.<numel>]".
// Every member calls the same collectives in the same order (torch's rule),
// so the names match across ranks and kolo checks that the ranks agree on
// each (a disagreement fails the op on every rank). The names repeat: a
// training step that makes the same calls every step (DDP's buckets) names
// them alike from one lap of the slots to the next, so kolo's response
// cache (and its fast path) serves them, as it serves a Horovod step's
// named gradients. Two ranks that call different collectives at one point
// announce different names in the same slot, which kolo's coordinator
// settles: each fails on every rank (coordinator/negotiator_order.cc),
// rather than waiting for the other. A call waits (at most the group's
// timeout) for the one kOrderSlots before it, so that one slot never holds
// two calls in flight; a work clears its slot once its handles are
// released, so that a call whose predecessor was waited for asks kolo
// nothing (class CallSlots).
// A call takes its slot before its arguments are checked: one refused on
// this rank (a bad tensor or option, or kolo refusing the submission)
// still takes its slot, so the ranks' calls stay in step, and voids it
// (CApi order_void: a kolo op that stands for the call), which fails the
// other members' calls in that slot at once, naming this rank and why
// (coordinator/negotiator_order.cc), instead of letting them wait for the
// group's timeout. The refusing rank raises its own error at the call; the
// void's handle holds the slot until it settled, as a call's does, and the
// progress thread releases it.
// A KoloWork completes when kolo's handle does, on whichever thread claims
// it first: a thread in wait() completes its own op (no hand-off: the cost
// of a blocking collective is kolo's); otherwise the group's progress
// thread (class Progress), which drives the works whose futures were asked
// for (DDP's comm hooks) in order, copies results out (staging buffers,
// non-contiguous tensors) and completes the work and its future. A work's
// future is made only when asked for (getFuture), so a blocking collective
// pays for none.
//
// Timeout: the group's (init_process_group / new_group(timeout=...)) runs
// from the collective's call. A work not complete by then fails with a
// RuntimeError naming the op and the timeout (wait() raises it, the future
// carries it), and the group becomes unusable on this rank, as torch's gloo
// and nccl groups do: its later collectives raise at the call, saying why.
// kolo's op is not lost: the progress thread still synchronizes its handles
// and holds its tensors until it ends (when the late peers join it, or kolo
// fails it), so the tensors may still be written after the error. wait()
// with a shorter timeout of its own raises when that passes and leaves the
// work to complete (the progress thread drives it). An error
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
// Invariants: each kolo handle is synchronized to its end exactly once, by
// the thread that claimed its work (which then completes the work, with
// success or an error), or, for a work dropped unclaimed or timed out, by
// the progress thread (which holds the op's tensors until then), or, for a
// void, by the progress thread; a slot of CallSlots is non-zero only while
// its handle may be unreleased; the progress thread runs until the group
// is destroyed and its queue is empty.
#ifndef KOLO_PYTHON_C10D_PROCESS_GROUP_KOLO_H_
#define KOLO_PYTHON_C10D_PROCESS_GROUP_KOLO_H_

#include <array>
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
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "python/c_api.h"

namespace kolo::c10d_backend {

// The slots of a group's ordered stream: the most calls of one group in
// flight at once (a call waits for the one kOrderSlots before it), and the
// period after which a step's names repeat (a step of m calls names each
// call alike every kOrderSlots / gcd(m, kOrderSlots) steps).
inline constexpr uint32_t kOrderSlots = 64;

// One call of a group: its kolo name and its slot in the group's stream.
struct Call {
  std::string name;  // "c10d.<uid>.<slot>.<op>", then ".<signature>"
  uint32_t slot = 0;
  // Set by Order: from then on a refusal is kolo's, which voids the slot.
  bool ordered = false;
};

// The group's call slots: per slot, kolo's handle of the last call
// submitted there while it may still be in flight (0: none). Shared by the
// group and its works' ops (which may outlive the group): whoever releases
// an op's handles (synchronizes them) clears its slot, so that the call one
// lap later finds 0 and asks kolo nothing. A slot still holding a released
// handle (a race with that clearing) costs the next call a wait_any that
// answers kNotFound, and is otherwise harmless.
// Thread-safety: every member may be called from any thread (atomics).
class CallSlots {
 public:
  Handle Get(uint32_t slot) const {
    return slots_[slot].load(std::memory_order_acquire);
  }
  void Set(uint32_t slot, Handle h) {
    slots_[slot].store(h, std::memory_order_release);
  }
  // Clears `slot` if it still holds `h` (a later call may have replaced it).
  void Clear(uint32_t slot, Handle h) {
    slots_[slot].compare_exchange_strong(h, 0, std::memory_order_acq_rel);
  }

 private:
  std::array<std::atomic<Handle>, kOrderSlots> slots_{};
};

// A call's signature in its name: the dtype of `like`, and its element
// count when `numel` (leave it out where the ranks' tensors may differ, as
// alltoall's splits let them): "Float.1024".
std::string CallSignature(const at::Tensor& like, bool numel);

// What completing one op takes.
struct Pending {
  const char* title = "";       // "allreduce": a string literal
  std::string name;             // "c10d.0.0.3"
  std::vector<Handle> handles;  // kolo's, waited for in order
  // Runs after every handle succeeded, with their results: copies out;
  // throws to fail the op. May be empty.
  std::function<void(const std::vector<OpResult>&)> finish;
  // Tensors kolo reads or writes (inputs, staging copies, scratch outputs):
  // held until the handles completed.
  std::vector<at::Tensor> keep;
  // The group's slots and this call's slot there (null: none).
  std::shared_ptr<CallSlots> slots;
  uint32_t slot = 0;
  // How long the progress thread waits for the handles when it drains
  // them: a void's, the group's timeout after the call (its peers may
  // never come); past it the handles stay kolo's, and so does the slot.
  absl::Time drain_by = absl::InfiniteFuture();

  // "allreduce c10d.0.0.3", for messages.
  std::string What() const { return std::string(title) + " " + name; }
  // After its handles were released: clears its slot (CallSlots).
  void ClearSlot() const {
    if (slots != nullptr && !handles.empty())
      slots->Clear(slot, handles.back());
  }
};

class Progress;

// One op of the group: completes when its kolo handles have, or fails at
// its deadline (the group's timeout after the call). Whoever claims it
// first completes it: a thread in wait() (no timeout) at once, with no
// hand-off; isCompleted() once kolo finished it; wait() with a timeout once
// kolo finished it within that; or the progress thread, once the future
// was asked for (or wait()'s timeout passed). A work dropped unclaimed
// hands its op to the progress thread, which waits for it.
class KoloWork : public c10d::Work {
 public:
  // timeout: the group's (absl::InfiniteDuration() for none).
  KoloWork(const python::CApi* api, std::shared_ptr<Progress> progress,
           int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
           Pending pending, absl::Duration timeout);
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
  // Whether kolo finished every handle by `until` (not releasing them).
  bool Finished(absl::Time until);
  // The claimer: synchronizes until the deadline, runs finish, completes
  // work and future; past the deadline, TimeOut(i).
  void Run();
  // The claimer, at the deadline with handles [i, n) unfinished: fails the
  // work, marks the group unusable, leaves the rest of the op to the
  // progress thread.
  void TimeOut(size_t i);
  // Completes the work and the future (if made) with `error` or success.
  void Complete(std::exception_ptr error);

  const python::CApi* const api_;
  const std::shared_ptr<Progress> progress_;
  const std::vector<at::Tensor> outputs_;
  const absl::Duration timeout_;  // the group's
  const absl::Time deadline_;     // the call + timeout_
  // title, name and handles are read by every thread (and never change),
  // the rest by the claimer only.
  Pending pending_;
  std::atomic<bool> claimed_{false};
  std::atomic<bool> driven_{false};
  absl::Mutex future_mu_;
  // Made by the first getFuture(); completed by whichever of it and
  // Complete() comes second.
  c10::intrusive_ptr<c10::ivalue::Future> future_ ABSL_GUARDED_BY(future_mu_);
  bool done_ ABSL_GUARDED_BY(future_mu_) = false;
  std::exception_ptr error_ ABSL_GUARDED_BY(future_mu_);
};

// A group's progress thread: it completes the works whose futures were
// asked for (nobody may wait() on them) and releases the ops of works
// dropped unfinished or timed out. Shared with the works, which may outlive
// the group; after Stop() each call does its work on a thread of its own. It
// also keeps the group's health: whether an op timed out, which makes the group
// unusable. Made by std::make_shared only.
class Progress : public std::enable_shared_from_this<Progress> {
 public:
  explicit Progress(const python::CApi* api);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // Completes `work` once kolo finished it, unless a waiter claimed it.
  void Drive(c10::intrusive_ptr<KoloWork> work);
  // Waits for an abandoned op's handles (until its drain_by), then drops
  // its tensors and clears its slot.
  void Drain(Pending pending);
  // Joins the thread when it has nothing to do; otherwise (an op to wait
  // for, whose peers may never come) or once an op timed out, lets the
  // thread finish the queue on its own, holding this object until it has.
  // So it never waits for an op.
  void Stop();
  // Records that `what` ("allreduce c10d.0.0.3 after 1 s") timed out: the
  // group is unusable from now on (the first one is kept).
  void MarkTimedOut(std::string what);
  // Throws, naming `op`, once an op of the group timed out.
  void CheckUsable(const char* op);

 private:
  struct Item {
    c10::intrusive_ptr<KoloWork> work;  // or else:
    Pending pending;
  };
  void Loop();
  // Queues `item` for the thread, or once stopped runs it on a detached
  // thread of its own.
  void Enqueue(Item item);
  void Run(Item item);

  const python::CApi* const api_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // the thread runs an item
  std::atomic<bool> timed_out_{false};      // timed_out_what_ is set
  std::string timed_out_what_ ABSL_GUARDED_BY(mu_);
  // The thread's hold on this object once Stop() let it go on alone.
  std::shared_ptr<Progress> self_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

class ProcessGroupKolo : public c10d::ProcessGroup {
 public:
  // rank/size: in the group; process_set: kolo's set of the group's ranks
  // (0 = every rank); uid: tells groups on one set apart, identical on
  // every member; timeout: of each collective, from its call
  // (absl::InfiniteDuration() for none). `api` outlives the group.
  ProcessGroupKolo(const python::CApi* api, int rank, int size,
                   ProcessSet process_set, std::string uid,
                   absl::Duration timeout);
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
  // Runs `body` as the group's next call, `op`: takes the call's slot
  // (NextCall), then `body(call)` checks the arguments, names the call
  // (Name), and submits it (Order, kolo's *_async, Submit). A throw before
  // Order voids the slot (Void) and goes on to the caller; after it, Submit
  // voids the slot of a call kolo refused.
  template <typename Body>
  c10::intrusive_ptr<c10d::Work> Collective(const char* op, Body&& body) {
    Call call = NextCall(op);
    try {
      return body(call);
    } catch (const std::exception& e) {
      if (!call.ordered) Void(call, e.what());
      throw;
    } catch (...) {
      if (!call.ordered) Void(call, "an exception that is no std::exception");
      throw;
    }
  }
  // The next call, `op` (named "c10d.<uid>.<slot>.<op>"); waits until the
  // call kOrderSlots before it finished. Throws, naming `op`, once the
  // group is unusable (an op timed out), or when that wait passes the
  // group's timeout (which makes it unusable).
  Call NextCall(const char* op);
  // Appends the call's signature (CallSignature; none for a barrier).
  static void Name(Call& call, const std::string& sig);
  // Tells kolo that the next submission on this thread is `call`: call it
  // right before that submission, with its arguments made.
  void Order(Call& call) const {
    call.ordered = true;
    api_->order_next(stream_, call.slot);
  }
  // Tells kolo that this rank refused `call` (before submitting it, or
  // kolo did), and why: the other members' calls in its slot fail at once.
  // The void's handle holds the slot until it settled (the progress thread
  // releases it).
  void Void(const Call& call, absl::string_view why);
  // Queues an op whose handles kolo returned, holding `keep` until they
  // completed; throws (on this rank) the first submission error, after
  // queueing what was submitted (or voiding the slot: nothing was).
  c10::intrusive_ptr<c10d::Work> Submit(
      c10d::OpType type, const char* title, const Call& call,
      std::vector<absl::StatusOr<Handle>> submitted,
      std::vector<at::Tensor> outputs,
      std::function<void(const std::vector<OpResult>&)> finish,
      std::vector<at::Tensor> keep);
  // allgather and gather: one allgather of `input` into staging memory,
  // sliced into `outs` once it completed (none: a gather's non-root keeps
  // nothing). Names and orders `call`.
  c10::intrusive_ptr<c10d::Work> SubmitGathered(c10d::OpType type,
                                                const char* what, Call& call,
                                                const at::Tensor& input,
                                                std::vector<at::Tensor> outs);
  // A global rank of kolo's process set from a rank of this group.
  int GlobalRank(int64_t group_rank, const char* what) const;

  const python::CApi* const api_;
  const ProcessSet process_set_;
  const std::string uid_;
  const std::string stream_;  // "c10d.<uid>"
  const std::string prefix_;  // "c10d.<uid>."
  const absl::Duration timeout_;
  std::vector<int> global_ranks_;  // the set's ranks, ascending
  std::atomic<uint64_t> seq_{0};
  const std::shared_ptr<CallSlots> slots_ = std::make_shared<CallSlots>();

  std::shared_ptr<Progress> progress_;
};

}  // namespace kolo::c10d_backend

#endif  // KOLO_PYTHON_C10D_PROCESS_GROUP_KOLO_H_
