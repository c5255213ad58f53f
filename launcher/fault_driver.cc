#include "launcher/fault_driver.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/log.h"

extern char** environ;

namespace kolo::launcher {
namespace {

std::shared_ptr<spdlog::logger> Log() { return GetLogger("kolorun"); }

int SignalOf(FaultKind kind) {
  switch (kind) {
    case FaultKind::kKill:
      return SIGKILL;
    case FaultKind::kStop:
      return SIGSTOP;
    default:
      return SIGTERM;
  }
}

// Signals the worker's process group (the worker and its children), or the
// process alone when it leads none.
void SignalWorker(pid_t pid, int sig) {
  if (::kill(-pid, sig) != 0) ::kill(pid, sig);
}

}  // namespace

absl::Status RunCommand(const std::vector<std::string>& argv,
                        absl::Duration timeout) {
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  // posix_spawn: kolorun has gRPC threads (no fork without exec).
  const int rc =
      ::posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot run '", absl::StrJoin(argv, " "), "': ", std::strerror(rc)));
  }
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (true) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      return absl::InternalError(
          absl::StrCat("waitpid: ", std::strerror(errno)));
    }
    if (absl::Now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return absl::DeadlineExceededError(
          absl::StrCat("'", absl::StrJoin(argv, " "), "' did not end within ",
                       absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "'", absl::StrJoin(argv, " "), "' failed (status ", status, ")"));
  }
  return absl::OkStatus();
}

FaultDriver::FaultDriver(Options options) : options_(std::move(options)) {
  if (!options_.run) {
    options_.run = [](const std::vector<std::string>& argv) {
      return RunCommand(argv, absl::Seconds(5));
    };
  }
  for (PlannedFault& f : PlanFaults(options_.specs, options_.seed)) {
    FaultRecord r;
    r.by_worker = FiredByWorker(f.spec);
    r.fault = std::move(f);
    records_.push_back(std::move(r));
  }
  // The events file exists before any worker opens it (O_APPEND there).
  const int fd = ::open(options_.events_path.c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
}

std::vector<std::pair<std::string, std::string>> FaultDriver::WorkerEnv()
    const {
  std::vector<PlannedFault> mine;
  for (const FaultRecord& r : records_) {
    if (r.by_worker && r.state == FaultRecord::State::kPending) {
      mine.push_back(r.fault);
    }
  }
  std::vector<std::pair<std::string, std::string>> env = {
      {"KOLO_FAULT_EVENTS", options_.events_path},
      {"KOLO_FAULT_ORIGIN_MS",
       absl::StrCat(absl::ToUnixMillis(options_.origin))},
      {"KOLO_FAULT_PLAN", EncodeWorkerPlan(mine)}};
  for (const FaultRecord& r : records_) {
    if (r.fault.spec.kind == FaultKind::kKillCoordinator &&
        r.fault.spec.duration != absl::InfiniteDuration()) {
      env.emplace_back("KOLO_COORDINATOR_RETURNS", "1");
      break;
    }
  }
  return env;
}

absl::Time FaultDriver::NextDue() const {
  absl::Time due = absl::InfiniteFuture();
  for (const FaultRecord& r : records_) {
    if (r.by_worker || r.state != FaultRecord::State::kPending ||
        r.fault.spec.kind == FaultKind::kRandom) {
      continue;
    }
    due = std::min(due, options_.origin + r.fault.spec.after);
  }
  for (const auto& [pid, c] : to_continue_) due = std::min(due, c.when);
  for (const auto& [i, when] : to_heal_) due = std::min(due, when);
  for (const auto& [i, when] : to_restart_) due = std::min(due, when);
  return due;
}

void FaultDriver::Tick(absl::Time now, const std::vector<LiveWorker>& live) {
  ReadEvents();
  for (FaultRecord& r : records_) {
    if (r.by_worker || r.state != FaultRecord::State::kPending ||
        r.fault.spec.kind == FaultKind::kRandom ||
        now < options_.origin + r.fault.spec.after) {
      continue;
    }
    Fire(r, now, live);
    if (r.state != FaultRecord::State::kPending && options_.on_settled) {
      options_.on_settled(r);
    }
  }
  for (auto it = to_continue_.begin(); it != to_continue_.end();) {
    if (now < it->second.when) {
      ++it;
      continue;
    }
    SignalWorker(it->first, SIGCONT);
    Log()->warn("fault {}: SIGCONT to process {}",
                absl::StrJoin(it->second.faults, ", "), it->first);
    for (FaultRecord& r : records_) {
      if (std::find(it->second.faults.begin(), it->second.faults.end(),
                    r.fault.id) != it->second.faults.end()) {
        r.ended_at = now;
      }
    }
    it = to_continue_.erase(it);
  }
  for (auto it = to_heal_.begin(); it != to_heal_.end();) {
    if (now < it->second) {
      ++it;
      continue;
    }
    FaultRecord& r = records_[it->first];
    absl::Status st = SetLinks(r.fault.spec.target.name, true);
    r.ended_at = now;
    if (!st.ok()) {
      absl::StrAppend(&r.detail, "; healing failed: ", st.message());
    }
    Log()->warn("fault {}: the links of host {} are up again{}", r.fault.id,
                r.fault.spec.target.name,
                st.ok() ? "" : absl::StrCat(" (", st.message(), ")"));
    it = to_heal_.erase(it);
  }
  RestartDue(now);
}

void FaultDriver::RestartDue(absl::Time now) {
  for (auto it = to_restart_.begin(); it != to_restart_.end();) {
    if (now < it->second) {
      ++it;
      continue;
    }
    FaultRecord& r = records_[it->first];
    it = to_restart_.erase(it);
    r.ended_at = now;
    absl::Status st = options_.restart_coordinator
                          ? options_.restart_coordinator()
                          : absl::UnimplementedError("kolorun cannot");
    if (st.ok()) {
      absl::StrAppend(&r.detail, "; a new coordinator at its address ",
                      absl::FormatDuration(now - r.fired_at), " later");
      Log()->warn("fault {}: the coordinator is started again", r.fault.id);
    } else {
      coordinator_gone_ = true;
      absl::StrAppend(&r.detail, "; starting it again failed: ", st.message());
      Log()->error("fault {}: starting the coordinator again failed: {}",
                   r.fault.id, std::string(st.message()));
    }
  }
}

void FaultDriver::Fire(FaultRecord& r, absl::Time now,
                       const std::vector<LiveWorker>& live) {
  const FaultSpec& s = r.fault.spec;
  const std::string text = FaultSpecText(s);
  auto skip = [&](std::string why) {
    r.state = FaultRecord::State::kSkipped;
    r.fired_at = now;
    r.detail = std::move(why);
    Log()->warn("fault {} ({}) skipped: {}", r.fault.id, text, r.detail);
  };
  if (s.kind == FaultKind::kKillCoordinator) {
    if (!to_restart_.empty()) {
      skip(absl::StrCat("the coordinator is down already (fault ",
                        records_[to_restart_.begin()->first].fault.id,
                        " starts it again)"));
      return;
    }
    if (coordinator_gone_) {
      skip("the coordinator was killed for good already");
      return;
    }
    r.state = FaultRecord::State::kFired;
    r.fired_at = now;
    r.detail = "the embedded coordinator stopped serving (no JobEnd)";
    if (options_.job_view) r.epoch = options_.job_view().epoch;
    Log()->warn("fault {}: killing the coordinator{}", r.fault.id,
                s.duration == absl::InfiniteDuration()
                    ? ""
                    : absl::StrCat(", to start it again in ",
                                   absl::FormatDuration(s.duration)));
    if (s.duration == absl::InfiniteDuration()) {
      coordinator_gone_ = true;
    } else {
      to_restart_[static_cast<size_t>(&r - records_.data())] = now + s.duration;
    }
    if (options_.kill_coordinator) options_.kill_coordinator();
    return;
  }
  if (s.kind == FaultKind::kPartition) {
    absl::Status st = SetLinks(s.target.name, false);
    if (!st.ok()) {
      skip(absl::StrCat("cannot cut host ", s.target.name, ": ", st.message()));
      return;
    }
    r.state = FaultRecord::State::kFired;
    r.fired_at = now;
    r.detail = absl::StrCat("the links of network namespace ", s.target.name,
                            " are down");
    Log()->warn("fault {}: {}", r.fault.id, r.detail);
    if (s.duration != absl::InfiniteDuration()) {
      to_heal_[static_cast<size_t>(&r - records_.data())] = now + s.duration;
    }
    return;
  }
  // kill / stop / term by time: find the target process.
  JobView view;
  if (options_.job_view) view = options_.job_view();
  std::string worker;
  if (s.target.kind == FaultTarget::Kind::kWorker) {
    worker = s.target.name;
  } else {
    const int rank = s.target.RankAmong(view.size);
    for (const auto& [id, rk] : view.rank_of) {
      if (rk == rank && rank >= 0) worker = id;
    }
    if (worker.empty()) {
      skip(absl::StrCat(
          "no worker has rank ",
          s.target.kind == FaultTarget::Kind::kRank ? s.target.rank : rank,
          " in epoch ", view.epoch, " (size ", view.size, ")"));
      return;
    }
  }
  if (s.kind == FaultKind::kTerm && r.fault.from_random >= 0 &&
      options_.min_members > 0) {
    int staying = 0;
    for (const auto& [id, rk] : view.rank_of) {
      if (!termed_.contains(id)) ++staying;
    }
    if (termed_.contains(worker) || staying - 1 < options_.min_members) {
      skip(absl::StrCat("a random term of worker ", worker, " would leave ",
                        staying - 1, " member(s), fewer than --min-np ",
                        options_.min_members,
                        " (a leave frees no slot that kolorun refills)"));
      return;
    }
    termed_.insert(worker);
  }
  const LiveWorker* target = nullptr;
  for (const LiveWorker& w : live) {
    if (w.worker_id == worker && w.pid > 0) target = &w;
  }
  if (target == nullptr) {
    skip(absl::StrCat("worker ", worker, " is not running"));
    return;
  }
  r.state = FaultRecord::State::kFired;
  r.fired_at = now;
  r.worker_id = target->worker_id;
  r.incarnation = target->incarnation;
  r.pid = target->pid;
  r.epoch = view.epoch;
  if (auto it = view.rank_of.find(worker); it != view.rank_of.end()) {
    r.rank = it->second;
  }
  const int sig = SignalOf(s.kind);
  SignalWorker(target->pid, sig);
  r.detail =
      absl::StrCat("SIG", ::sigabbrev_np(sig), " to process ", target->pid);
  Log()->warn("fault {} ({}): {} of worker {} (rank {}, host {})", r.fault.id,
              text, r.detail, worker, r.rank, target->host);
  if (s.kind == FaultKind::kStop) ContinueLater(target->pid, now, r);
}

absl::Status FaultDriver::SetLinks(const std::string& host, bool up) {
  // The namespace's links: `ip -n HOST -o link show` lines are
  // "N: NAME[@PEER]: <...> ...".
  std::string listing_path = absl::StrCat(options_.events_path, ".links");
  absl::Status st = options_.run(
      {"sh", "-c",
       absl::StrCat("ip -n '", host, "' -o link show > '", listing_path, "'")});
  if (!st.ok()) return st;
  std::string listing;
  if (FILE* f = std::fopen(listing_path.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) listing.append(buf, n);
    std::fclose(f);
  }
  ::unlink(listing_path.c_str());
  int changed = 0;
  for (absl::string_view line :
       absl::StrSplit(listing, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, ": ");
    if (parts.size() < 2) continue;
    std::string dev(parts[1].substr(0, parts[1].find('@')));
    if (dev == "lo") continue;
    st = options_.run(
        {"ip", "-n", host, "link", "set", "dev", dev, up ? "up" : "down"});
    if (!st.ok()) return st;
    ++changed;
  }
  if (changed == 0) {
    return absl::NotFoundError(
        absl::StrCat("network namespace ", host, " has no link but lo"));
  }
  return absl::OkStatus();
}

void FaultDriver::ReadEvents() {
  const int fd = ::open(options_.events_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[65536];
  while (true) {
    const ssize_t n = ::pread(fd, buf, sizeof(buf), events_offset_);
    if (n <= 0) break;
    events_offset_ += n;
    partial_line_.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  size_t start = 0;
  for (size_t nl; (nl = partial_line_.find('\n', start)) != std::string::npos;
       start = nl + 1) {
    nlohmann::json e = nlohmann::json::parse(
        partial_line_.begin() + static_cast<std::ptrdiff_t>(start),
        partial_line_.begin() + static_cast<std::ptrdiff_t>(nl), nullptr,
        /*allow_exceptions=*/false);
    if (e.is_object()) OnEvent(e);
  }
  partial_line_.erase(0, start);
}

void FaultDriver::OnEvent(const nlohmann::json& e) {
  events_.push_back(e);
  const std::string ev = e.value("ev", "");
  if (ev != "fired" && ev != "skipped" && ev != "ended") return;
  const int id = e.value("fault", -1);
  for (FaultRecord& r : records_) {
    if (r.fault.id != id) continue;
    const absl::Time t = absl::FromUnixMicros(e.value("t_us", int64_t{0}));
    if (ev == "ended") {
      r.ended_at = t;
      return;
    }
    r.state = ev == "fired" ? FaultRecord::State::kFired
                            : FaultRecord::State::kSkipped;
    r.fired_at = t;
    r.worker_id = e.value("worker", "");
    r.incarnation = e.value("inc", 0);
    r.pid = e.value("pid", int64_t{0});
    r.rank = e.value("rank", -1);
    r.epoch = e.value("epoch", uint64_t{0});
    r.at_op = e.value("op", int64_t{-1});
    r.detail = e.value("detail", e.value("why", ""));
    if (ev == "fired" && r.fault.spec.kind == FaultKind::kStop && r.pid > 0) {
      ContinueLater(static_cast<pid_t>(r.pid), t, r);
    }
    return;
  }
}

void FaultDriver::ContinueLater(pid_t pid, absl::Time fired,
                                const FaultRecord& r) {
  // A stop of a process another stop holds: it is continued when the later
  // of the two ends (never, for a stop without `for`), both ending then.
  const absl::Time when = r.fault.spec.duration == absl::InfiniteDuration()
                              ? absl::InfiniteFuture()
                              : fired + r.fault.spec.duration;
  auto [it, added] = to_continue_.try_emplace(pid, Continue{when, {}});
  if (!added) it->second.when = std::max(it->second.when, when);
  it->second.faults.push_back(r.fault.id);
}

void FaultDriver::OnWorkerEnded(const LiveWorker& w, const std::string& what) {
  ends_.push_back(WorkerEnd{w.worker_id, w.incarnation, what, absl::Now()});
  if (w.pid > 0) to_continue_.erase(w.pid);
}

void FaultDriver::Finish(const std::vector<LiveWorker>& live) {
  ReadEvents();
  const absl::Time now = absl::Now();
  for (const auto& [pid, c] : to_continue_) {
    for (const LiveWorker& w : live) {
      if (w.pid == pid) SignalWorker(pid, SIGCONT);
    }
  }
  to_continue_.clear();
  for (const auto& [i, when] : to_heal_) {
    (void)SetLinks(records_[i].fault.spec.target.name, true);
    records_[i].ended_at = now;
  }
  to_heal_.clear();
  for (const auto& [i, when] : to_restart_) {
    absl::StrAppend(&records_[i].detail,
                    "; the job ended before the coordinator was started "
                    "again");
    records_[i].ended_at = now;
  }
  to_restart_.clear();
}

}  // namespace kolo::launcher
