// CoordinatorCore, the elastic side: a lost member ends its epoch, not the
// job; the survivors acknowledge and form the next epoch. See core.h ("Elastic
// jobs") for the class contract.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "coordinator/core.h"

namespace kolo::coordinator {
namespace {

std::shared_ptr<spdlog::logger> Log() { return GetLogger("coordinator"); }

std::string Secs(absl::Duration d) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d));
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
  lost_all_.push_back(lost);
  const std::string who = absl::StrCat("worker ", m.worker_id, " (rank ", rank,
                                       ", host ", m.host_name, ")");
  // Evict it if its stream is still open: a silent worker may come back
  // (SIGCONT, a healed partition) and must learn that it is out.
  if (auto it = sessions_.find(m.session); it != sessions_.end()) {
    const std::string reason = absl::StrCat(
        who, " was evicted from epoch ", ep_.number, " of job '",
        options_.job_id, "': ", cause,
        "; the other workers go on without it (exit; a worker cannot rejoin "
        "the job it was evicted from)");
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
    ++resets_;
    lost_.clear();
    lost_.push_back(lost);
    recovery_since_ = now;
    recovery_deadline_ = now + options_.heartbeat_timeout;
    ep_.negotiator.reset();
    ep_.faults.clear();
    ep_.exchanges.clear();
    phase_ = Phase::kRecovering;
    Log()->error("epoch {} of job '{}' ended: {} {}; the survivors go on",
                 ep_.number, options_.job_id, who, cause);
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
    Log()->error("{} {} while epoch {} of job '{}' was being replaced", who,
                 cause, ep_.number, options_.job_id);
  }
  MaybeFormNextEpoch(now, out);
}

void CoordinatorCore::MaybeFormNextEpoch(absl::Time now, Actions& out) {
  if (phase_ != Phase::kRecovering && phase_ != Phase::kShort) return;
  std::vector<SessionId> survivors;  // in rank order
  for (const Member& m : ep_.members) {
    if (m.state != proto::MEMBER_STATE_MEMBER || !m.open) continue;
    if (!m.acked) return;  // not yet (OnTick enforces the deadline)
    survivors.push_back(m.session);
  }
  if (survivors.empty()) {
    EndJob(true,
           absl::StrCat("every worker of job '", options_.job_id,
                        "' was lost: ", DescribeLost(lost_all_)),
           out, lost_all_.empty() ? "" : lost_all_.back().worker_id());
    return;
  }
  if (static_cast<int>(survivors.size()) < options_.min_size) {
    if (phase_ != Phase::kShort) {
      phase_ = Phase::kShort;
      recovery_deadline_ = now + options_.elastic_timeout;
      Log()->warn(
          "job '{}': {} workers remain, fewer than the minimum of {} "
          "(--min-np); waiting up to {} (--elastic-timeout) for workers",
          options_.job_id, survivors.size(), options_.min_size,
          Secs(options_.elastic_timeout));
    }
    return;
  }
  const uint64_t ended = ep_.number;
  const std::string lost = DescribeLost(lost_);
  FormEpoch(ended + 1, survivors, /*keep_order=*/true, out);
  Log()->warn("epoch {} formed {} after epoch {} ended (lost: {})", ep_.number,
              Secs(now - recovery_since_), ended, lost);
  lost_.clear();
}

}  // namespace kolo::coordinator
