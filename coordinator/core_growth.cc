// CoordinatorCore, elastic growth: workers join and leave a running job at
// membership checks (a check's response is withheld and the epoch ends with
// a planned EpochAborted when newcomers wait within max_size or members
// leave), and a newcomer with a member's worker id and a higher incarnation
// replaces it. See core.h ("Elastic growth") for the class contract; the
// recovery that follows the end of an epoch is in recovery.cc.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "coordinator/core.h"

namespace kolo::coordinator {
namespace {

std::shared_ptr<spdlog::logger> GrowthLog() { return GetLogger("coordinator"); }

}  // namespace

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
  std::vector<std::string> left;
  for (int rank : leavers) {
    Member& m = ep_.members[rank];
    m.state = proto::MEMBER_STATE_LEFT;
    ab->add_leaving(m.worker_id);
    left.push_back(m.worker_id);
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
  recovery_->left = std::move(left);
  GrowthLog()->warn("job '{}': {}", options_.job_id, ab->reason());
  if (history_.PastResetLimit(options_.reset_limit)) {
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
        std::find(recovery_->left.begin(), recovery_->left.end(),
                  m.worker_id) != recovery_->left.end();
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
    GrowthLog()->warn("worker {} (incarnation {}) waiting to join {}",
                      other.hello.worker_id(), theirs, cause);
    out.closes.push_back(
        Actions::Close{other_id, absl::FailedPreconditionError(cause)});
    sessions_.erase(other_id);
  }
  return true;
}

}  // namespace kolo::coordinator
