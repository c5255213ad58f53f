#include "coordinator/service.h"

#include <deque>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/auth.h"
#include "common/check.h"
#include "common/log.h"
#include "common/rate_limited_log.h"

namespace kolo::coordinator {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

}  // namespace

// One Session stream. At most one read and one write in flight; outgoing
// messages wait in queue_. The stream is finished once a Finish was requested
// (by the core's Close action, or because the worker's side ended) and the
// queue has drained.
//
// Lifetime: gRPC's callback API requires the reactor to live until OnDone, and
// the server does not own it, so it is heap-allocated in Session() and deletes
// itself in OnDone (the one exception to "no raw new/delete" gRPC forces).
// OnDone first unregisters it from the service under the service mutex, so no
// delivery can reach it afterwards.
class SessionReactor final
    : public grpc::ServerBidiReactor<proto::WorkerMessage,
                                     proto::CoordinatorMessage> {
 public:
  SessionReactor(CoordinatorService* service, SessionId id,
                 std::string grpc_peer)
      : service_(service), id_(id), grpc_peer_(std::move(grpc_peer)) {}

  void Start() { StartRead(&in_); }

  // Called by the service under its mutex.
  void Enqueue(proto::CoordinatorMessage msg) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      if (finish_requested_ || broken_) return;
      queue_.push_back(std::move(msg));
    }
    MaybeWrite();
  }
  void RequestFinish(grpc::Status status) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      if (finish_requested_) return;
      finish_requested_ = true;
      finish_status_ = std::move(status);
    }
    MaybeFinish();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      service_->OnClosed(id_, "its stream ended");
      RequestFinish(grpc::Status::OK);
      return;
    }
    proto::WorkerMessage msg = std::move(in_);
    in_.Clear();
    service_->OnMessage(id_, msg);
    if (msg.has_proof()) service_->NoteProof(id_, grpc_peer_);
    {
      MutexLock lock(&mu_);
      if (finish_requested_) return;
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    {
      MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) {
        broken_ = true;
        queue_.clear();
      }
    }
    MaybeWrite();
    MaybeFinish();
  }

  void OnCancel() override {
    service_->OnClosed(id_, "its stream was cancelled");
    RequestFinish(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    service_->Unregister(id_);
    delete this;  // see the class comment: gRPC requires self-deletion
  }

 private:
  // Starts the next write if none is in flight.
  void MaybeWrite() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      if (writing_ || queue_.empty() || finish_called_) return;
      writing_ = true;
      current_ = std::move(queue_.front());
      queue_.pop_front();
    }
    // current_ is stable until OnWriteDone (only one write in flight).
    StartWrite(&current_);
  }
  // Finishes once requested and drained.
  void MaybeFinish() ABSL_LOCKS_EXCLUDED(mu_) {
    grpc::Status status;
    {
      MutexLock lock(&mu_);
      if (!finish_requested_ || finish_called_ || writing_) return;
      if (!queue_.empty() && !broken_) return;
      finish_called_ = true;
      status = finish_status_;
    }
    Finish(status);
  }

  CoordinatorService* const service_;
  const SessionId id_;
  const std::string grpc_peer_;        // the call's peer, as gRPC names it
  proto::WorkerMessage in_;            // the one read in flight
  proto::CoordinatorMessage current_;  // the one write in flight
  Mutex mu_;
  std::deque<proto::CoordinatorMessage> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
};

CoordinatorService::CoordinatorService(CoreOptions options)
    : status_verifier_(options.job_id, options.secret),
      core_(std::move(options)) {}

CoordinatorService::~CoordinatorService() {
  MutexLock lock(&mu_);
  if (!reactors_.empty()) {
    GetLogger("coordinator")
        ->error(
            "{} Session reactors still alive when the service is "
            "destroyed",
            reactors_.size());
  }
}

grpc::ServerBidiReactor<proto::WorkerMessage, proto::CoordinatorMessage>*
CoordinatorService::Session(grpc::CallbackServerContext* context) {
  SessionReactor* reactor;
  {
    MutexLock lock(&mu_);
    SessionId id = next_id_++;
    // deletes itself in OnDone
    reactor = new SessionReactor(this, id, context->peer());
    reactors_.emplace(id, reactor);
    Deliver(core_.OnOpen(id, PeerOf(*context)));
  }
  reactor->Start();
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::Status(
    grpc::CallbackServerContext* context, const proto::StatusRequest* request,
    proto::StatusReply* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The wall clock, not the core's (tests fake that one for liveness): the
  // request's time is the caller's wall clock.
  if (absl::Status st = status_verifier_.Verify(*request, absl::Now());
      !st.ok()) {
    const std::string peer = PeerOf(*context);
    LogRefusal(
        *GetLogger("coordinator"), peer,
        absl::StrCat("refused a Status call from ", peer, ": ", st.message()));
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                 std::string(auth::kUnauthenticatedRefusal)));
    return reactor;
  }
  if (gate_ != nullptr) gate_->Proven(context->peer());
  *reply = core_.Status();
  if (request->metrics()) reply->set_metrics(core_.Metrics());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

void CoordinatorService::Deliver(Actions actions) {
  for (Actions::Send& send : actions.sends) {
    // The hot path: a Plan goes on the Session's negotiation link if it has
    // one (the worker bound it before announcing anything, so all its plans
    // take the same way).
    if (send.message.has_plan() && links_->Send(send.session, send.message)) {
      continue;
    }
    auto it = reactors_.find(send.session);
    if (it != reactors_.end()) it->second->Enqueue(std::move(send.message));
  }
  for (SessionId id : actions.unbind_links) {
    links_->Unbind(id);
  }
  for (const Actions::Close& close : actions.closes) {
    links_->Unbind(close.session);
    auto it = reactors_.find(close.session);
    if (it != reactors_.end()) it->second->RequestFinish(ToGrpc(close.status));
  }
  if (actions.wake_at < wake_at_) {
    wake_at_ = actions.wake_at;
    if (wake_hook_) wake_hook_();
  }
  changed_.SignalAll();
}

absl::Time CoordinatorService::NextWake() {
  MutexLock lock(&mu_);
  return wake_at_;
}

void CoordinatorService::SetWakeHook(std::function<void()> hook) {
  MutexLock lock(&mu_);
  wake_hook_ = std::move(hook);
}

void CoordinatorService::SetLinks(WorkerLinks& links) {
  MutexLock lock(&mu_);
  links_ = &links;
}

void CoordinatorService::DetachLinks() {
  MutexLock lock(&mu_);
  links_ = &NoWorkerLinks::Get();
}

absl::StatusOr<SessionId> CoordinatorService::BindLink(
    const std::string& worker_id, uint64_t epoch) {
  MutexLock lock(&mu_);
  return core_.MemberSession(worker_id, epoch);
}

void CoordinatorService::OnMessage(SessionId id,
                                   const proto::WorkerMessage& message) {
  MutexLock lock(&mu_);
  if (silenced_) return;
  Deliver(core_.OnMessage(id, message));
}

void CoordinatorService::OnClosed(SessionId id, absl::string_view cause) {
  MutexLock lock(&mu_);
  if (silenced_) return;
  Deliver(core_.OnClosed(id, cause));
}

void CoordinatorService::Silence() {
  MutexLock lock(&mu_);
  silenced_ = true;
}

void CoordinatorService::NoteProof(SessionId id, const std::string& grpc_peer) {
  if (gate_ != nullptr && core_.IsProven(id)) gate_->Proven(grpc_peer);
}

void CoordinatorService::Unregister(SessionId id) {
  MutexLock lock(&mu_);
  reactors_.erase(id);
  if (silenced_) {
    changed_.SignalAll();  // WaitForNoSessions
    return;
  }
  Deliver(core_.OnClosed(id, "its stream ended"));
}

void CoordinatorService::Tick(absl::Time now) {
  MutexLock lock(&mu_);
  wake_at_ = absl::InfiniteFuture();  // OnTick reports the next deadline
  if (silenced_) return;
  Deliver(core_.OnTick(now));
}

absl::Time CoordinatorService::TickIfDue(absl::Time now) {
  MutexLock lock(&mu_);
  if (now >= wake_at_) {
    wake_at_ = absl::InfiniteFuture();
    Deliver(core_.OnTick(now));
  }
  return wake_at_;
}

void CoordinatorService::EndJob(bool failure, absl::string_view reason,
                                absl::string_view failed_worker) {
  MutexLock lock(&mu_);
  Deliver(core_.Shutdown(failure, reason, failed_worker));
}

bool CoordinatorService::WaitFor(
    const std::function<bool(const CoordinatorCore&)>& done,
    absl::Time deadline) {
  MutexLock lock(&mu_);
  while (!done(core_)) {
    if (changed_.WaitWithDeadline(&mu_, deadline)) return done(core_);
  }
  return true;
}

bool CoordinatorService::WaitForNoSessions(absl::Time deadline) {
  MutexLock lock(&mu_);
  while (!reactors_.empty()) {
    if (changed_.WaitWithDeadline(&mu_, deadline)) return reactors_.empty();
  }
  return true;
}

}  // namespace kolo::coordinator
