#include "worker_lib/session/session_reactor.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
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
  channel_ = grpc::CreateCustomChannel(
      options_.coordinator, grpc::InsecureChannelCredentials(), args);
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
  if (writes_broken_ || writes_done_requested_) return;
  proto::Fence* f = msg.mutable_fence();
  f->set_incarnation(incarnation_);
  f->set_epoch(epoch_);
  queue_.push_back(std::move(msg));
}

void SessionClient::Reactor::MaybeStartWrite(bool from_reaction) {
  MutexLock lock(&mu_);
  if (done_ || (hold_released_ && !from_reaction)) return;
  if (write_in_flight_ || writes_broken_ || writes_done_started_) return;
  if (!queue_.empty()) {
    // A deque keeps references valid across push_back; the front is only
    // popped by OnWriteDone, after this write completed.
    write_in_flight_ = true;
    StartWrite(&queue_.front());
  } else if (writes_done_requested_) {
    writes_done_started_ = true;
    StartWritesDone();
  }
}

void SessionClient::Reactor::ReleaseHold() {
  {
    MutexLock lock(&mu_);
    if (hold_released_) return;
    hold_released_ = true;
  }
  RemoveHold();
}

void SessionClient::Reactor::OnWriteDone(bool ok) {
  {
    MutexLock lock(&mu_);
    write_in_flight_ = false;
    if (ok) {
      queue_.pop_front();
    } else {
      writes_broken_ = true;  // the stream is over; OnDone follows
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
  if (!distrust_.ok()) Fail(distrust_, /*lost=*/false);
  if (phase_ != Phase::kLeaving && phase_ != Phase::kClosing) {
    Fail(absl::UnavailableError(absl::StrCat(
             "lost ", Who(), " (stream closed: ", status.error_message(),
             ", gRPC code ", static_cast<int>(status.error_code()), ")")),
         /*lost=*/true);
  }
  done_ = true;
  cv_.SignalAll();
}

void SessionClient::Reactor::Fail(absl::Status status, bool lost) {
  if (!terminal_.ok()) return;
  terminal_ = std::move(status);
  lost_ = lost;
  cv_.SignalAll();
  if (on_terminal_) on_terminal_(terminal_);
}

void SessionClient::Reactor::OnTerminal(
    std::function<void(const absl::Status&)> observer) {
  MutexLock lock(&mu_);
  on_terminal_ = std::move(observer);
  if (!terminal_.ok() && on_terminal_) on_terminal_(terminal_);
}

absl::Status SessionClient::Reactor::WaitForVerdict(absl::Time deadline) {
  MutexLock lock(&mu_);
  const uint64_t reported_in = epoch_;
  while (terminal_.ok() && epoch_error_.ok() && epoch_ == reported_in) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
  if (!terminal_.ok()) return terminal_;
  if (!epoch_error_.ok()) return epoch_error_;
  // The epoch ended and the next formed before this thread woke up.
  if (epoch_ != reported_in) return last_epoch_error_;
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
  while (terminal_.ok() && (epoch_ <= epoch || !epoch_error_.ok())) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
  if (!terminal_.ok()) return terminal_;
  if (epoch_ > epoch && epoch_error_.ok()) {
    return EpochView{*membership_, epoch_};
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "worker ", options_.worker_id, ": no membership of an epoch after ",
      epoch, " from ", Who(),
      " in time (the survivors did not regroup; check the coordinator's log)"));
}

SessionClient::EpochView SessionClient::Reactor::Current() const {
  MutexLock lock(&mu_);
  return EpochView{membership_.value_or(proto::Membership{}), epoch_};
}

void SessionClient::Reactor::OnPlan(
    std::function<void(const proto::Plan&)> sink) {
  MutexLock lock(&mu_);
  plan_sink_ = std::move(sink);
}

absl::Status SessionClient::Reactor::SendMessage(proto::WorkerMessage msg) {
  {
    MutexLock lock(&mu_);
    if (!terminal_.ok()) return terminal_;
    if (phase_ != Phase::kMember) {
      return absl::FailedPreconditionError(absl::StrCat(
          "worker ", options_.worker_id,
          ": the session is not running (submit collectives after init() and "
          "before shutdown())"));
    }
    if (!epoch_error_.ok()) return epoch_error_;
    Enqueue(std::move(msg));
  }
  MaybeStartWrite(/*from_reaction=*/false);
  return absl::OkStatus();
}

void SessionClient::Reactor::Handle(const proto::CoordinatorMessage& msg) {
  const proto::Fence& f = msg.fence();
  if (!distrust_.ok() && !msg.has_refusal()) return;  // an impostor's words
  if (msg.has_refusal()) {
    SessionLog()->error("{}", msg.refusal().message());
    absl::Status refused = proto::RefusalStatus(
        msg.refusal().reason(),
        absl::StrCat(Who(), " refused worker ", options_.worker_id, ": ",
                     msg.refusal().message()));
    if (!distrust_.ok()) {
      // An unauthenticated worker is told nothing precise; what it found
      // itself (the coordinator could not prove the secret) says why.
      refused = absl::Status(
          refused.code(),
          absl::StrCat(refused.message(), "; ", distrust_.message()));
    }
    Fail(refused, /*lost=*/false);
    return;
  }
  if (msg.has_challenge()) {
    if (challenged_) {
      SessionLog()->warn("{} sent a second Challenge; ignored", Who());
      return;
    }
    challenged_ = true;
    incarnation_ = f.incarnation();
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
    return;
  }
  // Fencing: this incarnation, and this epoch (a Membership opens a later one).
  const bool new_epoch = msg.has_membership() && f.epoch() > epoch_;
  // Elastic jobs: after EpochAborted the next Membership is awaited.
  const bool awaiting = phase_ == Phase::kAwaitMembership ||
                        (phase_ == Phase::kMember && !epoch_error_.ok());
  if (!challenged_ || f.incarnation() != incarnation_ ||
      (f.epoch() != epoch_ && !new_epoch)) {
    SessionLog()->warn(
        "dropped a message from {} fenced (incarnation {:016x}, epoch {}); "
        "worker {} is at incarnation {:016x}, epoch {}",
        Who(), f.incarnation(), f.epoch(), options_.worker_id, incarnation_,
        epoch_);
    return;
  }
  last_heard_ = absl::Now();  // only a message of our coordinator renews
  switch (msg.body_case()) {
    case proto::CoordinatorMessage::kMembership:
      if (!awaiting || !new_epoch) {
        SessionLog()->warn(
            "{} sent an unexpected Membership (epoch {}); ignored", Who(),
            f.epoch());
        return;
      }
      if (phase_ == Phase::kMember) {
        SessionLog()->warn(
            "worker {}: epoch {} formed: rank {} of {} (was rank {} of {})",
            options_.worker_id, f.epoch(), msg.membership().rank(),
            msg.membership().size(), membership_->rank(), membership_->size());
      }
      epoch_ = f.epoch();
      membership_ = msg.membership();
      epoch_error_ = absl::OkStatus();
      phase_ = Phase::kMember;
      cv_.SignalAll();
      return;
    case proto::CoordinatorMessage::kEpochAborted: {
      const proto::EpochAborted& ab = msg.epoch_aborted();
      if (phase_ != Phase::kMember || !epoch_error_.ok() ||
          ab.epoch() != epoch_) {
        SessionLog()->warn("{} ended epoch {} at epoch {}; ignored", Who(),
                           ab.epoch(), epoch_);
        return;
      }
      SessionLog()->warn("worker {}: {}", options_.worker_id, ab.reason());
      epoch_error_ = proto::MembershipError(ab);
      last_epoch_error_ = epoch_error_;
      // Pending exchanges, Announces and Dones of the epoch fail with it;
      // the API aborts the epoch's data plane and ops.
      if (on_epoch_end_) on_epoch_end_(epoch_error_, epoch_);
      proto::WorkerMessage ack;
      ack.mutable_epoch_ack()->set_epoch(epoch_);
      Enqueue(std::move(ack));
      cv_.SignalAll();
      return;
    }
    case proto::CoordinatorMessage::kEvicted: {
      proto::LostWorker self;
      self.set_worker_id(options_.worker_id);
      self.set_rank(membership_.has_value() ? membership_->rank() : -1);
      self.set_host_name(options_.host_name);
      self.set_cause("evicted");
      SessionLog()->error("worker {}: {}", options_.worker_id,
                          msg.evicted().reason());
      evicted_ = true;
      Fail(proto::EvictedError(msg.evicted(), self), /*lost=*/false);
      return;
    }
    case proto::CoordinatorMessage::kHeartbeat:
      return;  // last_heard_ is updated
    case proto::CoordinatorMessage::kExchangeResult: {
      auto it = exchanges_.find(msg.exchange_result().key());
      if (it == exchanges_.end()) return;  // timed out meanwhile
      it->second.emplace(msg.exchange_result().values().begin(),
                         msg.exchange_result().values().end());
      cv_.SignalAll();
      return;
    }
    case proto::CoordinatorMessage::kPlan:
      if (plan_sink_) {
        plan_sink_(msg.plan());
      } else {
        SessionLog()->warn(
            "{} sent plan {} before the runtime was ready; "
            "dropped",
            Who(), msg.plan().seq());
      }
      return;
    case proto::CoordinatorMessage::kLeaveAck:
      leave_acked_ = true;
      cv_.SignalAll();
      return;
    case proto::CoordinatorMessage::kJobEnd: {
      const proto::JobEnd& end = msg.job_end();
      if (end.failure()) {
        SessionLog()->error("the job ended in failure: {}", end.reason());
      } else if (phase_ != Phase::kLeaving) {
        SessionLog()->warn("{} ended the job before worker {} left: {}", Who(),
                           options_.worker_id, end.reason());
      }
      Fail(absl::AbortedError(absl::StrCat(
               end.failure() ? "the job ended in failure: " : "the job ended: ",
               end.reason())),
           /*lost=*/false);
      return;
    }
    default:
      SessionLog()->warn("{} sent an unexpected message (body {}); ignored",
                         Who(), static_cast<int>(msg.body_case()));
  }
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
    if (live && terminal_.ok() && now - last_heard_ > options_.lease) {
      Fail(absl::UnavailableError(absl::StrCat(
               "lost ", Who(), " (no message for ", Secs(now - last_heard_),
               "; KOLO_LEASE_SECONDS is ", Secs(options_.lease), ")")),
           /*lost=*/true);
      mu_.Unlock();
      context_.TryCancel();
      mu_.Lock();
      continue;
    }
    if (!distrust_.ok() && terminal_.ok() && now >= distrust_deadline_) {
      Fail(distrust_, /*lost=*/false);
      mu_.Unlock();
      context_.TryCancel();
      mu_.Lock();
      continue;
    }
    if (evicted_ && !loss_reported) {
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
    if (lost_ && !loss_reported) {
      loss_reported = true;
      SessionLog()->error("worker {}: {}", options_.worker_id,
                          std::string(terminal_.message()));
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
    if (!distrust_.ok() && terminal_.ok()) {
      wake = std::min(wake, distrust_deadline_);
    }
    if (live && terminal_.ok()) {
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
