// OpRuntime: the negotiated side of a worker — the table of submitted ops,
// and the background thread that runs the coordinator's plans on the data
// plane in sequence order and completes the ops' handles.
//
// Flow: Submit() validates the op (op_request.h), records it under its name
// and handle and announces it from the caller's thread (no extra thread hop
// before the coordinator sees it) on its CoordinatorLink
// (session/coordinator_link.h): the negotiation link when there is one,
// else the Session stream. The background thread reads plans from the
// link itself (no hop between a reader and it); plans that come on the
// stream (Deliver) are queued and wake it too. It blocks in poll or on a
// condition variable, never spinning (docs/design.md "Waiting policy": spin
// only on data-plane waits), runs every response of a plan in order
// (plan_executor.h), tells the coordinator Done(seq) — before waking the
// callers, so that a caller's next announcement never overtakes it — and then
// completes the handles.
//
// Who runs plans: one thread at a time reads the link and runs what it
// reads, in plan order: the thread that holds the PlanRunner
// (exec/plan_runner.h: the fusion buffer, the process sets' planes, the
// executors), which it takes from the runtime and hands back under mu_;
// while it is out, nobody else reads the link or touches the data plane.
// On the stream (the link carries no plans) callers do not read it. A caller
// that waits for its ops (synchronize, wait_any) while no other thread reads
// takes the link itself: the plan then wakes the caller directly and the caller
// runs it — one wake-up per step instead of two (the background thread's for
// the plan, the caller's after it); on this VM a cross-CPU wake-up costs the
// waker tens of microseconds. The background thread stays off the link while a
// caller reads it, while the caller is submitting (it will soon wait), and
// for kDoneDelay after a plan it ran that left nothing pending (the caller
// comes back with its next step); it is not woken when a caller lets go:
// it comes back within an announce window (one second when nobody
// submitted for a second). So plans that arrive while the caller keeps
// submitting run within one announce window (Horovod's background loop
// runs once per cycle likewise), and a Done that a caller's plan leaves
// unsent goes within one announce window when nothing takes it along.
//
// Announcements (a link that coalesces writes; on the stream each goes at
// once): a submission waits in an outbox that goes out
// when the caller starts waiting (synchronize, wait_any, poll), when it
// holds 64 KiB, or at the latest after the announce window (the cycle time:
// the next submission or the background thread sends it) — a backward
// pass's burst of submissions costs one write, not one each, and its
// tensors become ready together and fuse. A finished plan's Done waits for
// the announcements that follow it: up to 200 µs for the first submission,
// then with the outbox (the caller's wait, or the end of the announce
// window, sends both; the coordinator holds what becomes ready until the
// Done comes), so a step's tensors leave in one plan and one write. A
// tensor whose Request equals the one its cache bit was assigned for goes as
// that bit (cache_mirror.h). Send order: every write carries the outbox first,
// then a pending Done; a mutex held from taking them to writing them keeps
// writes in that order, so the coordinator never sees Done(s) before an
// announcement built before plan s's cache changes were applied (which happens
// as a plan starts).
//
// Fusion: a fused response runs through fused_executor.h over the plan
// runner's persistent fusion buffer.
//
// Process sets: the runtime keeps the registered sets (add/remove are
// negotiated ops; a set is registered here when its plan runs, before the
// caller wakes). Names of set N are qualified ("<name> (process set N)")
// so that every set has its own names, and unnamed ops count per set. A
// set's collectives run on a subset data plane over the same connections;
// every collective is stamped with a sequence number derived from (plan,
// response), so ranks outside a set, which skip its responses, stay in
// step with the members.
//
// Grouped ops: one handle stands for its members' handles; it is finished
// when every member is (the coordinator sends them in one plan).
//
// Join: while this rank's join is pending, an allreduce it did not submit
// runs with the reduce op's identity as its input (Response.joined), and
// responses for other names it lacks are skipped quietly.
//
// Timeline (rank 0 with KOLO_TIMELINE): negotiation from submission to the
// plan with each rank's ready tick, queueing, fusion copies and the
// collective, per tensor; a marker per plan.
//
// A link that breaks: the job is probably ending (the coordinator closes
// links when it does), so the background thread waits up to 2 s for the
// Session's verdict (Fail with the coordinator's reason); then it fails the
// pending ops itself, naming the link.
//
// Errors: a name already in flight here → kInvalidArgument at once. Fail()
// (the job ended, the coordinator was lost, shutdown) completes every pending
// op with its status and refuses later submissions.
//
// Files: op_runtime.cc (construction, Stop/Fail, submission),
// op_runtime_handles.cc (poll, synchronize, wait_any), op_runtime_plans.cc
// (running plans), op_runtime_link.cc (the outbox, Done and reading the
// link: talking to the coordinator).
//
// Thread-safety: every method may be called from any thread. Deliver and
// Fail may be called under the Session's lock: they only take mu_, and
// nothing here calls the Session or the data plane with mu_ held.
// Lifetime: Stop() (or the destructor) joins the background thread; the
// DataPlane given at construction must outlive Stop() (the Session is
// shared: a Submit racing with Stop may still announce on it).
#ifndef KOLO_WORKER_LIB_RUNTIME_OP_RUNTIME_H_
#define KOLO_WORKER_LIB_RUNTIME_OP_RUNTIME_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "allreduce/data_plane.h"
#include "common/mutex.h"
#include "kolo/kolo.h"
#include "proto/kolo.pb.h"
#include "worker_lib/exec/cuda_executor.h"
#include "worker_lib/exec/plan_runner.h"
#include "worker_lib/op_request.h"
#include "worker_lib/runtime/job_context.h"
#include "worker_lib/runtime/outbox.h"
#include "worker_lib/session/cache_mirror.h"
#include "worker_lib/session/coordinator_link.h"
#include "worker_lib/session/session_client.h"
#include "worker_lib/timeline.h"

namespace kolo::worker {

// What the runtime takes from its epoch (the job's settings come from its
// JobContext: the fusion threshold and cache capacity, which change at run
// time through SetFusionThreshold / SetCacheCapacity; the announce window,
// KOLO_CYCLE_TIME_MS: the longest a submission waits to share a write with
// later ones while the caller does not wait for any op, as Horovod's
// background loop picks up submissions once per cycle; the CUDA settings).
struct RuntimeOptions {
  // Null: none. Shared with the next epochs' runtimes of an elastic job
  // (the file spans epochs; the last Stop(true) closes it).
  std::shared_ptr<Timeline> timeline;
  // Elastic jobs: this runtime serves one epoch. Handles start at
  // first_handle (the previous epoch's next_handle(), so that handles are
  // unique for the job), and an op on one of dissolved_sets (the process
  // sets of earlier epochs) fails with kFailedPrecondition saying that the
  // membership change dissolved it.
  Handle first_handle = 1;
  uint64_t epoch = 1;
  std::vector<int32_t> dissolved_sets;
};

// Whether this thread's waits are slices of a longer wait that their
// caller repeats until the op finishes (the Python bindings' 200 ms slices,
// which check for signals between them; internal::SlicedWaits sets it). On
// the fast path such a wait runs the rounds itself unless less than 100 ms
// is left, and may end after its deadline while the peers come to a round
// (within about kFastPathPatience); any other wait leaves the rounds to the
// background thread when less than kFastPathPatience + 500 ms is left, so
// that it ends by its deadline (a torch.distributed Work's wait(timeout), a
// group's timeout). Thread-local.
bool ThreadWaitsSliced();
void SetThreadWaitsSliced(bool sliced);

class OpRuntime {
 public:
  // `job`: read here only (the settings are copied). `rank`/`size`: this
  // worker's place in the epoch; `link`: the negotiation link, or a
  // StreamLink over `session`. Starts the thread.
  OpRuntime(const JobContext& job, std::shared_ptr<SessionClient> session,
            std::unique_ptr<CoordinatorLink> link, DataPlane* data, int rank,
            int size, RuntimeOptions options = {});
  ~OpRuntime();
  OpRuntime(const OpRuntime&) = delete;
  OpRuntime& operator=(const OpRuntime&) = delete;

  // A fresh op to fill in and Submit: a finished one recycled when there is
  // one (synchronize and synchronize_all return them), else a new one.
  std::shared_ptr<PendingOp> NewOp() ABSL_LOCKS_EXCLUDED(pool_mu_);
  // Announces `op` (its name may be empty: one is made up) and returns its
  // handle.
  absl::StatusOr<Handle> Submit(std::shared_ptr<PendingOp> op)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Announces the members of a group (same op and process set) under
  // `name` (may be empty) and returns the group's handle.
  absl::StatusOr<Handle> SubmitGroup(
      std::vector<std::shared_ptr<PendingOp>> members, absl::string_view name)
      ABSL_LOCKS_EXCLUDED(mu_);

  // kolo::join: submits the join (or goes on waiting for the pending one)
  // and returns the last rank to join.
  absl::StatusOr<int> Join(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

  // Process sets (kolo::add_process_set and friends).
  absl::StatusOr<int32_t> AddProcessSet(std::vector<int> ranks)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status RemoveProcessSet(int32_t id) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<int>> ProcessSetRanks(int32_t id)
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<int32_t> ProcessSetIds() ABSL_LOCKS_EXCLUDED(mu_);
  // The handle the next submission gets.
  Handle next_handle() ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<bool> Poll(Handle handle) ABSL_LOCKS_EXCLUDED(mu_);
  // kolo::try_synchronize: Synchronize of a finished op (true, or its
  // error); false (the outbox sent, as Poll) while it runs. `reads_next`:
  // the caller waits for it next (FlushOutbox).
  absl::StatusOr<bool> TrySynchronize(Handle handle, OpResult* result,
                                      bool reads_next = false)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Synchronize(Handle handle, absl::Duration timeout,
                           OpResult* result) ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<absl::Status> SynchronizeAll(absl::Span<const Handle> handles,
                                           absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<size_t> WaitAny(absl::Span<const Handle> handles,
                                 absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Runtime settings for ops submitted later (kolo::set_fusion_threshold,
  // set_cache_capacity): told to the coordinator with the next announcement.
  absl::Status SetFusionThreshold(int64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // The dynamic timeline (kolo::start_timeline / stop_timeline): opens
  // `path` (closing a timeline already open) / closes the open one. The
  // runtime must have been created with timeline_dynamic; events of ops
  // submitted before the start begin at their next phase.
  absl::Status StartTimeline(const std::string& path) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status StopTimeline() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status SetCacheCapacity(int64_t entries) ABSL_LOCKS_EXCLUDED(mu_);

  // The Session's plan sink.
  void Deliver(const proto::Plan& plan) ABSL_LOCKS_EXCLUDED(mu_);
  // Completes every pending op with `why` (the first call wins) and refuses
  // later submissions with it.
  void Fail(absl::Status why) ABSL_LOCKS_EXCLUDED(mu_);
  // Fail(kAborted "shutdown") and join the background thread. Idempotent.
  // Returns kFailedPrecondition naming the ops that were still in flight
  // (abandoned: submitted, not complete) and what each waited for, after
  // logging it at warn on this rank; OK when there were none.
  // `close_timeline`: false when the next epoch goes on writing it.
  absl::Status Stop(bool close_timeline = true) ABSL_LOCKS_EXCLUDED(mu_);
  // Before Stop at shutdown, on a live epoch: when this rank is on the fast
  // path, leaves it together with the other ranks (FastPathLink::Leave),
  // so that no round waits for this rank after it stopped. Bounded (the
  // round's patience plus the peers' way to a round); logs when it fails.
  void LeaveFastPath() ABSL_LOCKS_EXCLUDED(mu_);
  // The timeline this runtime writes (null: none).
  std::shared_ptr<Timeline> timeline() ABSL_LOCKS_EXCLUDED(mu_);
  // The fast path's rounds so far in this epoch (0 without the fast path).
  uint64_t fast_path_rounds() const;

 private:
  // `link`, or a FastPathLink around it when the job asks for the fast path
  // (KOLO_FAST_PATH) and the link reads plans (runtime/fast_path_link.h).
  std::unique_ptr<CoordinatorLink> WithFastPath(
      std::unique_ptr<CoordinatorLink> link, const JobContext& job,
      DataPlane* data, int rank);
  void ThreadMain() ABSL_LOCKS_EXCLUDED(mu_);
  // Submits `ops` (one op, or a group's members when `group`), returning
  // the op's or the group's handle.
  absl::StatusOr<Handle> SubmitOps(absl::Span<std::shared_ptr<PendingOp>> ops,
                                   bool group, absl::string_view group_name)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A submission's process set and this rank's place in it (members: null
  // for set 0, else the set's ranks).
  struct SetPlace {
    int32_t set = 0;
    int rank = 0, size = 0;
    const std::vector<int>* members = nullptr;
  };
  // Checks that this rank may submit to `head`'s process set, and finds its
  // place there.
  absl::Status PlaceSubmission(const PendingOp& head, bool group,
                               absl::string_view group_name, SetPlace& place)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Names the ops (made up when empty, qualified by set and group; the
  // group's key in `group_key`), checks the names, and enters them in
  // names_ with the handles RecordOp will give them, in order (nothing is
  // entered when it fails). RecordOp must follow at once, under the lock.
  absl::Status NameOps(absl::Span<std::shared_ptr<PendingOp>> ops, bool group,
                       absl::string_view group_name, std::string& group_key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives `op` its handle, puts its announcement in the outbox and records
  // it in the tables; returns the handle.
  Handle RecordOp(std::shared_ptr<PendingOp> op, const SetPlace& place,
                  absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a submission: whether the outbox goes now (else `wake`: whether
  // the background thread must be woken to send it in time).
  bool ScheduleAnnounce(absl::Time now, bool& wake)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `handle` (an op or a group) finished; nullopt if unknown.
  std::optional<bool> Finished(Handle handle) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The background thread's next plan (queued or read), or nullopt when
  // stopping. With a plan, `held` holds the plan runner (the link is this
  // thread's) until the plan ran and the runner went back.
  std::optional<proto::Plan> NextPlanFromLink(std::unique_ptr<PlanRunner>& held)
      ABSL_LOCKS_EXCLUDED(mu_);
  // What the background thread does next with the link: stop, run a plan
  // that came on the stream, or read the link.
  enum class LinkTurn { kStop, kQueued, kRead };
  // Parks the background thread until its turn (sending the outbox or a
  // lone Done when their time comes); kQueued fills `queued`. kQueued and
  // kRead take the plan runner into `held`.
  LinkTurn AwaitLinkTurn(std::optional<proto::Plan>& queued,
                         std::unique_ptr<PlanRunner>& held)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long the next read of the link may wait (`done_waits`: a Done is
  // held for the caller's next announcement).
  absl::Duration LinkReadTimeout(bool& done_waits)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a read: hands the runner back unless a plan came, and sends what
  // is due.
  void AfterLinkRead(bool got_plan, bool done_waits,
                     std::unique_ptr<PlanRunner>& held)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The link broke: the Session's verdict, else ours; returns once stopping.
  void OnLinkBroken(const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);
  // A caller's wait for its ops, until `deadline` (true when it passed):
  // when the plan runner is free and the link carries plans, the caller
  // takes the runner, reads the link and runs the plans that come;
  // otherwise it waits for done_cv_.
  bool AwaitProgress(absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Announce / Done on the link or the stream.
  absl::Status SendUp(proto::WorkerMessage msg);
  // Writes the outbox (if any) and then the pending Done (if any). Call
  // with send_mu_ held, not mu_.
  absl::Status Flush() ABSL_EXCLUSIVE_LOCKS_REQUIRED(send_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Flush() for a caller holding mu_: releases it around the write (the
  // lock order puts send_mu_ first) and takes it again.
  void FlushFromUnderLock() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)
      ABSL_LOCKS_EXCLUDED(send_mu_);
  // A failed Flush: the background thread reads the broken link and waits
  // for the Session's verdict (OnLinkBroken).
  void OnFlushError(const absl::Status& s) ABSL_LOCKS_EXCLUDED(mu_);
  // Flush() if the outbox or a Done holds anything (a caller starts
  // waiting). `reads_next`: the caller reads the link next if it is free
  // (its wait); otherwise WakeQuietReader follows the write.
  void FlushOutbox(bool reads_next = false) ABSL_LOCKS_EXCLUDED(mu_, send_mu_);
  // After a write by a thread that does not read the link next: wakes the
  // background thread if it waits off the link (bg_quiet_) and the link now
  // has work (CoordinatorLink::ReadBy).
  void WakeQuietReader() ABSL_LOCKS_EXCLUDED(mu_);
  void WakeQuietReaderLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A plan being run: its steps, how many of this rank's pending ops it
  // runs, and (with a timeline) their names.
  struct PlanRun {
    std::vector<PlanStep> steps;
    size_t in_plan = 0;
    absl::flat_hash_set<std::string> traced;
    std::shared_ptr<Timeline> timeline;  // this plan's, may be null
  };
  // Runs a plan: resolves its names to ops, runs each response on
  // `runner`, sends or holds its Done, completes the ops and wakes the
  // callers.
  void RunPlan(proto::Plan& plan, absl::Time arrived, PlanRunner& runner)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Applies the plan's cache changes and resolves its responses to this
  // rank's ops (false: the runtime failed; nothing to run).
  bool ResolvePlan(proto::Plan& plan, PlanRun& run) ABSL_LOCKS_EXCLUDED(mu_);
  // The cache changes of `plan` (names filled in first when needed).
  void ApplyCacheChanges(proto::Plan& plan, bool timeline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // This rank's place in the step's process set (false: not a member).
  bool PlaceInSet(PlanStep& step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The step's ops by name (a joined rank's stand-ins included).
  void ResolveNames(uint64_t seq, bool joined, PlanStep& step, PlanRun& run)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends the plan's Done now, or holds it for the next write.
  void SendOrHoldDone(uint64_t seq, size_t in_plan) ABSL_LOCKS_EXCLUDED(mu_);
  // Completes the ops with their results (process sets registered).
  void CompleteSteps(std::vector<PlanStep>& steps, StepResults& results)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Timeline events of a plan's arrival (rank 0 with a timeline only).
  // `mine`: the names of this rank's ops in the plan.
  void TracePlan(Timeline& timeline, const proto::Plan& plan,
                 absl::Time arrived,
                 const absl::flat_hash_set<std::string>& mine);
  // kNotFound naming the handle.
  absl::Status Unknown(Handle handle) const;
  // Finished: release the handle and give its result. The released ops go
  // to `*taken` when given (the caller frees them after unlocking).
  absl::Status Take(Handle handle, OpResult* result,
                    std::vector<std::shared_ptr<PendingOp>>* taken = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits until `handle` finished or `deadline` (kDeadlineExceeded naming
  // `timeout`), then takes it.
  absl::Status SynchronizeLocked(
      Handle handle, absl::Time deadline, absl::Duration timeout,
      OpResult* result,
      std::vector<std::shared_ptr<PendingOp>>* taken = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Keeps `taken` ops for NewOp when nothing else holds them.
  void Recycle(std::vector<std::shared_ptr<PendingOp>>& taken)
      ABSL_LOCKS_EXCLUDED(pool_mu_, mu_);

  const std::shared_ptr<SessionClient> session_;
  const std::unique_ptr<CoordinatorLink> link_;
  DataPlane* const data_;
  const int rank_, size_;
  // May be null; replaced at run time only with timeline_dynamic_ (users
  // take a reference under mu_ and write to it outside).
  std::shared_ptr<Timeline> timeline_ ABSL_GUARDED_BY(mu_);
  const bool timeline_dynamic_;
  // KOLO_CYCLE_TIME_MS, then autotune's cycle time (Plan.autotune).
  absl::Duration announce_window_ ABSL_GUARDED_BY(mu_);
  const absl::Duration data_timeout_;  // KOLO_TIMEOUT_SECONDS
  const uint64_t epoch_;
  const std::vector<int32_t> dissolved_sets_;

  // Orders writes to the coordinator (see the header comment); taken before
  // mu_.
  Mutex send_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  Mutex mu_;
  CondVar plan_cv_;  // plans queued, or stopping
  CondVar done_cv_;  // an op completed
  absl::flat_hash_map<Handle, std::shared_ptr<PendingOp>> ops_
      ABSL_GUARDED_BY(mu_);
  // Names in flight (submitted, not yet completed) -> handle. A key views
  // the name of its op in ops_, which stays there (and keeps its name) until
  // after the entry is erased: at completion, or by Fail.
  absl::flat_hash_map<absl::string_view, Handle> names_ ABSL_GUARDED_BY(mu_);
  // The ops in flight that were announced by a cache bit: by_bit_[bit] is
  // the handle, 0 for none (a plan of hits names them by these bits; bits
  // are below the cache capacity).
  std::vector<Handle> by_bit_ ABSL_GUARDED_BY(mu_);
  std::deque<proto::Plan> plans_ ABSL_GUARDED_BY(mu_);
  Handle next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  // Unnamed ops, per process set; process set registrations.
  absl::flat_hash_map<int32_t, uint64_t> next_noname_ ABSL_GUARDED_BY(mu_);
  uint64_t registrations_ ABSL_GUARDED_BY(mu_) = 0;
  // Registered process sets (0 not included): id -> ranks, ascending.
  std::map<int32_t, std::vector<int>> sets_ ABSL_GUARDED_BY(mu_);
  // Grouped ops: the group's handle -> its members' handles.
  absl::flat_hash_map<Handle, std::vector<Handle>> groups_ ABSL_GUARDED_BY(mu_);
  // The pending join's handle (0: none).
  Handle join_handle_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_seq_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status terminal_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // What waits to be written to the coordinator (outbox.h; see RunPlan).
  Outbox outbox_ ABSL_GUARDED_BY(mu_);
  absl::Time last_submit_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // The plan runner while nobody holds it; null while a thread (the
  // background thread, or a waiting caller) reads the link and runs plans
  // with it (see the header comment).
  std::unique_ptr<PlanRunner> runner_ ABSL_GUARDED_BY(mu_);
  // The runner's, for Fail (CudaExecutor::Abort may be called any time).
  CudaExecutor* const cuda_;
  // The background thread stays off the link until then after a plan it ran
  // (see NextPlanFromLink).
  absl::Time bg_park_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // A caller found the link broken: the background thread gives the verdict.
  bool link_broken_ ABSL_GUARDED_BY(mu_) = false;
  // When the background thread's wait ends (InfinitePast: it is awake).
  absl::Time bg_wakes_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // The background thread waits off a link that has nothing to do
  // (CoordinatorLink::ReadBy; see AwaitLinkTurn).
  bool bg_quiet_ ABSL_GUARDED_BY(mu_) = false;
  CacheMirror cache_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
  // Finished ops for NewOp (reset; at most kPoolSize).
  Mutex pool_mu_;
  std::vector<std::shared_ptr<PendingOp>> pool_ ABSL_GUARDED_BY(pool_mu_);
};

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_RUNTIME_OP_RUNTIME_H_
