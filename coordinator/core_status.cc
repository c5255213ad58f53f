// CoordinatorCore, the read-only side: Status() for the Status RPC and the
// queries CoordinatorServer's waits use. See core.h for the class contract.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/core.h"

namespace kolo::coordinator {

std::string CoordinatorCore::Metrics() const {
  const proto::StatusReply status = Status();
  CoreStats stats;
  {
    MutexLock lock(&mu_);
    stats = stats_;
  }
  // Rendered outside the mutex: the events wait only for the copy.
  return RenderMetrics(status, stats);
}

proto::StatusReply CoordinatorCore::Status() const {
  MutexLock lock(&mu_);
  absl::Time now = options_.clock();
  proto::StatusReply r;
  r.set_incarnation(options_.incarnation);
  r.set_epoch(ep_.number);
  r.set_job_id(options_.job_id);
  r.set_expected_size(options_.expected_size);
  switch (phase_) {
    case Phase::kForming:
      r.set_phase("forming");
      break;
    case Phase::kRunning:
      r.set_phase("running");
      break;
    case Phase::kRecovering:
      r.set_phase("recovering");
      break;
    case Phase::kShort:
      r.set_phase("short");
      break;
    case Phase::kEnded:
      r.set_phase("ended");
      break;
  }
  r.set_elastic(options_.elastic);
  r.set_min_size(options_.min_size);
  r.set_max_size(options_.max_size);
  history_.AddTo(r);
  r.set_end_reason(end_reason_);
  r.set_failed_worker(failed_worker_);
  if (ep_.negotiator != nullptr) {
    for (proto::PendingTensor& p : ep_.negotiator->Pending(now)) {
      *r.add_pending() = std::move(p);
    }
    r.set_plans(ep_.negotiator->plans_sent());
  }
  for (size_t rank = 0; rank < ep_.members.size(); ++rank) {
    const Member& m = ep_.members[rank];
    proto::WorkerStatus* w = r.add_workers();
    w->set_worker_id(m.worker_id);
    w->set_rank(static_cast<int>(rank));
    w->set_host_name(m.host_name);
    w->set_data_address(m.data_address);
    w->set_state(m.state);
    w->set_millis_since_heard(absl::ToInt64Milliseconds(now - m.last_heard));
    w->set_pid(m.pid);
    w->set_incarnation(m.incarnation);
  }
  std::vector<SessionId> ids;
  for (const auto& [id, s] : sessions_) {
    if (s.rank < 0) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  for (SessionId id : ids) {
    const Session& s = sessions_.at(id);
    proto::WorkerStatus* w = r.add_workers();
    w->set_worker_id(s.hello.worker_id());
    w->set_rank(-1);
    w->set_host_name(s.hello.host_name());
    w->set_data_address(s.hello.data_address());
    w->set_state(s.state == State::kWaiting ? proto::MEMBER_STATE_WAITING
                 : s.state == State::kLeft
                     ? proto::MEMBER_STATE_LEFT
                     : proto::MEMBER_STATE_AUTHENTICATING);
    w->set_millis_since_heard(absl::ToInt64Milliseconds(now - s.last_heard));
    w->set_pid(s.hello.pid());
    w->set_incarnation(s.hello.worker_incarnation());
  }
  return r;
}

absl::StatusOr<SessionId> CoordinatorCore::MemberSession(
    const std::string& worker_id, uint64_t epoch) const {
  MutexLock lock(&mu_);
  if (phase_ != Phase::kRunning) {
    return absl::FailedPreconditionError(
        phase_ == Phase::kEnded     ? "the job has ended"
        : phase_ == Phase::kForming ? "the epoch has not formed yet"
                                    : "the epoch ended; the next one forms");
  }
  if (epoch != ep_.number) {
    return absl::FailedPreconditionError(
        absl::StrCat("fenced: the link is for epoch ", epoch,
                     " but the epoch is ", ep_.number));
  }
  for (const Member& m : ep_.members) {
    if (m.worker_id == worker_id && m.open) return m.session;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "worker ", worker_id, " is not a member of epoch ", ep_.number));
}

uint64_t CoordinatorCore::epoch() const {
  MutexLock lock(&mu_);
  return ep_.number;
}

bool CoordinatorCore::epoch_formed() const {
  MutexLock lock(&mu_);
  return ep_.number > 0;
}

bool CoordinatorCore::every_member_left() const {
  MutexLock lock(&mu_);
  if (ep_.number == 0) return false;
  for (const Member& m : ep_.members) {
    if (m.state == proto::MEMBER_STATE_MEMBER) return false;
  }
  return true;
}

bool CoordinatorCore::ended() const {
  MutexLock lock(&mu_);
  return phase_ == Phase::kEnded;
}

bool CoordinatorCore::ended_in_failure() const {
  MutexLock lock(&mu_);
  return phase_ == Phase::kEnded && end_failure_;
}

std::string CoordinatorCore::failed_worker() const {
  MutexLock lock(&mu_);
  return failed_worker_;
}

std::string CoordinatorCore::end_reason() const {
  MutexLock lock(&mu_);
  return end_reason_;
}

std::string CoordinatorCore::DescribeMissing() const {
  MutexLock lock(&mu_);
  std::vector<SessionId> ids;
  for (const auto& [id, s] : sessions_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> in, handshaking;
  for (SessionId id : ids) {
    const Session& s = sessions_.at(id);
    std::string name = absl::StrCat(
        s.hello.worker_id().empty() ? "?" : s.hello.worker_id(), " (host ",
        s.hello.host_name().empty() ? "?" : s.hello.host_name(), ")");
    if (s.state == State::kWaiting || s.state == State::kMember) {
      in.push_back(name);
    } else if (s.state != State::kLeft) {
      handshaking.push_back(name);
    }
  }
  int missing = options_.expected_size - static_cast<int>(in.size());
  std::string out = absl::StrCat(
      "waiting for ", std::max(missing, 0), " of ", options_.expected_size,
      " workers; in: ", in.empty() ? "none" : absl::StrJoin(in, ", "));
  if (!handshaking.empty()) {
    absl::StrAppend(&out, "; handshaking: ", absl::StrJoin(handshaking, ", "));
  }
  return out;
}

std::string CoordinatorCore::DescribeStillIn() const {
  MutexLock lock(&mu_);
  std::vector<std::string> in;
  for (size_t r = 0; r < ep_.members.size(); ++r) {
    if (ep_.members[r].state == proto::MEMBER_STATE_MEMBER) {
      in.push_back(absl::StrCat(ep_.members[r].worker_id, " (rank ", r,
                                ", host ", ep_.members[r].host_name, ")"));
    }
  }
  return in.empty() ? std::string("none") : absl::StrJoin(in, ", ");
}

}  // namespace kolo::coordinator
