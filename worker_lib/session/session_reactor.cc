#include "worker_lib/session/session_reactor.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/tls_grpc.h"
#include "proto/membership_error.h"
#include "proto/refusal.h"

namespace kolo::worker {
namespace {

// How long a worker that distrusts the coordinator waits for its refusal.
constexpr absl::Duration kDistrustGrace = absl::Seconds(2);

}  // namespace

std::shared_ptr<spdlog::logger> SessionLog() {
  // Never destroyed: used by threads that may run while the process exits.
  static const auto* const logger =
      new std::shared_ptr<spdlog::logger>(GetLogger("session"));
  return *logger;
}

std::string Secs(absl::Duration d) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d));
}

void SessionClient::Reactor::Start() {
  grpc::ChannelArguments args;
  // Workers may start before the coordinator: retry the connection quickly
  // (gRPC's default backoff grows to 2 minutes).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);  // the coordinator is direct
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection each
  // The coordinator's messages (an exchange's values from every rank, a
  // plan) may pass gRPC's 4 MiB default; they come from the authenticated
  // coordinator, after the handshake.
  args.SetMaxReceiveMessageSize(kMaxCoordinatorMessageBytes);
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      tls::ChannelCredentialsFor(options_.tls.get(), args);
  channel_ = grpc::CreateCustomChannel(options_.coordinator, credentials, args);
  stub_ = proto::Coordinator::NewStub(channel_);
  // The stream lives as long as the job, so it has no gRPC deadline; the
  // start deadline is enforced by WaitForMembership, which cancels.
  context_.set_wait_for_ready(true);
  stub_->async()->Session(&context_, this);

  proto::WorkerMessage hello_msg;
  proto::Hello* h = hello_msg.mutable_hello();
  h->set_protocol_version(options_.protocol_version);
  h->set_feature_bits(options_.feature_bits);
  h->set_job_id(options_.job_id);
  h->set_worker_id(options_.worker_id);
  h->set_worker_incarnation(options_.worker_incarnation);
  h->set_host_name(options_.host_name);
  h->set_data_address(options_.data_address);
  h->set_requested_rank(options_.requested_rank);
  h->set_expected_size(options_.expected_size);
  h->set_reconnecting(options_.reconnecting);
  h->set_client_nonce(handshake_.client_nonce());
  h->set_pid(::getpid());
  {
    MutexLock lock(&mu_);
    last_heard_ = absl::Now();
    Enqueue(std::move(hello_msg));
  }
  AddHold();  // released by ReleaseHold(); see the header
  StartRead(&read_msg_);
  StartCall();
  MaybeStartWrite(/*from_reaction=*/false);
  thread_ = std::thread([this] { ThreadMain(); });
}

void SessionClient::Reactor::Enqueue(proto::WorkerMessage msg) {
  if (!stream_.accepts_messages()) return;
  proto::Fence* f = msg.mutable_fence();
  f->set_incarnation(incarnation_.value_or(0));
  f->set_epoch(epoch_.number);
  queue_.push_back(std::move(msg));
}

void SessionClient::Reactor::MaybeStartWrite(bool from_reaction) {
  MutexLock lock(&mu_);
  using Writes = SessionStream::Writes;
  if (stream_.done() ||
      (stream_.call != SessionStream::Call::kHeld && !from_reaction)) {
    return;
  }
  if (stream_.write_in_flight || stream_.writes == Writes::kBroken ||
      stream_.writes == Writes::kCloseStarted) {
    return;
  }
  if (!queue_.empty()) {
    // A deque keeps references valid across push_back; the front is only
    // popped by OnWriteDone, after this write completed.
    stream_.write_in_flight = true;
    StartWrite(&queue_.front());
  } else if (stream_.writes == Writes::kCloseRequested) {
    stream_.writes = Writes::kCloseStarted;
    StartWritesDone();
  }
}

void SessionClient::Reactor::ReleaseHold() {
  {
    MutexLock lock(&mu_);
    if (stream_.call != SessionStream::Call::kHeld) return;
    stream_.call = SessionStream::Call::kReleased;
  }
  RemoveHold();
}

void SessionClient::Reactor::OnWriteDone(bool ok) {
  {
    MutexLock lock(&mu_);
    stream_.write_in_flight = false;
    if (ok) {
      queue_.pop_front();
    } else {
      stream_.writes = SessionStream::Writes::kBroken;  // OnDone follows
      queue_.clear();
    }
  }
  if (ok) MaybeStartWrite(/*from_reaction=*/true);
}

void SessionClient::Reactor::OnWritesDoneDone(bool /*ok*/) {}

void SessionClient::Reactor::OnReadDone(bool ok) {
  if (!ok) {
    // The coordinator ended the stream or the connection broke: start
    // nothing more, so that OnDone can follow with the status.
    ReleaseHold();
    return;
  }
  {
    MutexLock lock(&mu_);
    Handle(read_msg_);
  }
  MaybeStartWrite(/*from_reaction=*/true);
  StartRead(&read_msg_);
}

void SessionClient::Reactor::OnDone(const grpc::Status& status) {
  MutexLock lock(&mu_);
  if (!distrust_.ok()) Fail(distrust_, SessionVerdict::Cause::kOther);
  if (!leaving() && phase_ != Phase::kClosing) {
    Fail(absl::UnavailableError(absl::StrCat(
             "lost ", Who(), " (stream closed: ", status.error_message(),
             ", gRPC code ", static_cast<int>(status.error_code()), ")")),
         SessionVerdict::Cause::kLostCoordinator);
  }
  stream_.call = SessionStream::Call::kDone;
  cv_.SignalAll();
}

void SessionClient::Reactor::Fail(absl::Status status,
                                  SessionVerdict::Cause cause) {
  if (!verdict_.Give(std::move(status), cause)) return;
  cv_.SignalAll();
  if (on_terminal_) on_terminal_(verdict_.status);
}

void SessionClient::Reactor::OnTerminal(
    std::function<void(const absl::Status&)> observer) {
  MutexLock lock(&mu_);
  on_terminal_ = std::move(observer);
  if (verdict_.given() && on_terminal_) on_terminal_(verdict_.status);
}

absl::Status SessionClient::Reactor::WaitForVerdict(absl::Time deadline) {
  MutexLock lock(&mu_);
  const uint64_t reported_in = epoch_.number;
  while (!verdict_.given() && !epoch_.ended() && epoch_.number == reported_in) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
  if (verdict_.given()) return verdict_.status;
  if (epoch_.ended()) return epoch_.error;
  // The epoch ended and the next formed before this thread woke up.
  if (epoch_.number != reported_in) return epoch_.last_error;
  return absl::OkStatus();
}

void SessionClient::Reactor::OnEpochEnd(
    std::function<void(const absl::Status&, uint64_t)> observer) {
  MutexLock lock(&mu_);
  on_epoch_end_ = std::move(observer);
}

absl::StatusOr<SessionClient::EpochView>
SessionClient::Reactor::WaitForEpochAfter(uint64_t epoch, absl::Time deadline) {
  MutexLock lock(&mu_);
  while (!verdict_.given() && (epoch_.number <= epoch || epoch_.ended())) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
  if (verdict_.given()) return verdict_.status;
  if (epoch_.number > epoch && !epoch_.ended()) {
    return EpochView{*epoch_.membership, epoch_.number};
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "worker ", options_.worker_id, ": no membership of an epoch after ",
      epoch, " from ", Who(),
      " in time (the survivors did not regroup; check the coordinator's log)"));
}

SessionClient::EpochView SessionClient::Reactor::Current() const {
  MutexLock lock(&mu_);
  return EpochView{epoch_.membership.value_or(proto::Membership{}),
                   epoch_.number};
}

void SessionClient::Reactor::OnPlan(
    std::function<void(const proto::Plan&)> sink) {
  MutexLock lock(&mu_);
  plan_sink_ = std::move(sink);
}

absl::Status SessionClient::Reactor::SendMessage(proto::WorkerMessage msg) {
  {
    MutexLock lock(&mu_);
    if (verdict_.given()) return verdict_.status;
    if (phase_ != Phase::kMember) {
      return absl::FailedPreconditionError(absl::StrCat(
          "worker ", options_.worker_id,
          ": the session is not running (submit collectives after init() and "
          "before shutdown())"));
    }
    if (epoch_.ended()) return epoch_.error;
    Enqueue(std::move(msg));
  }
  MaybeStartWrite(/*from_reaction=*/false);
  return absl::OkStatus();
}

void SessionClient::Reactor::Handle(const proto::CoordinatorMessage& msg) {
  if (msg.has_refusal()) return HandleRefusal(msg.refusal());
  if (!distrust_.ok()) return;  // an impostor's words
  if (msg.has_challenge()) return HandleChallenge(msg);
  if (Fenced(msg)) return;
  last_heard_ = absl::Now();  // only a message of our coordinator renews
  switch (msg.body_case()) {
    case proto::CoordinatorMessage::kMembership:
      return HandleMembership(msg);
    case proto::CoordinatorMessage::kEpochAborted:
      return HandleEpochAborted(msg.epoch_aborted());
    case proto::CoordinatorMessage::kEvicted:
      return HandleEvicted(msg.evicted());
    case proto::CoordinatorMessage::kHeartbeat:
      return;  // last_heard_ is updated
    case proto::CoordinatorMessage::kExchangeResult:
      return HandleExchangeResult(msg.exchange_result());
    case proto::CoordinatorMessage::kPlan:
      return HandlePlan(msg.plan());
    case proto::CoordinatorMessage::kLeaveAck:
      if (phase_ == Phase::kLeaving) phase_ = Phase::kLeft;
      cv_.SignalAll();
      return;
    case proto::CoordinatorMessage::kJobEnd:
      return HandleJobEnd(msg.job_end());
    default:
      SessionLog()->warn("{} sent an unexpected message (body {}); ignored",
                         Who(), static_cast<int>(msg.body_case()));
  }
}

void SessionClient::Reactor::HandleRefusal(const proto::Refusal& refusal) {
  SessionLog()->error("{}", refusal.message());
  absl::Status refused = proto::RefusalStatus(
      refusal.reason(),
      absl::StrCat(Who(), " refused worker ", options_.worker_id, ": ",
                   refusal.message()));
  if (!distrust_.ok()) {
    // An unauthenticated worker is told nothing precise; what it found
    // itself (the coordinator could not prove the secret) says why.
    refused = absl::Status(refused.code(), absl::StrCat(refused.message(), "; ",
                                                        distrust_.message()));
  }
  Fail(refused, SessionVerdict::Cause::kOther);
}

void SessionClient::Reactor::HandleChallenge(
    const proto::CoordinatorMessage& msg) {
  if (incarnation_.has_value()) {
    SessionLog()->warn("{} sent a second Challenge; ignored", Who());
    return;
  }
  incarnation_ = msg.fence().incarnation();
  last_heard_ = absl::Now();
  auto mac = handshake_.Answer(msg.challenge().server_nonce(),
                               msg.challenge().server_proof());
  if (!mac.ok()) {
    // The secrets differ. Never answer a coordinator that cannot prove the
    // secret; send an empty proof instead, which it refuses (and logs), and
    // report its refusal — or this, if it does not refuse in time.
    distrust_ = absl::UnauthenticatedError(absl::StrCat(
        Who(), " could not prove that it knows the secret of job '",
        options_.job_id, "' that worker ", options_.worker_id, " has (",
        mac.status().message(),
        "): authentication failed; give the coordinator and every worker "
        "the same secret (KOLO_SECRET_FILE)"));
    distrust_deadline_ = absl::Now() + kDistrustGrace;
    proto::WorkerMessage empty;
    empty.mutable_proof();
    Enqueue(std::move(empty));
    cv_.SignalAll();
    return;
  }
  proto::WorkerMessage proof;
  proof.mutable_proof()->set_mac(*mac);
  Enqueue(std::move(proof));
  phase_ = Phase::kAwaitMembership;
  cv_.SignalAll();  // the kolo thread starts heartbeats
}

bool SessionClient::Reactor::Fenced(
    const proto::CoordinatorMessage& msg) const {
  // This incarnation, and this epoch (a Membership opens a later one).
  const proto::Fence& f = msg.fence();
  const bool new_epoch = msg.has_membership() && f.epoch() > epoch_.number;
  if (incarnation_ == f.incarnation() &&
      (f.epoch() == epoch_.number || new_epoch)) {
    return false;
  }
  if (incarnation_ == f.incarnation() && leaving() &&
      f.epoch() > epoch_.number) {
    // The job went on to an epoch this worker leaves without joining: its
    // LeaveAck counts; the rest is no longer this worker's business.
    if (msg.has_leave_ack()) return false;
    SessionLog()->debug("leaving: dropped a message of epoch {}", f.epoch());
    return true;
  }
  SessionLog()->warn(
      "dropped a message from {} fenced (incarnation {:016x}, epoch {}); "
      "worker {} is at incarnation {:016x}, epoch {}",
      Who(), f.incarnation(), f.epoch(), options_.worker_id,
      incarnation_.value_or(0), epoch_.number);
  return true;
}

void SessionClient::Reactor::HandleMembership(
    const proto::CoordinatorMessage& msg) {
  const proto::Fence& f = msg.fence();
  // Elastic jobs: after EpochAborted the next Membership is awaited.
  const bool awaiting = phase_ == Phase::kAwaitMembership ||
                        (phase_ == Phase::kMember && epoch_.ended());
  if (leaving()) {
    SessionLog()->debug("leaving: the Membership of epoch {} is ignored",
                        f.epoch());
    return;
  }
  if (!awaiting || f.epoch() <= epoch_.number) {
    SessionLog()->warn("{} sent an unexpected Membership (epoch {}); ignored",
                       Who(), f.epoch());
    return;
  }
  if (phase_ == Phase::kMember) {
    SessionLog()->warn(
        "worker {}: epoch {} formed: rank {} of {} (was rank {} of {})",
        options_.worker_id, f.epoch(), msg.membership().rank(),
        msg.membership().size(), epoch_.membership->rank(),
        epoch_.membership->size());
  }
  epoch_.number = f.epoch();
  epoch_.membership = msg.membership();
  epoch_.error = absl::OkStatus();
  phase_ = Phase::kMember;
  cv_.SignalAll();
}

void SessionClient::Reactor::HandleEpochAborted(
    const proto::EpochAborted& aborted) {
  if (phase_ != Phase::kMember || epoch_.ended() ||
      aborted.epoch() != epoch_.number) {
    SessionLog()->warn("{} ended epoch {} at epoch {}; ignored", Who(),
                       aborted.epoch(), epoch_.number);
    return;
  }
  SessionLog()->warn("worker {}: {}", options_.worker_id, aborted.reason());
  epoch_.error = proto::MembershipError(aborted);
  epoch_.last_error = epoch_.error;
  // Pending exchanges, Announces and Dones of the epoch fail with it; the
  // API aborts the epoch's data plane and ops.
  if (on_epoch_end_) on_epoch_end_(epoch_.error, epoch_.number);
  proto::WorkerMessage ack;
  ack.mutable_epoch_ack()->set_epoch(epoch_.number);
  Enqueue(std::move(ack));
  cv_.SignalAll();
}

void SessionClient::Reactor::HandleEvicted(const proto::Evicted& evicted) {
  proto::LostWorker self;
  self.set_worker_id(options_.worker_id);
  self.set_rank(epoch_.membership.has_value() ? epoch_.membership->rank() : -1);
  self.set_host_name(options_.host_name);
  self.set_cause("evicted");
  SessionLog()->error("worker {}: {}", options_.worker_id, evicted.reason());
  Fail(proto::EvictedError(evicted, self), SessionVerdict::Cause::kEvicted);
}

void SessionClient::Reactor::HandleExchangeResult(
    const proto::ExchangeResult& result) {
  auto it = exchanges_.find(result.key());
  if (it == exchanges_.end()) return;  // timed out meanwhile
  it->second.emplace(result.values().begin(), result.values().end());
  cv_.SignalAll();
}

void SessionClient::Reactor::HandlePlan(const proto::Plan& plan) {
  if (plan_sink_) {
    plan_sink_(plan);
    return;
  }
  SessionLog()->warn("{} sent plan {} before the runtime was ready; dropped",
                     Who(), plan.seq());
}

void SessionClient::Reactor::HandleJobEnd(const proto::JobEnd& end) {
  if (end.failure()) {
    SessionLog()->error("the job ended in failure: {}", end.reason());
  } else if (!leaving()) {
    SessionLog()->warn("{} ended the job before worker {} left: {}", Who(),
                       options_.worker_id, end.reason());
  }
  Fail(absl::AbortedError(absl::StrCat(
           end.failure() ? "the job ended in failure: " : "the job ended: ",
           end.reason())),
       !end.failure() && !epoch_.membership.has_value()
           ? SessionVerdict::Cause::kEndedBeforeAdmission
           : SessionVerdict::Cause::kOther);
}

void SessionClient::Reactor::ThreadMain() {
  absl::Time next_heartbeat = absl::Now();
  bool loss_reported = false;
  mu_.Lock();
  while (!stop_thread_) {
    const absl::Time now = absl::Now();
    // Heartbeats and the lease run from the Proof (the coordinator then
    // heartbeats and watches this worker too) until Leave.
    const bool live =
        phase_ == Phase::kAwaitMembership || phase_ == Phase::kMember;
    if (live && !verdict_.given() && now - last_heard_ > options_.lease) {
      Fail(absl::UnavailableError(absl::StrCat(
               "lost ", Who(), " (no message for ", Secs(now - last_heard_),
               "; KOLO_LEASE_SECONDS is ", Secs(options_.lease), ")")),
           SessionVerdict::Cause::kLostCoordinator);
      mu_.Unlock();
      context_.TryCancel();
      mu_.Lock();
      continue;
    }
    if (!distrust_.ok() && !verdict_.given() && now >= distrust_deadline_) {
      Fail(distrust_, SessionVerdict::Cause::kOther);
      mu_.Unlock();
      context_.TryCancel();
      mu_.Lock();
      continue;
    }
    if (verdict_.cause == SessionVerdict::Cause::kEvicted && !loss_reported) {
      loss_reported = true;
      if (options_.exit_on_lost_coordinator && options_.exit_on_evicted) {
        // Out of the job: let pending calls return and report, then go.
        mu_.Unlock();
        absl::SleepFor(options_.exit_grace);
        FlushLogs();
        std::fflush(nullptr);
        std::_Exit(kEvictedExitCode);
      }
      continue;
    }
    if (verdict_.cause == SessionVerdict::Cause::kLostCoordinator &&
        !loss_reported) {
      loss_reported = true;
      SessionLog()->error("worker {}: {}", options_.worker_id,
                          std::string(verdict_.status.message()));
      if (options_.exit_on_lost_coordinator && phase_ == Phase::kMember &&
          options_.reconnect_window > absl::ZeroDuration()) {
        // It may come back: a new Session closes this one (stop_thread_)
        // before the window ends, else the worker goes as below.
        const absl::Time until =
            now + options_.reconnect_window + kReconnectGrace;
        while (!stop_thread_ && absl::Now() < until) {
          cv_.WaitWithDeadline(&mu_, until);
        }
        if (stop_thread_) break;
        SessionLog()->error(
            "worker {} exits with status {}: {} did not come back within {} "
            "(KOLO_LEASE_SECONDS {}, and {} more)",
            options_.worker_id, kLostCoordinatorExitCode, Who(),
            Secs(options_.reconnect_window + kReconnectGrace),
            Secs(options_.reconnect_window), Secs(kReconnectGrace));
        FlushLogs();
        std::fflush(nullptr);
        std::_Exit(kLostCoordinatorExitCode);
      }
      if (options_.exit_on_lost_coordinator && phase_ == Phase::kMember) {
        // Let pending calls return and report first; then go: a worker
        // without a coordinator must not linger (docs/design.md
        // "Invariants": nothing is orphaned).
        mu_.Unlock();
        absl::SleepFor(options_.exit_grace);
        mu_.Lock();
        if (phase_ == Phase::kMember) {
          SessionLog()->error("worker {} exits with status {}: it lost {}",
                              options_.worker_id, kLostCoordinatorExitCode,
                              Who());
          FlushLogs();
          std::fflush(nullptr);
          std::_Exit(kLostCoordinatorExitCode);
        }
      }
      continue;
    }
    absl::Time wake = now + absl::Seconds(1);  // woken by any change anyway
    if (!distrust_.ok() && !verdict_.given()) {
      wake = std::min(wake, distrust_deadline_);
    }
    if (live && !verdict_.given()) {
      if (now >= next_heartbeat) {
        next_heartbeat = now + options_.heartbeat_interval;
        proto::WorkerMessage hb;
        hb.mutable_heartbeat()->set_seq(++heartbeat_seq_);
        Enqueue(std::move(hb));
        mu_.Unlock();
        MaybeStartWrite(/*from_reaction=*/false);
        mu_.Lock();
        continue;
      }
      wake = std::min(next_heartbeat,
                      last_heard_ + options_.lease + absl::Milliseconds(1));
    }
    cv_.WaitWithDeadline(&mu_, wake);
  }
  mu_.Unlock();
}

}  // namespace kolo::worker
