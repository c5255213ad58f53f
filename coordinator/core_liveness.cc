// CoordinatorCore (core.h), liveness: the tick (heartbeats to every worker
// that waits or is a member, the deadlines of faults, recoveries and the
// negotiator), and the verdict on silence (a handshake that never completed
// is refused, a waiting worker dropped, a member failed).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "coordinator/core.h"

namespace kolo::coordinator {
namespace {

std::shared_ptr<spdlog::logger> LivenessLog() {
  return GetLogger("coordinator");
}

std::string LivenessSeconds(absl::Duration d) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d));
}

}  // namespace

Actions CoordinatorCore::OnTick(absl::Time now) {
  MutexLock lock(&mu_);
  Actions out;
  if (phase_ == Phase::kEnded) return out;
  if (now >= next_heartbeat_) SendHeartbeats(now, out);
  JudgeFaults(now, out);
  if (phase_ == Phase::kEnded) return out;
  JudgeRecoveryDeadlines(now, out);
  if (phase_ == Phase::kEnded) return out;
  JudgeSilence(now, out);
  MaybeFormEpoch(out);  // a restarted coordinator's settle time
  if (phase_ == Phase::kRunning && ep_.negotiator != nullptr) {
    NegotiatorOutput result;
    ep_.negotiator->Tick(now, result);
    Apply(result, out);
  }
  if (recovery_.has_value()) {
    out.wake_at = std::min(out.wake_at, recovery_->deadline);
  }
  return out;
}

void CoordinatorCore::SendHeartbeats(absl::Time now, Actions& out) {
  next_heartbeat_ = now + options_.heartbeat_interval;
  ++heartbeat_seq_;
  std::vector<SessionId> ids;
  for (const auto& [id, s] : sessions_) {
    if (s.state == State::kWaiting || s.state == State::kMember ||
        s.state == State::kLeft) {
      ids.push_back(id);
    }
  }
  std::sort(ids.begin(), ids.end());
  for (SessionId id : ids) {
    proto::CoordinatorMessage msg;
    msg.mutable_fence()->set_incarnation(options_.incarnation);
    msg.mutable_fence()->set_epoch(FenceOf(sessions_.at(id)));
    msg.mutable_heartbeat()->set_seq(heartbeat_seq_);
    Send(id, std::move(msg), out);
  }
}

void CoordinatorCore::JudgeSilence(absl::Time now, Actions& out) {
  // Silence. Collect first: refusing or failing changes sessions_.
  std::vector<SessionId> silent;
  for (const auto& [id, s] : sessions_) {
    if (s.state != State::kLeft &&
        now - s.last_heard > options_.heartbeat_timeout) {
      silent.push_back(id);
    }
  }
  std::sort(silent.begin(), silent.end());
  for (SessionId id : silent) {
    auto it = sessions_.find(id);
    if (it == sessions_.end()) continue;  // closed by an earlier failure
    Session& s = it->second;
    std::string quiet = LivenessSeconds(now - s.last_heard);
    switch (s.state) {
      case State::kAwaitHello:
      case State::kAwaitProof:
        Refuse(id, proto::Refusal::PROTOCOL_ERROR,
               absl::StrCat("the handshake from ", s.peer,
                            " did not complete within ",
                            LivenessSeconds(options_.heartbeat_timeout),
                            "; check that the worker runs the same kolo build"),
               out);
        break;
      case State::kWaiting: {
        LivenessLog()->info(
            "{} was silent for {} before the epoch formed; dropped",
            Describe(s), quiet);
        std::string msg = absl::StrCat(Describe(s), " was silent for ", quiet,
                                       "; reconnect to join the job");
        out.closes.push_back(
            Actions::Close{id, absl::DeadlineExceededError(msg)});
        sessions_.erase(it);
        break;
      }
      case State::kMember: {
        int rank = s.rank;
        ep_.members[rank].open = false;
        // The silent worker is told too, should it come back.
        FailMember(rank, absl::StrCat("silent for ", quiet), out);
        break;
      }
      case State::kLeft:
        break;
    }
  }
}

}  // namespace kolo::coordinator
