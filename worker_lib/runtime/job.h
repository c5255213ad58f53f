// worker::Job: a job this process has joined, and what lives as long as it
// does (docs/design.md "Lifetimes"): the config, the data listener, the
// coordinator's address as dialled (the three as the epochs see them: its
// JobContext, job_context.h), the coordinator this worker hosts (rank 0
// without kolorun; worker_lib/runtime/hosted_coordinator.h), and this
// worker's attachment to the job — its Session and the slot of its epochs
// (worker_lib/runtime/epoch_runtime.h), which an elastic worker's rejoin
// replaces. What lives for one epoch is in the slot.
//
// The process's current Job, its published topology and the leave flag that
// SIGTERM sets are process-wide, in api/api.cc.
//
// Thread-safety: config(), data_address() and the hosted coordinator are
// immutable after Start. The attachment is read by attachment() and replaced
// by Adopt; the owner serializes the two (api.cc holds its lock around
// each). Start, Rejoin, AwaitNextEpoch and AwaitVerdict block and must not
// run on a gRPC thread; Rejoin and AwaitNextEpoch read only what is immutable
// and the attachment they are given, so the owner's lock is not held across
// them.
// Invariants: the attachment's epoch slot always has a current epoch (from
// Start on); Stop is called once, last. Callers of the blocking methods hold
// the Job (a shared_ptr), whose config they borrow.
#ifndef KOLO_WORKER_LIB_RUNTIME_JOB_H_
#define KOLO_WORKER_LIB_RUNTIME_JOB_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/kolo.pb.h"
#include "worker_lib/config.h"
#include "worker_lib/runtime/data_listener.h"
#include "worker_lib/runtime/epoch_runtime.h"
#include "worker_lib/runtime/hosted_coordinator.h"
#include "worker_lib/runtime/job_context.h"
#include "worker_lib/session/session_client.h"

namespace kolo::worker {

class Job {
 public:
  // This worker's place in the job: its Session and its epochs. Shared with
  // calls in flight (control_allgather, an epoch change).
  struct Attachment {
    std::shared_ptr<SessionClient> client;
    std::shared_ptr<EpochSlot> epochs;
  };

  // Opens the data listener, hosts the coordinator if the config says so,
  // connects the Session and builds the first epoch: the job as init()
  // returns it. On failure nothing is left running (the hosted coordinator
  // ends the job with the reason). `asked_to_leave` (may be empty) is polled
  // while the worker waits to be admitted: true gives up the wait (SIGTERM
  // before admission: SessionOptions::give_up).
  static absl::StatusOr<std::unique_ptr<Job>> Start(
      WorkerConfig config, std::function<bool()> asked_to_leave = nullptr);

  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  ~Job() = default;

  const WorkerConfig& config() const { return config_; }
  // The data plane's address ("ip:port") as advertised to the coordinator.
  const std::string& data_address() const { return listener_->address(); }
  // The current attachment; the caller serializes it with Adopt.
  const Attachment& attachment() const { return attachment_; }
  // The membership of the attachment's current epoch.
  proto::Membership membership() const;

  // Elastic jobs, after this worker was evicted or lost a standalone
  // coordinator (the Session of `old` is over): stops old's epoch and joins
  // the job again as a newcomer with a new Session (to the restarted
  // coordinator: until `deadline` it keeps dialling), waiting until
  // `deadline` to be admitted; then shuts old's Session down. The new
  // attachment has its first epoch installed; Adopt makes it the job's.
  absl::StatusOr<Attachment> Rejoin(const Attachment& old,
                                    absl::Time deadline) const;
  // Makes `a` (from Rejoin) the job's attachment.
  void Adopt(Attachment a) { attachment_ = std::move(a); }

  // Elastic jobs: when the current epoch of `a` has ended, waits (until
  // `deadline`) for the next one, stops the ended epoch's runtime and builds
  // and installs the new one, which it returns (to publish its membership);
  // nullptr when the current epoch is alive. An epoch that ends while it forms
  // is skipped for the one after. The Session's terminal error when the job
  // ends first.
  absl::StatusOr<std::shared_ptr<EpochRuntime>> AwaitNextEpoch(
      const Attachment& a, absl::Time deadline) const;

  // The Session's terminal error, waiting for it at most the lease: OK when
  // the Session of `a` is still healthy then.
  absl::Status AwaitVerdict(const Attachment& a) const;
  // Whether a lost coordinator may come back (SessionOptions::
  // reconnect_window): an elastic job's standalone coordinator.
  bool MayOutliveCoordinator() const;

  // Leaves the job: stops the current epoch's runtime, closes the data
  // connections, shuts the Session down; on the hosting rank, waits
  // (bounded) for the others to leave, then stops the coordinator.
  absl::Status Stop();

 private:
  explicit Job(WorkerConfig config) : config_(std::move(config)) {}

  // The first epoch's inputs, or a later one's (first == false).
  EpochInputs InputsFor(std::shared_ptr<SessionClient> client) const;
  // Starts the coordinator when hosting; the address to dial.
  absl::StatusOr<std::string> HostIfAsked();
  // Connects a Session to the job at context_.coordinator.
  // `reconnecting`: after losing the coordinator (Hello.reconnecting).
  absl::StatusOr<std::shared_ptr<SessionClient>> Connect(
      absl::Time deadline, bool reconnecting = false) const;
  // Connects the first Session and builds the first epoch.
  absl::Status Join(absl::Time deadline);

  const WorkerConfig config_;
  std::function<bool()> asked_to_leave_;       // see Start
  std::unique_ptr<HostedCoordinator> hosted_;  // if hosting
  // Shared with an epoch change in flight.
  std::shared_ptr<DataListener> listener_;
  // What the epochs take from the job (the config, listener_'s acceptor,
  // the coordinator's address as dialled); set by Start.
  JobContext context_;
  Attachment attachment_;
};

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_RUNTIME_JOB_H_
