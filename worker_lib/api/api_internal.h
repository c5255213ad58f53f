// The seam between api.cc (init/shutdown, the process's one job) and the
// negotiated API (api_async.cc) and the elastic API (elastic/): how they
// find the current epoch's OpRuntime, and how an elastic retry moves the
// job to the next epoch. Internal to kolo.
//
// Thread-safety: CurrentOps may be called from any thread; the returned
// OpRuntime stays valid while held (after shutdown it fails every call).
#ifndef KOLO_WORKER_LIB_API_API_INTERNAL_H_
#define KOLO_WORKER_LIB_API_API_INTERNAL_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker_lib/runtime/op_runtime.h"

namespace kolo::internal {

// The current job's OpRuntime, or kFailedPrecondition naming `op` when kolo
// is not initialised.
absl::StatusOr<std::shared_ptr<worker::OpRuntime>> CurrentOps(
    absl::string_view op);
// The OpRuntime of the epoch that gave out `handle` (a retired epoch's
// answers with its ops' errors); the current one for an unknown handle.
absl::StatusOr<std::shared_ptr<worker::OpRuntime>> OpsForHandle(
    absl::string_view op, Handle handle);

// Elastic jobs: when the current epoch has ended, waits for the next one
// (at most `timeout`), stops the ended epoch's runtime and builds the new
// epoch's data plane, link and runtime, and publishes the new rank and
// size. OK at once when the current epoch is alive. An epoch that ends
// while it forms is skipped for the one after. The Session's terminal
// error when the job ends first.
absl::Status AwaitNextEpoch(absl::Duration timeout);

// Elastic jobs: after this worker was evicted or lost a standalone
// coordinator (its Session is over), stops
// its epoch and joins the job again as a newcomer with a new Session,
// waiting (at most `timeout`) to be admitted; then publishes the new rank
// and size. kFailedPrecondition outside elastic jobs.
absl::Status Rejoin(absl::Duration timeout);

// The Session's terminal error, waiting for it at most the lease
// (KOLO_LEASE_SECONDS): after this worker's link to the coordinator broke
// (kUnavailable from an op), the coordinator's verdict may still be on its
// way — a partition that healed delivers the eviction after the broken
// negotiation link. OK when the Session is still healthy at the lease;
// kFailedPrecondition when kolo is not initialised.
absl::Status AwaitSessionVerdict();

// Elastic jobs: submits the membership check (State::commit,
// check_host_updates; proto MEMBERSHIP_CHECK), leaving the job there if
// `leave`.
absl::StatusOr<Handle> MembershipCheckAsync(bool leave);
// The next submission on this thread (its op, or its group, whose first
// member carries it) is the call at `slot` of ordered stream `stream` (proto
// Request.order_stream: torch.distributed's backend, python/c10d/, says
// which process group call each op is). That submission consumes it, whether
// it succeeds or not; an empty stream clears it.
void OrderNextSubmission(absl::string_view stream, uint32_t slot);
// While one lives, this thread's waits are slices of a longer wait that the
// caller repeats until the op finishes: on the fast path they run its
// rounds themselves and may end a little after their deadline (see
// worker::ThreadWaitsSliced). Scopes nest.
class SlicedWaits {
 public:
  SlicedWaits();
  ~SlicedWaits();
  SlicedWaits(const SlicedWaits&) = delete;
  SlicedWaits& operator=(const SlicedWaits&) = delete;

 private:
  const bool outer_;
};
// The caller refused its call `name` at `slot` of ordered stream `stream`
// (process set `set`) because `why` (its own checks, or this library's
// refusal of the submission): submits the void (proto Request.order_void),
// an op named "<name> (void)" in that slot, which fails on every rank once
// every member called there (at once when the others came first), failing
// their calls there with `why` and this rank. Its handle ends then (with
// that error): the caller synchronizes it, and the slot's next call waits
// for it as for any call of the slot.
absl::StatusOr<Handle> VoidOrderedCall(absl::string_view stream, uint32_t slot,
                                       ProcessSet set, absl::string_view name,
                                       absl::string_view why);
// Whether this job is elastic (KOLO_ELASTIC); false when kolo is not
// initialised.
bool IsElasticJob();
// How long this worker waits for a lost coordinator to come back (a
// standalone coordinator of an elastic job, restarted at its address: the
// lease, and past the lost Session's end, which exits the process with
// status 75 first when it does not come back); zero when a lost coordinator
// ends the worker (kolorun's, rank 0's, a static job's) or kolo is not
// initialised.
absl::Duration CoordinatorReconnectWindow();
// Whether this worker was asked to leave at its next membership check
// (SIGTERM in an elastic job, or kolo::elastic::request_leave()).
bool LeaveRequested();
void RequestLeave();

}  // namespace kolo::internal

#endif  // KOLO_WORKER_LIB_API_API_INTERNAL_H_
