// CoordinatorCore, the elastic side: a lost member ends its epoch, not the
// job; the survivors acknowledge and form the next epoch, with newcomers
// appended; membership checks admit newcomers and let members leave. See
// core.h ("Elastic jobs", "Elastic growth") for the class contract.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "coordinator/core.h"

namespace kolo::coordinator {
namespace {

std::shared_ptr<spdlog::logger> ElasticLog() {
  return GetLogger("coordinator");
}

std::string Secs(absl::Duration d) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d));
}

// How a loss was detected, from the cause LoseMember is given (the causes
// are this component's own phrases: core.cc, core_elastic.cc).
std::string DetectionOf(absl::string_view cause) {
  if (absl::StartsWith(cause, "disconnected")) return "stream";
  if (absl::StartsWith(cause, "silent for")) {
    return absl::StrContains(cause, "data plane reported") ? "data-plane"
                                                           : "heartbeat";
  }
  if (absl::StartsWith(cause, "did not acknowledge")) return "no-ack";
  if (absl::StartsWith(cause, "refused")) return "refused";
  if (absl::StrContains(cause, "incarnation")) return "superseded";
  return "other";
}

}  // namespace

std::string CoordinatorCore::DescribeLost(
    const std::vector<proto::LostWorker>& lost) {
  if (lost.empty()) return "none";
  std::vector<std::string> parts;
  for (const proto::LostWorker& l : lost) {
    parts.push_back(absl::StrCat(l.worker_id(), " (rank ", l.rank(), ", host ",
                                 l.host_name(), ") ", l.cause()));
  }
  return absl::StrJoin(parts, "; ");
}

void CoordinatorCore::LoseMember(int rank, const std::string& cause,
                                 Actions& out) {
  const absl::Time now = options_.clock();
  Member& m = ep_.members[rank];
  m.state = proto::MEMBER_STATE_FAILED;
  proto::LostWorker lost;
  lost.set_worker_id(m.worker_id);
  lost.set_rank(rank);
  lost.set_host_name(m.host_name);
  lost.set_cause(cause);
  lost.set_detected_unix_ms(absl::ToUnixMillis(now));
  lost.set_detection(DetectionOf(cause));
  lost.set_incarnation(m.incarnation);
  lost_all_.push_back(lost);
  const std::string who = absl::StrCat("worker ", m.worker_id, " (rank ", rank,
                                       ", host ", m.host_name, ")");
  // Evict it if its stream is still open: a silent worker may come back
  // (SIGCONT, a healed partition) and must learn that it is out.
  if (auto it = sessions_.find(m.session); it != sessions_.end()) {
    const std::string reason = absl::StrCat(
        who, " was evicted from epoch ", ep_.number, " of job '",
        options_.job_id, "': ", cause,
        "; the other workers go on without it (it may rejoin as a newcomer "
        "with a new Session, as kolo::elastic::run does, or exit)");
    proto::CoordinatorMessage msg;
    msg.mutable_fence()->set_incarnation(options_.incarnation);
    msg.mutable_fence()->set_epoch(ep_.number);
    msg.mutable_evicted()->set_epoch(ep_.number);
    msg.mutable_evicted()->set_reason(reason);
    Send(m.session, std::move(msg), out);
    out.closes.push_back(
        Actions::Close{m.session, absl::FailedPreconditionError(reason)});
    sessions_.erase(it);
  }
  m.open = false;
  out.unbind_links.push_back(m.session);

  if (phase_ == Phase::kRunning) {
    // The epoch ends: its negotiation state and links go; every survivor
    // is told and acknowledges.
    BeginRecovery(now);
    lost_.push_back(lost);
    ElasticLog()->error(
        "epoch {} of job '{}' ended: {} {}; the survivors go on", ep_.number,
        options_.job_id, who, cause);
    if (options_.reset_limit >= 0 && resets_ > options_.reset_limit) {
      EndJob(
          true,
          absl::StrCat(who, " ", cause, "; the job reached its reset limit (",
                       options_.reset_limit,
                       " membership changes, --reset-limit) and ends"),
          out, m.worker_id);
      return;
    }
    proto::CoordinatorMessage msg;
    msg.mutable_fence()->set_incarnation(options_.incarnation);
    msg.mutable_fence()->set_epoch(ep_.number);
    proto::EpochAborted* ab = msg.mutable_epoch_aborted();
    ab->set_epoch(ep_.number);
    *ab->add_lost() = lost;
    ab->set_reason(
        absl::StrCat("epoch ", ep_.number, " ended: ", who, " ", cause));
    for (Member& s : ep_.members) {
      if (s.state != proto::MEMBER_STATE_MEMBER || !s.open) continue;
      s.acked = false;
      Send(s.session, msg, out);
      out.unbind_links.push_back(s.session);
    }
  } else {
    // Lost while the next epoch forms (kRecovering) or while the job waits
    // for workers (kShort): one more loss of the same change.
    lost_.push_back(lost);
    ElasticLog()->error("{} {} while epoch {} of job '{}' was being replaced",
                        who, cause, ep_.number, options_.job_id);
  }
  MaybeFormNextEpoch(now, out);
}

void CoordinatorCore::ReformEpoch(const std::string& why, Actions& out) {
  const absl::Time now = options_.clock();
  const uint64_t number = ep_.number;
  BeginRecovery(now);
  const std::string reason = absl::StrCat(
      "epoch ", number, " ended: ", why,
      "; every worker is alive: the members rebuild the data plane and go on "
      "from their last commit");
  ElasticLog()->error("job '{}': {}", options_.job_id, reason);
  if (options_.reset_limit >= 0 && resets_ > options_.reset_limit) {
    EndJob(true,
           absl::StrCat(reason, "; the job reached its reset limit (",
                        options_.reset_limit,
                        " membership changes, --reset-limit) and ends"),
           out);
    return;
  }
  proto::CoordinatorMessage msg;
  msg.mutable_fence()->set_incarnation(options_.incarnation);
  msg.mutable_fence()->set_epoch(number);
  proto::EpochAborted* ab = msg.mutable_epoch_aborted();
  ab->set_epoch(number);
  ab->set_reason(reason);
  for (Member& m : ep_.members) {
    if (m.state != proto::MEMBER_STATE_MEMBER || !m.open) continue;
    m.acked = false;
    Send(m.session, msg, out);
    out.unbind_links.push_back(m.session);
  }
  MaybeFormNextEpoch(now, out);
}

void CoordinatorCore::MaybeFormNextEpoch(absl::Time now, Actions& out) {
  if (phase_ != Phase::kRecovering && phase_ != Phase::kShort) return;
  std::vector<SessionId> members;  // survivors in rank order
  for (const Member& m : ep_.members) {
    if (m.state != proto::MEMBER_STATE_MEMBER || !m.open) continue;
    if (!m.acked) return;  // not yet (OnTick enforces the deadline)
    members.push_back(m.session);
  }
  if (members.empty()) {
    // Nobody holds the job's state: newcomers cannot go on without it.
    if (lost_.empty() && !left_.empty()) {
      EndJob(false,
             absl::StrCat("every worker left job '", options_.job_id,
                          "' (last: ", absl::StrJoin(left_, ", "), ")"),
             out);
      return;
    }
    EndJob(true,
           absl::StrCat("every worker of job '", options_.job_id,
                        "' was lost: ", DescribeLost(lost_all_)),
           out, lost_all_.empty() ? "" : lost_all_.back().worker_id());
    return;
  }
  const std::vector<SessionId> newcomers =
      Newcomers(RoomFor(static_cast<int>(members.size())));
  if (static_cast<int>(members.size() + newcomers.size()) < options_.min_size) {
    if (phase_ != Phase::kShort) {
      phase_ = Phase::kShort;
      recovery_deadline_ = now + options_.elastic_timeout;
      ElasticLog()->warn(
          "job '{}': {} workers remain, fewer than the minimum of {} "
          "(--min-np); waiting up to {} (--elastic-timeout) for workers",
          options_.job_id, members.size() + newcomers.size(), options_.min_size,
          Secs(options_.elastic_timeout));
    }
    return;
  }
  proto::EpochRecord record;
  std::vector<std::string> causes;
  if (!lost_.empty()) causes.push_back("lost");
  if (!left_.empty()) causes.push_back("left");
  if (!newcomers.empty()) causes.push_back("joined");
  record.set_cause(causes.empty() ? "reformed" : absl::StrJoin(causes, "+"));
  for (const proto::LostWorker& l : lost_) *record.add_lost() = l;
  for (const std::string& w : left_) record.add_left(w);
  for (SessionId id : newcomers) {
    record.add_joined(sessions_.at(id).hello.worker_id());
    members.push_back(id);
  }
  const uint64_t ended = ep_.number;
  const std::string what = absl::StrCat(
      "lost: ", DescribeLost(lost_),
      "; left: ", left_.empty() ? "none" : absl::StrJoin(left_, ", "),
      "; joined: ",
      record.joined().empty() ? "none" : absl::StrJoin(record.joined(), ", "));
  FormEpoch(ended + 1, members, /*keep_order=*/true, std::move(record), out);
  ElasticLog()->warn(
      "epoch {} formed with {} workers {} after epoch {} ended ({})",
      ep_.number, ep_.members.size(), Secs(now - recovery_since_), ended, what);
  lost_.clear();
  left_.clear();
}

void CoordinatorCore::BeginRecovery(absl::Time now) {
  ++resets_;
  lost_.clear();
  recovery_since_ = now;
  recovery_deadline_ = now + options_.heartbeat_timeout;
  ep_.negotiator.reset();
  ep_.faults.clear();
  ep_.exchanges.clear();
  phase_ = Phase::kRecovering;
}

int CoordinatorCore::RoomFor(int staying) const {
  if (options_.max_size <= 0) return -1;
  return std::max(0, options_.max_size - staying);
}

std::optional<std::vector<int>> CoordinatorCore::TakeMembershipChange(
    proto::Plan& plan) {
  auto* responses = plan.mutable_responses();
  for (int i = 0; i < responses->size(); ++i) {
    const proto::Response& r = responses->Get(i);
    if (r.op() != proto::MEMBERSHIP_CHECK || r.error_code() != 0) continue;
    std::vector<int> leavers;
    for (int64_t rank : r.sizes()) {
      if (rank >= 0 && rank < static_cast<int64_t>(ep_.members.size())) {
        leavers.push_back(static_cast<int>(rank));
      }
    }
    const int staying =
        static_cast<int>(ep_.members.size()) - static_cast<int>(leavers.size());
    if (leavers.empty() && Newcomers(RoomFor(staying)).empty()) {
      return std::nullopt;  // nothing changes: answered like a barrier
    }
    responses->DeleteSubrange(i, 1);
    return leavers;
  }
  return std::nullopt;
}

void CoordinatorCore::EndEpochPlanned(const std::vector<int>& leavers,
                                      Actions& out) {
  const absl::Time now = options_.clock();
  const uint64_t number = ep_.number;
  int staying = 0;
  for (const Member& m : ep_.members) {
    if (m.state == proto::MEMBER_STATE_MEMBER) ++staying;
  }
  staying -= static_cast<int>(leavers.size());
  proto::CoordinatorMessage msg;
  msg.mutable_fence()->set_incarnation(options_.incarnation);
  msg.mutable_fence()->set_epoch(number);
  proto::EpochAborted* ab = msg.mutable_epoch_aborted();
  ab->set_epoch(number);
  ab->set_planned(true);
  for (SessionId id : Newcomers(RoomFor(staying))) {
    ab->add_joining(sessions_.at(id).hello.worker_id());
  }
  left_.clear();
  for (int rank : leavers) {
    Member& m = ep_.members[rank];
    m.state = proto::MEMBER_STATE_LEFT;
    ab->add_leaving(m.worker_id);
    left_.push_back(m.worker_id);
  }
  std::vector<std::string> parts;
  if (!ab->joining().empty()) {
    parts.push_back(absl::StrCat(absl::StrJoin(ab->joining(), ", "),
                                 ab->joining_size() == 1 ? " joins" : " join"));
  }
  if (!ab->leaving().empty()) {
    parts.push_back(absl::StrCat(absl::StrJoin(ab->leaving(), ", "),
                                 ab->leaving_size() == 1 ? " leaves" : " leave",
                                 " (SIGTERM)"));
  }
  ab->set_reason(absl::StrCat(
      "epoch ", number, " ended at a membership check: ",
      absl::StrJoin(parts, "; "), "; the members go on from this commit"));
  BeginRecovery(now);
  ElasticLog()->warn("job '{}': {}", options_.job_id, ab->reason());
  if (options_.reset_limit >= 0 && resets_ > options_.reset_limit) {
    EndJob(true,
           absl::StrCat(ab->reason(), "; the job reached its reset limit (",
                        options_.reset_limit,
                        " membership changes, --reset-limit) and ends"),
           out);
    return;
  }
  for (Member& m : ep_.members) {
    const bool leaving =
        m.state == proto::MEMBER_STATE_LEFT &&
        std::find(left_.begin(), left_.end(), m.worker_id) != left_.end();
    if (!m.open || (m.state != proto::MEMBER_STATE_MEMBER && !leaving)) {
      continue;
    }
    m.acked = false;
    Send(m.session, msg, out);
    out.unbind_links.push_back(m.session);
    if (leaving) {
      // Out of the membership; fenced with this epoch until its Leave.
      if (auto it = sessions_.find(m.session); it != sessions_.end()) {
        it->second.departed_epoch = number;
        it->second.rank = -1;
        it->second.state = State::kLeft;
      }
      m.open = false;
    }
  }
  MaybeFormNextEpoch(now, out);
}

bool CoordinatorCore::Supersede(const Session& s, SessionId other_id,
                                Actions& out) {
  Session& other = sessions_.at(other_id);
  const uint32_t mine = s.hello.worker_incarnation();
  const uint32_t theirs = other.hello.worker_incarnation();
  if (mine <= theirs || phase_ == Phase::kEnded) return false;
  const std::string cause = absl::StrCat(
      "was replaced by incarnation ", mine, " of worker ", s.hello.worker_id(),
      " (from ", s.peer, "): the launcher saw incarnation ", theirs, " end");
  if (other.state == State::kMember && other.rank >= 0) {
    FailMember(other.rank, cause, out);
  } else {
    ElasticLog()->warn("worker {} (incarnation {}) waiting to join {}",
                       other.hello.worker_id(), theirs, cause);
    out.closes.push_back(
        Actions::Close{other_id, absl::FailedPreconditionError(cause)});
    sessions_.erase(other_id);
  }
  return true;
}

}  // namespace kolo::coordinator
