// The worker's two lifetimes (docs/design.md "Lifetimes"): what lives for one
// epoch and what lives for the job.
//
// EpochRuntime: one epoch's membership, data plane (the TCP mesh of the
// epoch's members, with shared memory to those on this host), negotiation
// link and negotiated runtime (OpRuntime: its response-cache mirror, fusion
// buffer, process sets and op counters). It is
// built when the epoch forms (BuildEpoch) and retired when it ends: its data
// plane is aborted and its pending ops fail with the membership error; it is
// never reused. A retired epoch is kept (a few) so that handles it gave out
// still answer (with their error).
//
// EpochSlot: which EpochRuntime is current, shared by the worker::Job
// (worker_lib/runtime/job.h) and the Session's observers, which abort the
// current epoch (the coordinator ended it, or the job ended) from a gRPC
// thread. What outlives epochs — the config, the Session, the data listener,
// the worker id, the user's callbacks — belongs to the job.
//
// Thread-safety: EpochSlot's methods may be called from any thread; its
// mutex is taken after the Session's (the observers run under it) and
// before the OpRuntime's, and nothing is called on the Session with it
// held. BuildEpoch blocks (it connects the mesh) and must not run on a gRPC
// thread.
#ifndef KOLO_WORKER_LIB_RUNTIME_EPOCH_RUNTIME_H_
#define KOLO_WORKER_LIB_RUNTIME_EPOCH_RUNTIME_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "allreduce/data_plane.h"
#include "common/mutex.h"
#include "common/unique_fd.h"
#include "kolo/kolo.h"
#include "proto/kolo.pb.h"
#include "worker_lib/config.h"
#include "worker_lib/runtime/job_context.h"
#include "worker_lib/runtime/op_runtime.h"
#include "worker_lib/session/session_client.h"

namespace kolo::worker {

struct EpochRuntime {
  uint64_t number = 0;
  proto::Membership membership;
  // Shared with raw collectives and API calls in flight.
  std::shared_ptr<DataPlane> data;
  std::shared_ptr<OpRuntime> ops;
  Handle first_handle = 1;
};

// What BuildEpoch needs from the job.
struct EpochInputs {
  // The job's (job_context.h); borrowed while the epoch is built.
  const JobContext* job = nullptr;
  std::shared_ptr<SessionClient> client;
  // Rank 0 of the first epoch writes the timeline (KOLO_TIMELINE), and goes
  // on writing it in later epochs: `timeline` is then its file.
  bool first = true;
  std::shared_ptr<Timeline> timeline;
  // Why the previous epoch ended (its membership error), for the timeline.
  std::string cause;
  Handle first_handle = 1;
  std::vector<int32_t> dissolved_sets;
};

// A number that changes whenever an EpochSlot installs an epoch, or the API
// starts or ends a job (BumpOpsGeneration): a thread that remembers which
// OpRuntime was current may use it again while the number is the one it
// read before looking it up (worker_lib/api/api.cc, CurrentOps).
// Thread-safe.
uint64_t OpsGeneration();
void BumpOpsGeneration();

// Connects the data plane and the negotiation link of `view`'s epoch and
// starts its OpRuntime, until `deadline`; kAborted at once when `abort_fd`
// (if >= 0) becomes readable. Plans that come on the Session go to the
// current epoch of `slot` (set them up with EpochSlot::Attach).
absl::StatusOr<std::shared_ptr<EpochRuntime>> BuildEpoch(
    const EpochInputs& in, const SessionClient::EpochView& view,
    absl::Time deadline, int abort_fd);

class EpochSlot {
 public:
  // Routes the Session's plans to the current epoch and lets its terminal
  // error and epoch ends abort the current (or building) epoch.
  static void Attach(const std::shared_ptr<EpochSlot>& slot,
                     SessionClient& client);

  std::shared_ptr<EpochRuntime> current() const ABSL_LOCKS_EXCLUDED(mu_);
  // Makes `epoch` current and retires the previous one, closing its data
  // plane. If the Session ended `epoch` while it was built, it is aborted at
  // once with that error. REQUIRES: the previous epoch's ops were stopped.
  void Install(std::shared_ptr<EpochRuntime> epoch) ABSL_LOCKS_EXCLUDED(mu_);
  // The epoch whose handles include `handle` (the newest that gave out
  // handles at or below it); the current one if none.
  std::shared_ptr<EpochRuntime> ForHandle(Handle handle) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Registers the epoch being built: an end of it signals `abort_fd`'s
  // eventfd. Cleared by Install or EndBuild.
  void BeginBuild(uint64_t epoch, int abort_fd) ABSL_LOCKS_EXCLUDED(mu_);
  void EndBuild() ABSL_LOCKS_EXCLUDED(mu_);
  // The membership error of `epoch` if the Session ended it; OK otherwise.
  absl::Status EndedWith(uint64_t epoch) const ABSL_LOCKS_EXCLUDED(mu_);
  // The process sets of the current and every retired epoch.
  std::vector<int32_t> KnownSets() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The Session ended epoch `epoch` with `why` (or the job ended: epoch 0).
  void Abort(const absl::Status& why, uint64_t epoch) ABSL_LOCKS_EXCLUDED(mu_);

  mutable Mutex mu_;
  std::shared_ptr<EpochRuntime> current_ ABSL_GUARDED_BY(mu_);
  // Retired epochs, oldest first (at most kKeptEpochs).
  std::vector<std::shared_ptr<EpochRuntime>> retired_ ABSL_GUARDED_BY(mu_);
  uint64_t building_ ABSL_GUARDED_BY(mu_) = 0;
  int building_abort_fd_ ABSL_GUARDED_BY(mu_) = -1;
  // The latest epoch the Session ended, and with what.
  uint64_t ended_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status ended_ ABSL_GUARDED_BY(mu_);
  // The job's end (terminal): every later epoch is aborted with it.
  absl::Status terminal_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> dissolved_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_RUNTIME_EPOCH_RUNTIME_H_
