#include "coordinator/core.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/check.h"
#include "common/log.h"
#include "common/rate_limited_log.h"
#include "coordinator/membership.h"
#include "proto/refusal.h"

namespace kolo::coordinator {
namespace {

std::shared_ptr<spdlog::logger> Log() { return GetLogger("coordinator"); }

const char* BodyName(const proto::WorkerMessage& m) {
  switch (m.body_case()) {
    case proto::WorkerMessage::kHello:
      return "Hello";
    case proto::WorkerMessage::kProof:
      return "Proof";
    case proto::WorkerMessage::kHeartbeat:
      return "Heartbeat";
    case proto::WorkerMessage::kExchange:
      return "Exchange";
    case proto::WorkerMessage::kLeave:
      return "Leave";
    case proto::WorkerMessage::kAnnounce:
      return "Announce";
    case proto::WorkerMessage::kDone:
      return "Done";
    case proto::WorkerMessage::kPeerFault:
      return "PeerFault";
    default:
      return "an empty message";
  }
}

}  // namespace

CoordinatorCore::CoordinatorCore(CoreOptions options)
    : options_(std::move(options)) {
  KOLO_CHECK(options_.expected_size >= 1)
      << "expected_size must be at least 1, got " << options_.expected_size;
  KOLO_CHECK(options_.clock != nullptr);
}

void CoordinatorCore::Send(SessionId id, proto::CoordinatorMessage msg,
                           Actions& out) {
  out.sends.push_back(Actions::Send{id, std::move(msg)});
}

std::string CoordinatorCore::Describe(const Session& s) const {
  const std::string& w =
      s.hello.worker_id().empty() ? std::string("?") : s.hello.worker_id();
  if (s.rank >= 0) {
    return absl::StrCat("worker ", w, " (rank ", s.rank, ", host ",
                        s.hello.host_name(), ")");
  }
  return absl::StrCat("worker ", w, " (host ", s.hello.host_name(), ", from ",
                      s.peer, ")");
}

int CoordinatorCore::AuthenticatedCount() const {
  int n = 0;
  for (const auto& [id, s] : sessions_) {
    if (s.state == State::kWaiting || s.state == State::kMember) ++n;
  }
  return n;
}

Actions CoordinatorCore::OnOpen(SessionId session, std::string peer) {
  MutexLock lock(&mu_);
  Session s;
  s.peer = std::move(peer);
  s.opened = s.last_heard = options_.clock();
  bool inserted = sessions_.emplace(session, std::move(s)).second;
  KOLO_CHECK(inserted) << "session id " << session << " opened twice";
  return {};
}

Actions CoordinatorCore::OnMessage(SessionId id,
                                   const proto::WorkerMessage& message) {
  MutexLock lock(&mu_);
  Actions out;
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return out;  // already closed by us
  Session& s = it->second;
  s.last_heard = options_.clock();
  if (s.rank >= 0) ep_.members[s.rank].last_heard = s.last_heard;

  if (s.state == State::kAwaitHello) {
    if (message.body_case() != proto::WorkerMessage::kHello) {
      Refuse(id, proto::Refusal::PROTOCOL_ERROR,
             absl::StrCat("the first message of a Session must be Hello, got ",
                          BodyName(message), " from ", s.peer),
             out);
      return out;
    }
    HandleHello(id, s, message.hello(), out);
    return out;
  }
  if (!CheckFence(id, s, message, out)) return out;
  if (s.departed_epoch != 0) {
    HandleAfterDeparture(id, s, message, out);
    return out;
  }
  Dispatch(id, s, message, out);
  return out;
}

bool CoordinatorCore::CheckFence(SessionId id, const Session& s,
                                 const proto::WorkerMessage& message,
                                 Actions& out) {
  // Fencing: after the Challenge, this incarnation; after the Membership,
  // this epoch (epoch 0 is tolerated on Heartbeat/Leave in flight meanwhile;
  // a member's Leave of an earlier epoch counts: it left as the next one
  // formed, and Leave.built_epoch says whether it joined it).
  const proto::Fence& f = message.fence();
  const bool leave = message.body_case() == proto::WorkerMessage::kLeave;
  uint64_t want_epoch = FenceOf(s);
  bool late_ok =
      (f.epoch() == 0 &&
       (message.body_case() == proto::WorkerMessage::kHeartbeat || leave)) ||
      (leave && f.epoch() < want_epoch);
  if (f.incarnation() == options_.incarnation && s.rank >= 0 && f.epoch() > 0 &&
      f.epoch() < want_epoch && !leave) {
    // Sent before the member learnt that its epoch ended (elastic jobs):
    // a consequence of the change, not a fault. Its liveness counts.
    Log()->debug("dropped {} of {} fenced with epoch {} (the epoch is {})",
                 BodyName(message), Describe(s), f.epoch(), want_epoch);
    return false;
  }
  if (f.incarnation() != options_.incarnation ||
      (f.epoch() != want_epoch && !(s.rank >= 0 && late_ok))) {
    Refuse(id, proto::Refusal::FENCED,
           absl::StrFormat(
               "%s sent %s fenced (incarnation %016x, epoch %d), but this "
               "coordinator is incarnation %016x, epoch %d for it; a message "
               "from another coordinator start or epoch is refused (restart "
               "the worker so it joins the current job)",
               Describe(s), BodyName(message), f.incarnation(), f.epoch(),
               options_.incarnation, want_epoch),
           out);
    return false;
  }
  return true;
}

void CoordinatorCore::HandleAfterDeparture(SessionId id, const Session& s,
                                           const proto::WorkerMessage& message,
                                           Actions& out) {
  // It left at a membership check: only its Leave matters now.
  if (message.body_case() == proto::WorkerMessage::kLeave) {
    proto::CoordinatorMessage ack;
    ack.mutable_fence()->set_incarnation(options_.incarnation);
    ack.mutable_fence()->set_epoch(s.departed_epoch);
    ack.mutable_leave_ack();
    Send(id, std::move(ack), out);
    Log()->info("{} left after epoch {}", Describe(s), s.departed_epoch);
  }
}

void CoordinatorCore::Dispatch(SessionId id, Session& s,
                               const proto::WorkerMessage& message,
                               Actions& out) {
  switch (message.body_case()) {
    case proto::WorkerMessage::kProof:
      if (s.state != State::kAwaitProof) break;
      HandleProof(id, s, message.proof(), out);
      return;
    case proto::WorkerMessage::kHeartbeat:
      if (s.state == State::kAwaitProof) break;
      return;  // last_heard is updated above
    case proto::WorkerMessage::kExchange:
      if (s.state != State::kMember) break;
      if (phase_ != Phase::kRunning) return;  // the epoch ended
      HandleExchange(id, s, message.exchange(), out);
      return;
    case proto::WorkerMessage::kEpochAck:
      if (s.state != State::kMember) break;
      // A late or repeated acknowledgement is harmless.
      if (phase_ == Phase::kRecovering &&
          message.epoch_ack().epoch() == ep_.number) {
        ep_.members[s.rank].acked = true;
        MaybeFormNextEpoch(s.last_heard, out);
      }
      return;
    case proto::WorkerMessage::kLeave:
      if (s.state != State::kMember && s.state != State::kWaiting) break;
      HandleLeave(id, s, message.leave(), out);
      return;
    case proto::WorkerMessage::kAnnounce: {
      // A worker's negotiation link is a second connection: what it sent
      // there before its Leave may arrive after the Leave. Harmless.
      if (s.state == State::kLeft) return;
      if (s.state != State::kMember) break;
      if (phase_ != Phase::kRunning) return;  // the epoch ended
      NegotiatorOutput result;
      ep_.negotiator->Announce(s.rank, message.announce(), s.last_heard,
                               result);
      Apply(result, out);
      return;
    }
    case proto::WorkerMessage::kPeerFault:
      if (s.state == State::kLeft) return;
      if (s.state != State::kMember) break;
      if (phase_ != Phase::kRunning) return;  // the epoch ended
      HandlePeerFault(s, message.peer_fault(), out);
      return;
    case proto::WorkerMessage::kDone: {
      if (s.state == State::kLeft) return;  // as Announce above
      if (s.state != State::kMember) break;
      if (phase_ != Phase::kRunning) return;  // the epoch ended
      NegotiatorOutput result;
      if (message.done().fast_exit()) {
        ep_.negotiator->FastExit(
            s.rank, message.done().seq(), message.done().fast_used(),
            message.done().fast_tally(), s.last_heard, result);
      } else {
        ep_.negotiator->Done(s.rank, message.done().seq(), s.last_heard,
                             result);
      }
      Apply(result, out);
      return;
    }
    default:
      break;
  }
  const char* when = s.state == State::kAwaitProof ? "during the handshake"
                     : s.state == State::kWaiting  ? "before its Membership"
                     : s.state == State::kLeft     ? "after Leave"
                                                   : "after the handshake";
  Refuse(id, proto::Refusal::PROTOCOL_ERROR,
         absl::StrCat(Describe(s), " sent ", BodyName(message), " ", when,
                      ", which the Session protocol does not allow; run the "
                      "same kolo build everywhere"),
         out);
}

void CoordinatorCore::MaybeFormEpoch(Actions& out) {
  if (phase_ != Phase::kForming) return;
  int room = options_.expected_size;
  const int in = AuthenticatedCount();
  if (in < options_.expected_size) {
    // A restarted coordinator: the workers that were alive reconnect
    // within a fraction of a second of each other; those lost while it
    // was down never come.
    if (!options_.elastic || ep_.number != 0 ||
        last_reconnect_ == absl::InfinitePast() || in < options_.min_size) {
      return;
    }
    const absl::Time settled = last_reconnect_ + kReconnectSettle;
    if (options_.clock() < settled) {
      out.wake_at = std::min(out.wake_at, settled);
      return;
    }
    Log()->warn(
        "{} of {} workers reconnected (none for {}): the job forms again "
        "with them",
        in, options_.expected_size, absl::FormatDuration(kReconnectSettle));
    room = in;
  }
  // The first `room` to arrive (an elastic job's extras wait to join at the
  // first membership check).
  std::vector<SessionId> ids = Newcomers(room);
  proto::EpochRecord record;
  // ep_.number is 0 before the first epoch; after a re-init (core.h) the
  // job forms again under the next number, so that epochs never mix.
  record.set_cause(ep_.number == 0 ? "start" : "re-init");
  FormEpoch(ep_.number + 1, ids, /*keep_order=*/false, std::move(record), out);
}

std::vector<SessionId> CoordinatorCore::Newcomers(int room) const {
  std::vector<std::pair<uint64_t, SessionId>> by_arrival;
  for (const auto& [id, s] : sessions_) {
    if (s.state == State::kWaiting) by_arrival.emplace_back(s.arrival, id);
  }
  std::sort(by_arrival.begin(), by_arrival.end());
  std::vector<SessionId> ids;
  for (const auto& [arrival, id] : by_arrival) {
    if (room >= 0 && static_cast<int>(ids.size()) >= room) break;
    ids.push_back(id);
  }
  return ids;
}

uint64_t CoordinatorCore::FenceOf(const Session& s) const {
  return s.rank >= 0 ? ep_.number : s.departed_epoch;
}

void CoordinatorCore::SetPhase(Phase next) {
  if (next == Phase::kRunning && recovery_.has_value()) {
    stats_.recovery_seconds.Observe(
        absl::ToDoubleSeconds(options_.clock() - recovery_->since));
  }
  phase_ = next;
  const bool recovering =
      phase_ == Phase::kRecovering || phase_ == Phase::kShort;
  if (!recovering) recovery_.reset();
  KOLO_CHECK(recovery_.has_value() == recovering)
      << "phase " << static_cast<int>(phase_)
      << " without the Recovery it needs";
}

void CoordinatorCore::FormEpoch(uint64_t number,
                                const std::vector<SessionId>& ids,
                                bool keep_order, proto::EpochRecord record,
                                Actions& out) {
  std::vector<Arrival> arrivals;
  for (size_t i = 0; i < ids.size(); ++i) {
    const proto::Hello& h = sessions_.at(ids[i]).hello;
    arrivals.push_back(
        Arrival{h.worker_id(), h.host_name(), h.data_address(),
                keep_order ? static_cast<int>(i) : h.requested_rank()});
  }
  Assignment a = AssignRanks(arrivals, options_.job_id);
  // Sessions of the ending epoch not in this one (they left) keep the
  // fence of the epoch they left from.
  for (auto& [id, s] : sessions_) {
    if (s.rank < 0 || std::find(ids.begin(), ids.end(), id) != ids.end()) {
      continue;
    }
    s.departed_epoch = ep_.number;
    s.rank = -1;
    s.state = State::kLeft;
  }
  ep_ = Epoch{};
  ep_.number = number;
  SetPhase(Phase::kRunning);
  ep_.members.assign(ids.size(), Member{});
  for (size_t i = 0; i < ids.size(); ++i) {
    Session& s = sessions_.at(ids[i]);
    int rank = a.rank_of[i];
    s.state = State::kMember;
    s.rank = rank;
    Member& m = ep_.members[rank];
    m.worker_id = s.hello.worker_id();
    m.host_name = s.hello.host_name();
    m.data_address = s.hello.data_address();
    m.incarnation = s.hello.worker_incarnation();
    m.pid = s.hello.pid();
    m.session = ids[i];
    m.state = proto::MEMBER_STATE_MEMBER;
    m.last_heard = s.last_heard;
  }
  std::vector<std::string> names;
  for (size_t r = 0; r < ep_.members.size(); ++r) {
    names.push_back(absl::StrCat(r, "=", ep_.members[r].worker_id, "@",
                                 ep_.members[r].host_name));
    proto::CoordinatorMessage msg;
    msg.mutable_fence()->set_incarnation(options_.incarnation);
    msg.mutable_fence()->set_epoch(ep_.number);
    *msg.mutable_membership() = a.by_rank[r];
    msg.mutable_membership()->set_link_port(options_.link_port);
    Send(ep_.members[r].session, std::move(msg), out);
  }
  NegotiatorOptions no = options_.negotiator;
  no.size = static_cast<int>(ep_.members.size());
  no.stats = &stats_.negotiation;
  ep_.negotiator = std::make_unique<Negotiator>(no);
  TuneNewEpoch(/*membership_changed=*/number > 1);
  record.set_epoch(number);
  record.set_formed_unix_ms(absl::ToUnixMillis(options_.clock()));
  record.clear_members();
  for (const Member& m : ep_.members) record.add_members(m.worker_id);
  nlohmann::ordered_json fields;
  fields["cause"] = record.cause();
  fields["members"] = std::vector<std::string>(record.members().begin(),
                                               record.members().end());
  fields["joined"] =
      std::vector<std::string>(record.joined().begin(), record.joined().end());
  fields["left"] =
      std::vector<std::string>(record.left().begin(), record.left().end());
  nlohmann::ordered_json lost = nlohmann::ordered_json::array();
  for (const proto::LostWorker& l : record.lost())
    lost.push_back(l.worker_id());
  fields["lost"] = std::move(lost);
  Event("epoch_formed", std::move(fields));
  history_.RecordEpoch(std::move(record));
  Log()->info("epoch {} formed with {} workers{}: {}", ep_.number,
              ep_.members.size(),
              a.used_requested_ranks && !keep_order ? " (requested ranks)" : "",
              absl::StrJoin(names, ", "));
}

void CoordinatorCore::HandleExchange(SessionId id, Session& s,
                                     const proto::Exchange& ex, Actions& out) {
  proto::CoordinatorMessage msg;
  msg.mutable_fence()->set_incarnation(options_.incarnation);
  msg.mutable_fence()->set_epoch(ep_.number);
  msg.mutable_exchange_result()->set_key(ex.key());
  // The ranks taking part, ascending: the epoch's, or the set's.
  std::vector<int> ranks;
  if (ex.process_set() == 0 || ep_.negotiator == nullptr) {
    for (size_t r = 0; r < ep_.members.size(); ++r) {
      ranks.push_back(static_cast<int>(r));
    }
  } else if (const std::vector<int>* set =
                 ep_.negotiator->Members(ex.process_set());
             set != nullptr) {
    ranks = *set;
  }
  auto at = std::find(ranks.begin(), ranks.end(), s.rank);
  if (at == ranks.end()) {
    // No such set here, or the sender is not in it: no values (the
    // worker's caller reports the mismatch; the job goes on).
    Send(id, msg, out);
    return;
  }
  const size_t index = static_cast<size_t>(at - ranks.begin());
  auto& values = ep_.exchanges[ex.key()];
  if (values.empty()) values.resize(ranks.size());
  if (values.size() != ranks.size() || values[index].has_value()) {
    Refuse(id, proto::Refusal::PROTOCOL_ERROR,
           absl::StrCat(Describe(s), " sent Exchange '", ex.key(),
                        "' twice before every member sent it; wait for the "
                        "ExchangeResult before reusing a key"),
           out);
    return;
  }
  values[index] = ex.value();
  if (!std::all_of(values.begin(), values.end(),
                   [](const auto& v) { return v.has_value(); })) {
    return;
  }
  for (auto& v : values) msg.mutable_exchange_result()->add_values(*v);
  ep_.exchanges.erase(ex.key());
  for (int r : ranks) {
    const Member& m = ep_.members[static_cast<size_t>(r)];
    if (m.open && m.state == proto::MEMBER_STATE_MEMBER)
      Send(m.session, msg, out);
  }
}

void CoordinatorCore::Apply(NegotiatorOutput& result, Actions& out) {
  for (const std::string& w : result.warnings) {
    Log()->warn("{}", w);
    Event("stall_warning", {{"message", w}});
  }
  stats_.stall_warnings += result.warnings.size();
  for (proto::Plan& plan : result.plans) {
    std::optional<std::vector<int>> change;
    if (options_.elastic) change = TakeMembershipChange(plan);
    if (plan.responses_size() > 0 || !change.has_value()) {
      TuneOnPlan(plan);
      proto::CoordinatorMessage msg;
      msg.mutable_fence()->set_incarnation(options_.incarnation);
      msg.mutable_fence()->set_epoch(ep_.number);
      *msg.mutable_plan() = std::move(plan);
      for (const Member& m : ep_.members) {
        if (m.open && m.state == proto::MEMBER_STATE_MEMBER)
          Send(m.session, msg, out);
      }
      ++stats_.plans;
    }
    if (change.has_value()) {
      // Later plans of this round belong to an epoch that ends now.
      EndEpochPlanned(*change, out);
      return;
    }
  }
  if (result.shutdown.has_value()) {
    ++stats_.stall_shutdowns;
    EndJob(true, *result.shutdown, out);
    return;
  }
  out.wake_at = std::min(out.wake_at, ep_.negotiator->NextWake());
}

void CoordinatorCore::HandleLeave(SessionId id, Session& s,
                                  const proto::Leave& leave, Actions& out) {
  proto::CoordinatorMessage ack;
  ack.mutable_fence()->set_incarnation(options_.incarnation);
  ack.mutable_fence()->set_epoch(FenceOf(s));
  ack.mutable_leave_ack();
  Send(id, std::move(ack), out);
  s.state = State::kLeft;
  if (s.rank < 0) {
    Log()->info("{} left before the epoch formed", Describe(s));
    return;
  }
  ep_.members[s.rank].state = proto::MEMBER_STATE_LEFT;
  Log()->info("{} left", Describe(s));
  if (options_.elastic && phase_ == Phase::kRunning &&
      leave.built_epoch() < ep_.number) {
    // It never connected this epoch's data plane, and the others wait for
    // it there: they go on without it.
    ReformEpoch(absl::StrCat(Describe(s),
                             " left (kolo::shutdown) before it "
                             "connected the data plane of epoch ",
                             ep_.number),
                out, s.rank);
    return;
  }
  // Elastic jobs: the lost are out already; the job ends well when every
  // other member left.
  int left = 0;
  bool all_out = true;
  for (const Member& m : ep_.members) {
    if (m.state == proto::MEMBER_STATE_LEFT) {
      ++left;
    } else if (!(options_.elastic && m.state == proto::MEMBER_STATE_FAILED)) {
      all_out = false;
    }
  }
  if (!all_out && phase_ == Phase::kRunning) {
    // The others stay: whatever needs this rank fails on every rank, now
    // and when announced later (negotiator.h, "Members that left").
    NegotiatorOutput result;
    ep_.negotiator->Leave(s.rank, Describe(s), s.last_heard, result);
    Apply(result, out);
    return;
  }
  if (all_out && phase_ != Phase::kForming && phase_ != Phase::kEnded) {
    if (!options_.elastic && !Newcomers(-1).empty()) {
      // Workers that left already said Hello again (re-init, core.h).
      Log()->info("every member of epoch {} left; the job forms again",
                  ep_.number);
      SetPhase(Phase::kForming);
      MaybeFormEpoch(out);
      return;
    }
    SetPhase(Phase::kEnded);
    end_failure_ = false;
    end_reason_ =
        history_.lost().empty()
            ? absl::StrCat("all ", left, " workers left")
            : absl::StrCat("the ", left, " remaining workers left (lost: ",
                           DescribeLost(history_.lost()), ")");
    Log()->info("job '{}' ended: {}", options_.job_id, end_reason_);
    JobEndEvent();
    // Newcomers still waiting (a replacement that started late) will never
    // be admitted: tell them now rather than leave them to their lease.
    for (SessionId waiting : Newcomers(-1)) {
      Session& n = sessions_.at(waiting);
      const std::string told = absl::StrCat(
          "the job ended before this worker was admitted: ", end_reason_);
      proto::CoordinatorMessage msg;
      msg.mutable_fence()->set_incarnation(options_.incarnation);
      msg.mutable_fence()->set_epoch(FenceOf(n));
      msg.mutable_job_end()->set_failure(false);
      msg.mutable_job_end()->set_reason(told);
      Send(waiting, std::move(msg), out);
      out.closes.push_back(Actions::Close{waiting, absl::OkStatus()});
      Log()->info("told waiting {}: {}", Describe(n), told);
      sessions_.erase(waiting);
    }
    return;
  }
  if (phase_ == Phase::kRecovering) MaybeFormNextEpoch(s.last_heard, out);
}

void CoordinatorCore::Refuse(SessionId id, proto::Refusal::Reason reason,
                             const std::string& message, Actions& out) {
  Session& s = sessions_.at(id);
  ++stats_.refusals[proto::Refusal::Reason_Name(reason)];
  if (s.proven || refusal_events_.Admit(PeerHost(s.peer)).has_value()) {
    Event("refusal", {{"reason", proto::Refusal::Reason_Name(reason)},
                      {"peer", s.peer},
                      {"worker_id", s.proven ? s.hello.worker_id() : ""},
                      {"message", message}});
  }
  std::string told = message;
  if (!s.proven && reason != proto::Refusal::VERSION_MISMATCH) {
    // Bytes from outside the job until proven otherwise: a generic answer,
    // and a log line per address per minute at most.
    LogRefusal(
        *Log(), s.peer,
        absl::StrCat("refused an unauthenticated Session from ", s.peer, ": ",
                     proto::Refusal::Reason_Name(reason), ": ", message));
    reason = proto::Refusal::AUTH_FAILED;
    told = std::string(auth::kUnauthenticatedRefusal);
  } else {
    Log()->warn("refused {}: {}: {}", Describe(s),
                proto::Refusal::Reason_Name(reason), message);
  }
  proto::CoordinatorMessage msg;
  msg.mutable_fence()->set_incarnation(options_.incarnation);
  msg.mutable_fence()->set_epoch(FenceOf(s));
  msg.mutable_refusal()->set_reason(reason);
  msg.mutable_refusal()->set_message(told);
  Send(id, std::move(msg), out);
  out.closes.push_back(Actions::Close{id, proto::RefusalStatus(reason, told)});
  int rank = s.rank;
  bool member = s.state == State::kMember;
  sessions_.erase(id);
  if (rank >= 0) {
    ep_.members[rank].open = false;
    if (member) FailMember(rank, absl::StrCat("refused: ", message), out);
  }
}

void CoordinatorCore::FailMember(int rank, const std::string& cause,
                                 Actions& out) {
  Member& m = ep_.members[rank];
  if (phase_ == Phase::kEnded) {
    // The verdict is out: what follows is its consequence, not a cause.
    if (m.state == proto::MEMBER_STATE_MEMBER)
      m.state = proto::MEMBER_STATE_ENDED;
    Log()->info("worker {} (rank {}) {} after the job ended; not a cause",
                m.worker_id, rank, cause);
    return;
  }
  if (options_.elastic) {
    if (m.state != proto::MEMBER_STATE_MEMBER) return;  // out already
    LoseMember(rank, cause, out);
    return;
  }
  m.state = proto::MEMBER_STATE_FAILED;
  Event("worker_failed", {{"worker_id", m.worker_id},
                          {"rank", rank},
                          {"host", m.host_name},
                          {"cause", cause}});
  EndJob(true,
         absl::StrCat("worker ", m.worker_id, " (rank ", rank, ", host ",
                      m.host_name, ") ", cause),
         out, m.worker_id);
}

void CoordinatorCore::EndJob(bool failure, const std::string& reason,
                             Actions& out, const std::string& failed_worker) {
  if (phase_ != Phase::kEnded) {
    SetPhase(Phase::kEnded);
    end_failure_ = failure;
    end_reason_ = reason;
    failed_worker_ = failed_worker;
    if (failure) {
      Log()->error("job '{}' ended in failure: {}", options_.job_id, reason);
    } else {
      Log()->info("job '{}' ended: {}", options_.job_id, reason);
    }
    JobEndEvent();
  }
  std::vector<SessionId> ids;
  for (const auto& [id, s] : sessions_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (SessionId id : ids) {
    Session& s = sessions_.at(id);
    // A peer that has not proven the secret is not told why the job ended.
    const std::string told = s.proven ? end_reason_
                                      : std::string(
                                            "the job ended during the "
                                            "handshake");
    proto::CoordinatorMessage msg;
    msg.mutable_fence()->set_incarnation(options_.incarnation);
    msg.mutable_fence()->set_epoch(FenceOf(s));
    msg.mutable_job_end()->set_failure(failure);
    msg.mutable_job_end()->set_reason(told);
    if (s.proven) msg.mutable_job_end()->set_failed_worker(failed_worker_);
    Send(id, std::move(msg), out);
    out.closes.push_back(Actions::Close{
        id, failure ? absl::AbortedError(told) : absl::OkStatus()});
    if (s.rank >= 0) ep_.members[s.rank].open = false;
  }
  sessions_.clear();
}

Actions CoordinatorCore::OnClosed(SessionId id, absl::string_view cause) {
  MutexLock lock(&mu_);
  Actions out;
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return out;
  Session s = std::move(it->second);
  sessions_.erase(it);
  if (s.rank >= 0) ep_.members[s.rank].open = false;
  switch (s.state) {
    case State::kAwaitHello:
    case State::kAwaitProof:
      // Someone may be knocking: a line per address per minute.
      LogRefusal(*Log(), s.peer,
                 absl::StrCat("a Session from ", s.peer,
                              " closed during the handshake (", cause, ")"));
      break;
    case State::kWaiting:
      Log()->info(
          "{} disconnected before the epoch formed ({}); it may "
          "reconnect",
          Describe(s), std::string(cause));
      break;
    case State::kLeft:
      break;
    case State::kMember: {
      const bool reporter = std::any_of(
          ep_.faults.begin(), ep_.faults.end(),
          [&](const FaultReport& f) { return f.reporter == s.rank; });
      if (reporter && phase_ == Phase::kRunning) {
        // It gave up waiting for the verdict on the peers it reported: a
        // consequence of their fault, judged on its own schedule.
        ep_.members[s.rank].state = proto::MEMBER_STATE_DISCONNECTED;
        Log()->warn(
            "{} disconnected ({}) after reporting a data-plane fault; the "
            "peers it reported are judged",
            Describe(s), std::string(cause));
        break;
      }
      FailMember(s.rank,
                 absl::StrCat("disconnected without leaving (",
                              std::string(cause), ")"),
                 out);
      break;
    }
  }
  return out;
}

Actions CoordinatorCore::Shutdown(bool failure, absl::string_view reason,
                                  absl::string_view failed_worker) {
  MutexLock lock(&mu_);
  Actions out;
  EndJob(failure, std::string(reason), out, std::string(failed_worker));
  return out;
}

void CoordinatorCore::JobEndEvent() {
  Event("job_end", {{"failure", end_failure_},
                    {"reason", end_reason_},
                    {"failed_worker", failed_worker_}});
  if (options_.events != nullptr) options_.events->Flush();
}

void CoordinatorCore::Event(absl::string_view event,
                            nlohmann::ordered_json fields) const {
  if (options_.events == nullptr) return;
  // The wall clock (the core's may be a test's fake one).
  options_.events->Write(absl::Now(), event, ep_.number, fields);
}

}  // namespace kolo::coordinator
