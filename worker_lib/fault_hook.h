// The worker's fault hook: the faults `kolorun --fault` asks a worker to
// fire itself (traffic faults — delay, drop, slow — and process faults
// triggered by an op count), and the records kolorun's recovery report is
// built from (worker_lib's half of issue 19; launcher/fault_driver.h is
// kolorun's).
//
// kolorun arms it through three variables (WorkerConfig): KOLO_FAULT_PLAN
// (the job's worker-fired faults, "ID=SPEC;...": common/fault_spec.h),
// KOLO_FAULT_EVENTS (a file every worker of the job appends JSON lines to)
// and KOLO_FAULT_ORIGIN_MS (kolorun's start, Unix ms: `after=` counts from
// there). A job without faults never arms it.
//
// Cost when not armed: the plan loop reads one relaxed atomic bool per plan
// (Armed(); a predictable branch), nothing else; the other entry points run
// once per epoch or commit. Armed (a run with faults), it stays armed for the
// whole run: it counts completed collectives (at-op, and the work a rollback
// discards) and notes each epoch's first completed collective.
//
// Events (one JSON object a line, one write(2) each, O_APPEND; "t_us" is
// Unix time in microseconds; every line has "worker", "inc" and "pid"):
//   {"ev":"armed"}                    init
//   {"ev":"epoch","epoch","rank","size"}      an epoch formed here
//   {"ev":"first_op","epoch","ops"}   its first completed collective here
//   {"ev":"fired","fault","kind","rank","epoch","op"[,"detail"]}
//   {"ev":"skipped","fault","why"}    it was due but could not fire
//   {"ev":"ended","fault"}            a delay/slow's `for` ran out ("t_us":
//                                     when it ran out; written by the next
//                                     plan, or at once by the fault's sleep)
//   {"ev":"rollback","epoch","commit","ops_discarded"}  State::restore
// A worker-fired fault fires once per job: the first process to claim it
// (an O_EXCL file beside the events file) fires it.
//
// A stop fired here is SIGSTOP to this process; kolorun reads the "fired"
// line and sends SIGCONT after `for`.
//
// Thread-safety: every function may be called from any thread; the hook
// is process-wide state (a signal-style global, so that the hot path is one
// load), guarded by its own mutex. BeforePlan/AfterPlan run on the thread
// that runs plans and may sleep there (delay, slow) — that is the fault.
//
// Invariant: a delay or slow acts only inside its window [fired, fired +
// for): no sleep it causes goes past the window's end (issue 39: a slow
// multiplied the time a collective had spent blocked on a lost peer and
// ran 10 s past a 3 s window).
#ifndef KOLO_WORKER_LIB_FAULT_HOOK_H_
#define KOLO_WORKER_LIB_FAULT_HOOK_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/fault_spec.h"

namespace kolo {
class DataPlane;
}  // namespace kolo

namespace kolo::worker {

class Timeline;

namespace faults {

// The hot path's flag.
inline std::atomic<bool> g_armed{false};
inline bool Armed() { return g_armed.load(std::memory_order_relaxed); }

struct HookConfig {
  std::vector<PlannedFault> plan;  // this job's worker-fired faults
  std::string events_path;         // required to arm
  absl::Time origin = absl::UnixEpoch();
  std::string worker_id;
  uint32_t incarnation = 0;
};

// Arms the hook (kolo::init, from WorkerConfig). A second call replaces
// the plan (a test's second init). Fails when the events file cannot be
// opened (the job then runs without faults: the caller logs it).
absl::Status Arm(const HookConfig& config);
// Disarms it and closes the events file (kolo::shutdown).
void Disarm();

// Where a plan runs.
struct PlanPoint {
  uint64_t epoch = 0;
  int rank = 0;
  int size = 1;
  DataPlane* plane = nullptr;  // the epoch's (drop cuts its connections)
};

// REQUIRES (both): Armed(). Before a plan runs: fires the faults that are
// due, and holds the plan back while a delay is active.
void BeforePlan(const PlanPoint& at);
// After it ran: counts its `completed` collectives (`took` to run); a slow
// fault sleeps (factor - 1) * took, none when `failed` > 0 of its
// collectives failed (the time went to waiting, not work), and never past
// the end of its `for` window.
void AfterPlan(const PlanPoint& at, int completed, int failed,
               absl::Duration took);

// Cheap no-ops unless armed.
void OnEpoch(uint64_t epoch, int rank, int size);
void OnCommit(int64_t commits);
void OnRollback(int64_t commit);
// The timeline faults and recoveries are marked on (rank 0's; null: none).
void SetTimeline(std::weak_ptr<Timeline> timeline);

}  // namespace faults
}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_FAULT_HOOK_H_
