// CoordinatorService: the thin gRPC adapter (callback API) around
// CoordinatorCore. One SessionReactor per Session stream turns reads into
// core events and carries out the core's actions (queued writes, Finish);
// Status is a unary callback that copies CoordinatorCore::Status() once the
// caller proved it knows the job secret (coordinator/status_auth.h); a
// refused caller gets UNAUTHENTICATED with auth::kUnauthenticatedRefusal, and
// the cause goes to the log (warn, rate-limited per peer host). In-process
// callers (CoordinatorServer::Status) read the core directly.
//
// Concurrency: gRPC may run reactions of different streams in parallel. Every
// core event and the delivery of its actions happen under one mutex (mu_), so
// that the messages of successive events reach each stream in the order the
// core produced them (a Membership is never overtaken by a Heartbeat of its
// epoch). Delivery only enqueues; no reaction blocks.
// Lock order: CoordinatorService::mu_, then a reactor's own mutex or the
// LinkServer's, then the core's mutex. gRPC calls (StartWrite, StartRead,
// Finish) are made without a reactor's own mutex held, but delivery may make
// them with mu_ held: this relies on gRPC never running a user reactor's
// reactions inline inside those calls (1.51 inlines OnDone only for its
// internal reactors).
//
// The gRPC port (coordinator/grpc_gate.h): once SetGate'd, the service tells
// the gate which connections proved the job secret (a Session's Proof, a
// verified Status call), and names peers by the address the gate saw.
//
// Lifetime: the service must outlive the grpc::Server that hosts it, and
// WaitForNoSessions() should be used after the server shut down so that no
// reactor outlives the service.
#ifndef KOLO_COORDINATOR_SERVICE_H_
#define KOLO_COORDINATOR_SERVICE_H_

#include <functional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "coordinator/core.h"
#include "coordinator/grpc_gate.h"
#include "coordinator/status_auth.h"
#include "coordinator/worker_links.h"
#include "proto/kolo.grpc.pb.h"

namespace kolo::coordinator {

class SessionReactor;

class CoordinatorService final : public proto::Coordinator::CallbackService {
 public:
  explicit CoordinatorService(CoreOptions options);
  ~CoordinatorService() override;

  // gRPC entry points (the callback overloads; the synchronous ones the
  // generated base declares stay unimplemented).
  using proto::Coordinator::CallbackService::Session;
  using proto::Coordinator::CallbackService::Status;
  grpc::ServerBidiReactor<proto::WorkerMessage, proto::CoordinatorMessage>*
  Session(grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* context,
                                   const proto::StatusRequest* request,
                                   proto::StatusReply* reply) override;

  // Heartbeats and silence detection (from the server's tick thread).
  void Tick(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // Ticks when NextWake() is due at `now`, and returns NextWake(): the link
  // thread runs the core's deadlines itself between its messages (it is
  // awake anyway), so that a deadline a message sets costs no other
  // thread a wake-up.
  absl::Time TickIfDue(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the job: JobEnd to every open Session, which is then finished.
  void EndJob(bool failure, absl::string_view reason,
              absl::string_view failed_worker = "") ABSL_LOCKS_EXCLUDED(mu_);

  // A killed coordinator (fault injection) judges nothing more: from now on
  // messages, stream ends and ticks no longer reach the core, so the streams
  // that its death breaks are not booked as losses.
  void Silence() ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until `done(core)` holds (true) or the deadline passes (false).
  // `done` is evaluated under the service mutex after every core event.
  bool WaitFor(const std::function<bool(const CoordinatorCore&)>& done,
               absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until every Session reactor is gone (true) or the deadline passes.
  bool WaitForNoSessions(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  const CoordinatorCore& core() const { return core_; }

  // When Tick is next due for the core's own deadlines (negotiation cycle,
  // stalls); InfiniteFuture when none.
  absl::Time NextWake() ABSL_LOCKS_EXCLUDED(mu_);
  // Called (under the service mutex: it must only signal) whenever an event
  // moved NextWake() earlier, so that the tick thread wakes in time (the
  // hook may skip that when the link thread, which calls TickIfDue after
  // every message, is the caller).
  void SetWakeHook(std::function<void()> hook) ABSL_LOCKS_EXCLUDED(mu_);

  // Negotiation links (coordinator/worker_links.h): once set, Plans to a
  // Session with a bound link go on the link, and a closed Session's link is
  // closed. `links` must outlive the service's use of it (until
  // DetachLinks()); before SetLinks and after DetachLinks the service holds
  // NoWorkerLinks.
  void SetLinks(WorkerLinks& links) ABSL_LOCKS_EXCLUDED(mu_);
  void DetachLinks() ABSL_LOCKS_EXCLUDED(mu_);
  // The gate in front of the gRPC port. REQUIRES: called before the server
  // starts; `gate` outlives every call.
  void SetGate(GrpcGate* gate) { gate_ = gate; }
  // LinkServer's callbacks: bind a link, and a message that came on one.
  absl::StatusOr<SessionId> BindLink(const std::string& worker_id,
                                     uint64_t epoch) ABSL_LOCKS_EXCLUDED(mu_);
  void OnLinkMessage(SessionId id, const proto::WorkerMessage& message)
      ABSL_LOCKS_EXCLUDED(mu_) {
    OnMessage(id, message);
  }

 private:
  friend class SessionReactor;

  // Called by reactors from their reactions (never with their mutex held).
  void OnMessage(SessionId id, const proto::WorkerMessage& message)
      ABSL_LOCKS_EXCLUDED(mu_);
  void OnClosed(SessionId id, absl::string_view cause) ABSL_LOCKS_EXCLUDED(mu_);
  // After a Proof came on Session `id` (whose call reads `grpc_peer`): tells
  // the gate when it proved the secret.
  void NoteProof(SessionId id, const std::string& grpc_peer)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The address a call came from (the gate's, else gRPC's).
  std::string PeerOf(const grpc::CallbackServerContext& context) const {
    return gate_ != nullptr ? gate_->PeerOf(context.peer()) : context.peer();
  }
  // From OnDone: forget the reactor (it deletes itself right after).
  void Unregister(SessionId id) ABSL_LOCKS_EXCLUDED(mu_);

  void Deliver(Actions actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Built from the options before core_ takes them (declared first).
  StatusVerifier status_verifier_;
  CoordinatorCore core_;
  Mutex mu_;
  CondVar changed_;
  SessionId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool silenced_ ABSL_GUARDED_BY(mu_) = false;  // Silence() ran
  absl::flat_hash_map<SessionId, SessionReactor*> reactors_
      ABSL_GUARDED_BY(mu_);
  absl::Time wake_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::function<void()> wake_hook_ ABSL_GUARDED_BY(mu_);
  // Never null: NoWorkerLinks when there are no links.
  WorkerLinks* links_ ABSL_GUARDED_BY(mu_) = &NoWorkerLinks::Get();
  GrpcGate* gate_ = nullptr;  // set before the server starts, then constant
};

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_SERVICE_H_
