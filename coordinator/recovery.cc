// Recovery (recovery.h) and CoordinatorCore's recovery steps: a lost member
// ends its epoch, not the job (LoseMember); an epoch whose data connections
// broke is reformed (ReformEpoch); the survivors acknowledge, and the next
// epoch forms from them with the waiting newcomers appended
// (MaybeFormNextEpoch), or the job waits below min_size, or ends at a
// deadline (JudgeRecoveryDeadlines). See core.h ("Elastic jobs") for the
// class contract; growth (admission at membership checks) is in
// core_growth.cc.
#include "coordinator/recovery.h"

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

std::shared_ptr<spdlog::logger> RecoveryLog() {
  return GetLogger("coordinator");
}

std::string Secs(absl::Duration d) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d));
}

// How a loss was detected, from the cause LoseMember is given (the causes
// are this component's own phrases: core.cc, recovery.cc, core_growth.cc).
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

std::string NamesOrNone(const std::vector<std::string>& names) {
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

}  // namespace

proto::EpochRecord Recovery::NextRecord(
    const std::vector<std::string>& joined) const {
  proto::EpochRecord record;
  std::vector<std::string> causes;
  if (!lost.empty()) causes.push_back("lost");
  if (!left.empty()) causes.push_back("left");
  if (!joined.empty()) causes.push_back("joined");
  record.set_cause(causes.empty() ? "reformed" : absl::StrJoin(causes, "+"));
  for (const proto::LostWorker& l : lost) *record.add_lost() = l;
  for (const std::string& w : left) record.add_left(w);
  for (const std::string& w : joined) record.add_joined(w);
  return record;
}

std::string Recovery::Summary(const std::vector<std::string>& joined) const {
  return absl::StrCat("lost: ", DescribeLost(lost),
                      "; left: ", NamesOrNone(left),
                      "; joined: ", NamesOrNone(joined));
}

std::string DescribeLost(const std::vector<proto::LostWorker>& lost) {
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
  history_.RecordLoss(lost);
  Event("worker_lost", {{"worker_id", lost.worker_id()},
                        {"rank", rank},
                        {"host", lost.host_name()},
                        {"detection", lost.detection()},
                        {"cause", cause}});
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
    Event("evicted", {{"worker_id", m.worker_id}, {"reason", reason}});
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
    recovery_->lost.push_back(lost);
    RecoveryLog()->error(
        "epoch {} of job '{}' ended: {} {}; the survivors go on", ep_.number,
        options_.job_id, who, cause);
    if (history_.PastResetLimit(options_.reset_limit)) {
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
    if (recovery_.has_value()) recovery_->lost.push_back(lost);
    RecoveryLog()->error("{} {} while epoch {} of job '{}' was being replaced",
                         who, cause, ep_.number, options_.job_id);
  }
  MaybeFormNextEpoch(now, out);
}

void CoordinatorCore::ReformEpoch(const std::string& why, Actions& out,
                                  int left_rank) {
  const absl::Time now = options_.clock();
  const uint64_t number = ep_.number;
  BeginRecovery(now);
  if (left_rank >= 0) {
    recovery_->left.push_back(ep_.members[left_rank].worker_id);
  }
  const std::string reason = absl::StrCat(
      "epoch ", number, " ended: ", why,
      left_rank >= 0 ? "; the other members rebuild the data plane without "
                       "it and go on from their last commit"
                     : "; every worker is alive: the members rebuild the data "
                       "plane and go on from their last commit");
  RecoveryLog()->error("job '{}': {}", options_.job_id, reason);
  if (history_.PastResetLimit(options_.reset_limit)) {
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
  if (!recovery_.has_value()) return;  // kRecovering and kShort only
  std::vector<SessionId> members;      // survivors in rank order
  for (const Member& m : ep_.members) {
    if (m.state != proto::MEMBER_STATE_MEMBER || !m.open) continue;
    if (!m.acked) return;  // not yet (OnTick enforces the deadline)
    members.push_back(m.session);
  }
  if (members.empty()) {
    // Nobody holds the job's state: newcomers cannot go on without it.
    if (recovery_->lost.empty() && !recovery_->left.empty()) {
      EndJob(
          false,
          absl::StrCat("every worker left job '", options_.job_id,
                       "' (last: ", absl::StrJoin(recovery_->left, ", "), ")"),
          out);
      return;
    }
    EndJob(true,
           absl::StrCat("every worker of job '", options_.job_id,
                        "' was lost: ", DescribeLost(history_.lost())),
           out, history_.last_lost_worker());
    return;
  }
  const std::vector<SessionId> newcomers =
      Newcomers(RoomFor(static_cast<int>(members.size())));
  if (static_cast<int>(members.size() + newcomers.size()) < options_.min_size) {
    if (phase_ != Phase::kShort) {
      SetPhase(Phase::kShort);
      recovery_->deadline = now + options_.elastic_timeout;
      RecoveryLog()->warn(
          "job '{}': {} workers remain, fewer than the minimum of {} "
          "(--min-np); waiting up to {} (--elastic-timeout) for workers",
          options_.job_id, members.size() + newcomers.size(), options_.min_size,
          Secs(options_.elastic_timeout));
    }
    return;
  }
  std::vector<std::string> joined;
  for (SessionId id : newcomers) {
    joined.push_back(sessions_.at(id).hello.worker_id());
    members.push_back(id);
  }
  const uint64_t ended = ep_.number;
  const std::string what = recovery_->Summary(joined);
  const absl::Duration took = now - recovery_->since;
  // FormEpoch ends the recovery (phase kRunning).
  FormEpoch(ended + 1, members, /*keep_order=*/true,
            recovery_->NextRecord(joined), out);
  RecoveryLog()->warn(
      "epoch {} formed with {} workers {} after epoch {} ended ({})",
      ep_.number, ep_.members.size(), Secs(took), ended, what);
}

void CoordinatorCore::BeginRecovery(absl::Time now) {
  history_.CountReset();
  recovery_.emplace();
  recovery_->since = now;
  recovery_->deadline = now + options_.heartbeat_timeout;
  ep_.negotiator.reset();
  ep_.faults.clear();
  ep_.exchanges.clear();
  SetPhase(Phase::kRecovering);
}

void CoordinatorCore::JudgeRecoveryDeadlines(absl::Time now, Actions& out) {
  // Survivors that did not acknowledge the end of their epoch are lost too;
  // a job short of workers ends.
  if (phase_ == Phase::kRecovering && now >= recovery_->deadline) {
    for (size_t r = 0; r < ep_.members.size(); ++r) {
      if (phase_ != Phase::kRecovering) break;
      const Member& m = ep_.members[r];
      if (m.state != proto::MEMBER_STATE_MEMBER || m.acked) continue;
      FailMember(
          static_cast<int>(r),
          absl::StrCat("did not acknowledge the end of epoch ", ep_.number,
                       " within ", Secs(options_.heartbeat_timeout)),
          out);
    }
  }
  if (phase_ == Phase::kShort && now >= recovery_->deadline) {
    int in = 0;
    for (const Member& m : ep_.members) {
      if (m.state == proto::MEMBER_STATE_MEMBER) ++in;
    }
    EndJob(true,
           absl::StrCat(
               "only ", in, " worker", in == 1 ? "" : "s",
               " remain, fewer than the minimum of ", options_.min_size,
               " (--min-np), and none joined within the elastic "
               "timeout of ",
               Secs(options_.elastic_timeout),
               " (--elastic-timeout); lost: ", DescribeLost(history_.lost())),
           out, history_.last_lost_worker());
  }
}

}  // namespace kolo::coordinator
