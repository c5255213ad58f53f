#include "worker_lib/fault_hook.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "allreduce/data_plane.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/unique_fd.h"
#include "nlohmann/json.hpp"
#include "worker_lib/timeline.h"

namespace kolo::worker::faults {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto* const logger =
      new std::shared_ptr<spdlog::logger>(GetLogger("faults"));
  return *logger;
}

struct Entry {
  PlannedFault fault;
  enum class State { kPending, kActive, kDone } state = State::kPending;
  absl::Time active_until = absl::InfiniteFuture();
};

class Hook {
 public:
  absl::Status Arm(const HookConfig& c) {
    net::UniqueFd fd(::open(c.events_path.c_str(),
                            O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600));
    if (!fd.valid()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot open the fault events file ", c.events_path,
                       ": ", std::strerror(errno)));
    }
    MutexLock lock(&mu_);
    config_ = c;
    fd_ = std::move(fd);
    entries_.clear();
    for (const PlannedFault& f : c.plan) {
      Entry e;
      e.fault = f;
      entries_.push_back(std::move(e));
    }
    ops_ = 0;
    ops_at_commit_ = 0;
    Emit({{"ev", "armed"}, {"faults", entries_.size()}});
    g_armed.store(true, std::memory_order_relaxed);
    Log()->info("fault hook armed: {} fault(s) this worker may fire",
                entries_.size());
    return absl::OkStatus();
  }

  void Disarm() {
    g_armed.store(false, std::memory_order_relaxed);
    MutexLock lock(&mu_);
    fd_ = net::UniqueFd();
    entries_.clear();
  }

  void BeforePlan(const PlanPoint& at) {
    absl::Duration hold = absl::ZeroDuration();
    {
      MutexLock lock(&mu_);
      if (!fd_.valid()) return;
      const absl::Time now = absl::Now();
      EndExpiredLocked(now);
      for (Entry& e : entries_) {
        if (e.state == Entry::State::kPending && Due(e, at, now)) {
          FireLocked(e, at, now);
        }
        if (e.state == Entry::State::kActive &&
            e.fault.spec.kind == FaultKind::kDelay) {
          // Held back no longer than the delay's window lasts.
          hold += std::min(absl::Milliseconds(e.fault.spec.delay_ms),
                           e.active_until - now);
        }
      }
    }
    SleepAndEnd(hold);
  }

  void AfterPlan(const PlanPoint& at, int completed, int failed,
                 absl::Duration took) {
    absl::Duration extra = absl::ZeroDuration();
    {
      MutexLock lock(&mu_);
      if (!fd_.valid()) return;
      ops_ += completed;
      if (completed > 0 && first_op_epoch_ == at.epoch) {
        first_op_epoch_ = 0;
        const absl::Time now = absl::Now();
        Emit({{"ev", "first_op"}, {"epoch", at.epoch}, {"ops", ops_}});
        if (auto t = timeline_.lock(); t != nullptr && at.epoch > 1) {
          t->Marker(
              absl::StrCat("recovered: first collective of epoch ", at.epoch),
              now, {{"rank", absl::StrCat(at.rank)}});
        }
      }
      extra = SlowExtraLocked(failed, took, absl::Now());
    }
    SleepAndEnd(extra);
  }

  void OnEpoch(uint64_t epoch, int rank, int size) {
    MutexLock lock(&mu_);
    if (!fd_.valid()) return;
    first_op_epoch_ = epoch;
    Emit({{"ev", "epoch"}, {"epoch", epoch}, {"rank", rank}, {"size", size}});
  }

  void OnCommit(int64_t) {
    MutexLock lock(&mu_);
    ops_at_commit_ = ops_;
  }

  void OnRollback(int64_t commit) {
    MutexLock lock(&mu_);
    if (!fd_.valid()) return;
    Emit({{"ev", "rollback"},
          {"commit", commit},
          {"ops_discarded", ops_ - ops_at_commit_}});
    if (auto t = timeline_.lock(); t != nullptr) {
      t->Marker(absl::StrCat("rollback to commit ", commit), absl::Now(),
                {{"ops_discarded", absl::StrCat(ops_ - ops_at_commit_)}});
    }
    ops_at_commit_ = ops_;
  }

  void SetTimeline(std::weak_ptr<Timeline> t) {
    MutexLock lock(&mu_);
    timeline_ = std::move(t);
  }

 private:
  // Ends the delays and slowdowns whose window ran out by `now`; "ended"
  // carries the time it ran out (the fault did nothing after it).
  void EndExpiredLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (Entry& e : entries_) {
      if (e.state != Entry::State::kActive || now < e.active_until) continue;
      e.state = Entry::State::kDone;
      Emit({{"ev", "ended"},
            {"fault", e.fault.id},
            {"t_us", absl::ToUnixMicros(e.active_until)}});
      Mark(absl::StrCat("fault ", e.fault.id, " ended"), e.active_until, e);
    }
  }

  // The sleep of the active slowdowns after a plan that took `took`: (the
  // product of their factors - 1) x took, and none after a plan whose
  // collectives failed (its time went to waiting for a peer that was gone,
  // not to work); never past the end of the last window.
  absl::Duration SlowExtraLocked(int failed, absl::Duration took,
                                 absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    double factor = 1;
    absl::Time until = now;
    for (const Entry& e : entries_) {
      if (e.state == Entry::State::kActive &&
          e.fault.spec.kind == FaultKind::kSlow) {
        factor *= e.fault.spec.factor;
        until = std::max(until, e.active_until);
      }
    }
    if (failed > 0 || factor <= 1) return absl::ZeroDuration();
    return std::min((factor - 1) * took, until - now);
  }

  // Sleeps `d` (a delay or a slowdown: the fault itself), then ends what
  // ran out meanwhile, so that "ended" is written when it happens.
  void SleepAndEnd(absl::Duration d) {
    if (d <= absl::ZeroDuration()) return;
    absl::SleepFor(d);
    MutexLock lock(&mu_);
    EndExpiredLocked(absl::Now());
  }

  bool Targets(const FaultSpec& s, const PlanPoint& at) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    switch (s.target.kind) {
      case FaultTarget::Kind::kWorker:
        return s.target.name == config_.worker_id;
      case FaultTarget::Kind::kRank:
      case FaultTarget::Kind::kPick:
        return s.target.RankAmong(at.size) == at.rank;
      default:
        return false;
    }
  }

  bool Due(const Entry& e, const PlanPoint& at, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const FaultSpec& s = e.fault.spec;
    if (s.at_op >= 0) {
      if (ops_ < s.at_op) return false;
    } else if (now < config_.origin + s.after) {
      return false;
    }
    return Targets(s, at);
  }

  // Claims the fault for this process (once per job): an O_EXCL file.
  bool Claim(int id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::string path = absl::StrCat(config_.events_path, ".fired.", id);
    const int fd =
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    ::close(fd);
    return true;
  }

  void FireLocked(Entry& e, const PlanPoint& at, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const FaultSpec& s = e.fault.spec;
    if (!Claim(e.fault.id)) {  // another process fired it
      e.state = Entry::State::kDone;
      return;
    }
    nlohmann::json fired = {{"ev", "fired"},
                            {"fault", e.fault.id},
                            {"kind", std::string(FaultKindName(s.kind))},
                            {"rank", at.rank},
                            {"epoch", at.epoch},
                            {"op", ops_}};
    e.state = Entry::State::kDone;
    switch (s.kind) {
      case FaultKind::kDelay:
      case FaultKind::kSlow:
        e.state = Entry::State::kActive;
        e.active_until = s.duration == absl::InfiniteDuration()
                             ? absl::InfiniteFuture()
                             : now + s.duration;
        break;
      case FaultKind::kDrop: {
        if (at.plane == nullptr || s.peer == at.rank ||
            (s.peer >= 0 && s.peer >= at.size)) {
          Emit({{"ev", "skipped"},
                {"fault", e.fault.id},
                {"why", absl::StrCat("no peer rank ", s.peer, " of rank ",
                                     at.rank, " in a job of size ", at.size)}});
          return;
        }
        absl::Status cut = at.plane->CutForFault(s.peer);
        fired["detail"] = cut.ok() ? std::string("connection shut down")
                                   : std::string(cut.message());
        break;
      }
      default:
        break;
    }
    Log()->warn(
        "fault {} fires here (rank {}, epoch {}, after {} collectives): "
        "{}",
        e.fault.id, at.rank, at.epoch, ops_, FaultSpecText(s));
    Emit(std::move(fired));
    Mark(absl::StrCat("fault ", e.fault.id, ": ", FaultKindName(s.kind)), now,
         e);
    switch (s.kind) {
      case FaultKind::kKill:
        ::kill(::getpid(), SIGKILL);
        break;
      case FaultKind::kStop:
        ::kill(::getpid(), SIGSTOP);  // kolorun sends SIGCONT after `for`
        break;
      case FaultKind::kTerm:
        ::kill(::getpid(), SIGTERM);
        break;
      default:
        break;
    }
  }

  void Mark(const std::string& name, absl::Time at, const Entry& e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (auto t = timeline_.lock(); t != nullptr) {
      t->Marker(name, at, {{"spec", FaultSpecText(e.fault.spec)}});
    }
  }

  void Emit(nlohmann::json line) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!fd_.valid()) return;
    line["worker"] = config_.worker_id;
    line["inc"] = config_.incarnation;
    line["pid"] = static_cast<int64_t>(::getpid());
    if (!line.contains("t_us")) line["t_us"] = absl::ToUnixMicros(absl::Now());
    const std::string text = line.dump() + "\n";
    // One write: O_APPEND keeps lines of several processes whole.
    if (::write(fd_.get(), text.data(), text.size()) !=
        static_cast<ssize_t>(text.size())) {
      Log()->warn("cannot write the fault events file: {}",
                  std::strerror(errno));
    }
  }

  Mutex mu_;
  HookConfig config_ ABSL_GUARDED_BY(mu_);
  net::UniqueFd fd_ ABSL_GUARDED_BY(mu_);
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);
  int64_t ops_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t ops_at_commit_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t first_op_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::weak_ptr<Timeline> timeline_ ABSL_GUARDED_BY(mu_);
};

Hook& TheHook() {
  static Hook* const hook = new Hook();  // never destroyed: signal-like
  return *hook;
}

}  // namespace

absl::Status Arm(const HookConfig& config) { return TheHook().Arm(config); }
void Disarm() { TheHook().Disarm(); }
void BeforePlan(const PlanPoint& at) { TheHook().BeforePlan(at); }
void AfterPlan(const PlanPoint& at, int completed, int failed,
               absl::Duration took) {
  TheHook().AfterPlan(at, completed, failed, took);
}
void OnEpoch(uint64_t epoch, int rank, int size) {
  if (Armed()) TheHook().OnEpoch(epoch, rank, size);
}
void OnCommit(int64_t commits) {
  if (Armed()) TheHook().OnCommit(commits);
}
void OnRollback(int64_t commit) {
  if (Armed()) TheHook().OnRollback(commit);
}
void SetTimeline(std::weak_ptr<Timeline> timeline) {
  TheHook().SetTimeline(std::move(timeline));
}

}  // namespace kolo::worker::faults
