// CoordinatorCore, the Session handshake: Hello (version check, then a
// Challenge) and Proof (the job secret's HMAC, then the job, identity and
// capacity checks, whose refusals only a peer that proved the secret sees).
// See core.h for the class contract.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/version.h"
#include "coordinator/core.h"

namespace kolo::coordinator {

void CoordinatorCore::HandleHello(SessionId id, Session& s,
                                  const proto::Hello& hello, Actions& out) {
  s.hello = hello;
  const std::string& w = hello.worker_id();
  // Before the peer proves the secret it learns nothing about the job: only
  // a version mismatch (public knowledge) is refused here with details; every
  // other check waits for the Proof.
  if (hello.protocol_version() != kProtocolVersion) {
    Refuse(
        id, proto::Refusal::VERSION_MISMATCH,
        absl::StrCat("protocol version mismatch: worker ", w, " speaks v",
                     hello.protocol_version(), ", coordinator speaks v",
                     kProtocolVersion, "; run the same kolo build everywhere"),
        out);
    return;
  }
  if (w.empty()) {
    Refuse(id, proto::Refusal::PROTOCOL_ERROR,
           absl::StrCat("a worker from ", s.peer,
                        " sent a Hello without a worker id; start workers "
                        "through kolorun or set KOLO_WORKER_ID"),
           out);
    return;
  }
  // The proofs cover the job id the worker claims, so that a worker of
  // another job that knows this secret can be told precisely, after its
  // Proof, that it came to the wrong coordinator.
  s.handshake = std::make_unique<auth::ServerHandshake>(
      options_.secret, hello.job_id(), w, hello.client_nonce());
  s.state = State::kAwaitProof;
  proto::CoordinatorMessage msg;
  msg.mutable_fence()->set_incarnation(options_.incarnation);
  msg.mutable_fence()->set_epoch(0);
  msg.mutable_challenge()->set_server_nonce(s.handshake->server_nonce());
  msg.mutable_challenge()->set_server_proof(s.handshake->server_proof());
  Send(id, std::move(msg), out);
}

void CoordinatorCore::HandleProof(SessionId id, Session& s,
                                  const proto::Proof& proof, Actions& out) {
  absl::Status st = s.handshake->Verify(proof.mac());
  s.handshake.reset();  // one proof per challenge
  if (!st.ok()) {
    Refuse(id, proto::Refusal::AUTH_FAILED,
           absl::StrCat("authentication failed for ", Describe(s), ": ",
                        st.message()),
           out);
    return;
  }
  // The peer knows the secret: from here on, refusals say exactly why.
  s.proven = true;
  if (!CheckSameJob(id, s, out) || !ClaimWorkerId(id, s, out)) return;
  if (Rejoin(s, out)) return;
  Admit(id, s, out);
}

bool CoordinatorCore::CheckSameJob(SessionId id, Session& s, Actions& out) {
  const std::string& w = s.hello.worker_id();
  if (s.hello.job_id() != options_.job_id) {
    Refuse(id, proto::Refusal::WRONG_JOB,
           absl::StrCat("worker ", w, " (host ", s.hello.host_name(),
                        ") belongs to job '", s.hello.job_id(),
                        "', but this coordinator serves job '", options_.job_id,
                        "'; point the worker at its own job's coordinator"),
           out);
    return false;
  }
  // An elastic job's size changes: a newcomer's is only a hint.
  if (!options_.elastic && s.hello.expected_size() != 0 &&
      s.hello.expected_size() != options_.expected_size) {
    Refuse(id, proto::Refusal::WRONG_JOB,
           absl::StrCat("worker ", w, " (host ", s.hello.host_name(),
                        ") was told the job has ", s.hello.expected_size(),
                        " workers, but this coordinator expects ",
                        options_.expected_size,
                        "; start every worker with the same world size"),
           out);
    return false;
  }
  return true;
}

bool CoordinatorCore::ClaimWorkerId(SessionId id, Session& s, Actions& out) {
  const std::string& w = s.hello.worker_id();
  SessionId taken = 0;
  for (const auto& [other_id, other] : sessions_) {
    if (other_id == id || other.hello.worker_id() != w) continue;
    // A worker that left (or departed at a check) may come back (in a
    // non-elastic job: re-init, see core.h).
    if (other.state == State::kLeft) continue;
    if (other.state == State::kWaiting || other.state == State::kMember) {
      taken = other_id;
      break;
    }
  }
  if (taken != 0 && !(options_.elastic && Supersede(s, taken, out))) {
    const Session& other = sessions_.at(taken);
    Refuse(
        id, proto::Refusal::DUPLICATE_WORKER,
        absl::StrCat("worker id ", w, " is already connected (host ",
                     other.hello.host_name(), ", from ", other.peer,
                     ", incarnation ", other.hello.worker_incarnation(),
                     "; this one is incarnation ", s.hello.worker_incarnation(),
                     "); give every worker a distinct worker id (a "
                     "replacement needs a higher KOLO_WORKER_INCARNATION)"),
        out);
    return false;
  }
  return true;
}

bool CoordinatorCore::Rejoin(Session& s, Actions& out) {
  const std::string& w = s.hello.worker_id();
  // A member of the last epoch that left says Hello again (re-init).
  bool rejoin = false;
  for (const Member& m : ep_.members) {
    rejoin = rejoin || (!options_.elastic && m.worker_id == w &&
                        m.state == proto::MEMBER_STATE_LEFT);
  }
  if (rejoin && (phase_ == Phase::kRunning ||
                 (phase_ == Phase::kEnded && !end_failure_))) {
    // Re-init (core.h): wait for the others to leave, or form again now.
    s.state = State::kWaiting;
    s.arrival = next_arrival_++;
    GetLogger("coordinator")
        ->info("{} says Hello again after leaving (init after shutdown); {}",
               Describe(s),
               phase_ == Phase::kEnded
                   ? "the job forms again"
                   : "it waits until every member of the epoch left");
    if (phase_ == Phase::kEnded) {
      SetPhase(Phase::kForming);
      end_reason_.clear();
      MaybeFormEpoch(out);
    }
    return true;
  }
  return false;
}

void CoordinatorCore::Admit(SessionId id, Session& s, Actions& out) {
  const std::string& w = s.hello.worker_id();
  if (phase_ == Phase::kEnded) {
    Refuse(id, proto::Refusal::JOB_FULL,
           absl::StrCat("job '", options_.job_id, "' has ended (", end_reason_,
                        "); worker ", w, " cannot join it"),
           out);
    return;
  }
  if (options_.elastic && phase_ != Phase::kForming) {
    // A newcomer: it waits to be admitted (core.h, "Elastic growth").
    s.state = State::kWaiting;
    s.arrival = next_arrival_++;
    GetLogger("coordinator")
        ->info(
            "{} (incarnation {}) authenticated and waits to join epoch {}'s "
            "successor (admitted at the next membership check{})",
            Describe(s), s.hello.worker_incarnation(), ep_.number,
            options_.max_size > 0
                ? absl::StrCat(", while the job has fewer than ",
                               options_.max_size, " workers")
                : "");
    MaybeFormNextEpoch(options_.clock(), out);
    return;
  }
  if (!options_.elastic && (phase_ != Phase::kForming ||
                            AuthenticatedCount() >= options_.expected_size)) {
    Refuse(id, proto::Refusal::JOB_FULL,
           absl::StrCat("job '", options_.job_id, "' already has its ",
                        options_.expected_size, " workers; ", Describe(s),
                        " cannot join (check -np and the worker ids)"),
           out);
    return;
  }
  s.state = State::kWaiting;
  s.arrival = next_arrival_++;
  if (options_.elastic && (s.hello.reconnecting() || options_.restarted)) {
    last_reconnect_ = options_.clock();
  }
  GetLogger("coordinator")
      ->info("{} authenticated ({} of {}{})", Describe(s), AuthenticatedCount(),
             options_.expected_size,
             s.hello.reconnecting() ? "; it reconnects after losing its "
                                      "coordinator"
                                    : "");
  MaybeFormEpoch(out);
}

bool CoordinatorCore::IsProven(SessionId session) const {
  MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  return it != sessions_.end() && it->second.proven;
}

}  // namespace kolo::coordinator
