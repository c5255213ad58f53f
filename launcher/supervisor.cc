#include "launcher/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "launcher/guard.h"
#include "launcher/line_prefixer.h"
#include "launcher/supervisor_internal.h"

namespace kolo::launcher {
namespace {

constexpr absl::Duration kProbeInterval = absl::Milliseconds(250);
// After the guards' grace, kolorun's own SIGKILL; then it stops waiting.
constexpr absl::Duration kKillMargin = absl::Seconds(2);
constexpr absl::Duration kGiveUp = absl::Seconds(3);
// How long kolorun prefers a worker's own exit status over the
// coordinator's account of the same failure.
constexpr absl::Duration kCoordinatorFailureDelay = absl::Seconds(1);
// How long kolorun waits for the coordinator's verdict after a worker of a
// running job ended non-zero (it usually ended because of that verdict).
constexpr absl::Duration kVerdictWait = absl::Seconds(2);
// Output still buffered in pipes after the last guard ended.
constexpr absl::Duration kDrain = absl::Seconds(1);

}  // namespace

using supervisor_internal::SignalName;
using supervisor_internal::WriteAll;

Supervisor::Supervisor(SupervisorOptions options,
                       std::vector<WorkerLaunch> workers,
                       CoordinatorProbe probe)
    : options_(std::move(options)), probe_(std::move(probe)) {
  for (WorkerLaunch& l : workers) {
    auto w = std::make_unique<Worker>();
    MakePrefixers(*w, l.plan.rank, /*append=*/false);
    w->plan = std::move(l.plan);
    w->spec = std::move(l.spec);
    workers_.push_back(std::move(w));
  }
}

void Supervisor::MakePrefixers(Worker& w, int number, bool append) {
  int i = 0;
  for (const char* stream : {"stdout", "stderr"}) {
    LinePrefixer::Options po;
    po.timestamp = options_.prefix_timestamp;
    if (!options_.output_dir.empty()) {
      absl::StatusOr<int> fd =
          OpenRankOutput(options_.output_dir, number, stream, append);
      if (fd.ok()) {
        po.copy_fd = *fd;
      } else {
        GetLogger("kolorun")->warn("--output-filename: {}",
                                   std::string(fd.status().message()));
      }
    }
    w.prefixers[i++] =
        std::make_unique<LinePrefixer>(number, stream, std::move(po));
  }
}

Supervisor::Supervisor(SupervisorOptions options, ElasticSetup elastic,
                       CoordinatorProbe probe)
    : options_(std::move(options)), probe_(std::move(probe)) {
  options_.elastic = true;
  elastic_ = std::make_unique<ElasticSetup>(std::move(elastic));
  slots_ = std::make_unique<SlotTable>(elastic_->slots, elastic_->clock);
  slots_->SetHosts(elastic_->hosts);
  slots_->Want(elastic_->initial_workers);
  short_start_ = elastic_->initial_workers < elastic_->min_workers;
}

Supervisor::~Supervisor() {
  for (auto& w : workers_) {
    for (int& fd : w->fds) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }
  if (signal_fd_ >= 0) ::close(signal_fd_);
}

std::string Supervisor::Describe(const Worker& w) const {
  if (w.plan.incarnation > 0) {
    return absl::StrCat("worker ", w.plan.worker_id, " (rank ", w.plan.rank,
                        ", host ", w.plan.host, ", incarnation ",
                        w.plan.incarnation, ")");
  }
  return absl::StrCat("worker ", w.plan.worker_id, " (rank ", w.plan.rank,
                      ", host ", w.plan.host, ")");
}

std::vector<LiveWorker> Supervisor::Live() const {
  std::vector<LiveWorker> live;
  for (const auto& w : workers_) {
    if (w->guard <= 0 || w->reaped || w->ended) continue;
    live.push_back(LiveWorker{w->plan.worker_id, w->plan.incarnation,
                              w->plan.host, w->report.worker_pid});
  }
  return live;
}

int Supervisor::LiveGuards() const {
  int n = 0;
  for (const auto& w : workers_) n += (w->guard > 0 && !w->reaped) ? 1 : 0;
  return n;
}

bool Supervisor::Spawn(Worker& w) {
  absl::StatusOr<GuardProcess> g = SpawnGuard(w.spec, options_.self_exe);
  if (!g.ok()) {
    BeginTermination(1, absl::StrCat("kolorun: cannot start ", Describe(w),
                                     ": ", g.status().message()));
    return false;
  }
  w.guard = g->pid;
  w.fds[0] = g->stdout_fd;
  w.fds[1] = g->stderr_fd;
  w.fds[2] = g->status_fd;
  return true;
}

void Supervisor::SpawnAll() {
  if (elastic_ != nullptr) {
    SpawnReady();
    return;
  }
  for (auto& w : workers_) {
    if (terminating_ || !Spawn(*w)) return;
  }
}

bool Supervisor::OpenSignalFd() {
  sigset_t handled;
  sigemptyset(&handled);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&handled, s);
  signal_fd_ = ::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd_ < 0) {
    WriteAll(2,
             absl::StrCat("kolorun: signalfd: ", std::strerror(errno), "\n"));
    return false;
  }
  return true;
}

bool Supervisor::Ended(absl::Time now, absl::Time& drain_until) {
  if (elastic_ != nullptr) {
    // Workers that ended and whose output is drained are done with.
    std::erase_if(workers_, [this](const std::unique_ptr<Worker>& w) {
      return w->ended && (w->guard <= 0 || w->reaped) && w->fds[0] < 0 &&
             w->fds[1] < 0 && w->fds[2] < 0 && w.get() != failed_first_;
    });
  }
  if (LiveGuards() == 0 && !ReplacementsPending() && !WaitingForMinimum()) {
    // A failure still waiting for the coordinator's verdict ends now.
    if (failed_first_ != nullptr && !terminating_) Tick(now);
    if (drain_until == absl::InfiniteFuture()) drain_until = now + kDrain;
    bool open = false;
    for (auto& w : workers_) open = open || w->fds[0] >= 0 || w->fds[1] >= 0;
    if (!open || now >= drain_until) return true;
  }
  if (now >= give_up_at_) {
    WriteAll(2, absl::StrCat(
                    "kolorun: ", LiveGuards(),
                    " worker guard(s) did not end after SIGKILL; giving up\n"));
    return true;
  }
  return false;
}

void Supervisor::PollOnce(std::vector<pollfd>& pfds,
                          std::vector<std::pair<Worker*, int>>& owners) {
  pfds.clear();
  owners.clear();
  pfds.push_back({signal_fd_, POLLIN, 0});
  owners.emplace_back(nullptr, -1);
  for (auto& w : workers_) {
    for (int i = 0; i < 3; ++i) {
      if (w->fds[i] < 0) continue;
      pfds.push_back({w->fds[i], POLLIN, 0});
      owners.emplace_back(w.get(), i);
    }
  }
  const size_t worker_fds_end = pfds.size();
  if (discovery_run_ != nullptr) {
    for (int fd : discovery_run_->fds()) {
      pfds.push_back({fd, POLLIN, 0});
      owners.emplace_back(nullptr, -1);
    }
  }
  absl::Duration wait = kProbeInterval;
  if (options_.next_due) {
    wait = std::clamp(options_.next_due() - absl::Now(), absl::Milliseconds(1),
                      kProbeInterval);
  }
  ::poll(pfds.data(), pfds.size(),
         static_cast<int>(absl::ToInt64Milliseconds(wait)));
  if (pfds[0].revents != 0) HandleSignals();
  for (size_t i = 1; i < worker_fds_end; ++i) {
    if (pfds[i].revents != 0) ReadFd(*owners[i].first, owners[i].second);
  }
  ReapGuards();
  if (discovery_run_ != nullptr && discovery_run_->Poll(absl::Now()))
    OnDiscovery();
  Tick(absl::Now());
  if (options_.on_tick) options_.on_tick(absl::Now(), Live());
}

int Supervisor::Conclude() {
  for (auto& w : workers_) {
    for (int i = 0; i < 2; ++i) WriteAll(i + 1, w->prefixers[i]->Finish());
  }
  // --graceful-term: workers that did not leave cleanly.
  if (exit_code_ == 0 && !terminating_ && !drain_unclean_.empty()) {
    failure_reason_ =
        absl::StrCat("after SIGTERM (--graceful-term), ", drain_unclean_.size(),
                     " worker(s) did not leave cleanly: ",
                     absl::StrJoin(drain_unclean_, "; "));
    WriteAll(2, absl::StrCat("kolorun: ", failure_reason_, "\n"));
    return 128 + SIGTERM;
  }
  // Every worker exited 0, but the coordinator ended the job in failure (a
  // stall shutdown, say, whose errors the workers caught): the job failed.
  if (exit_code_ == 0 && !terminating_ && probe_) {
    CoordinatorView view = probe_();
    if (view.phase == CoordinatorView::Phase::kEndedFailure) {
      failure_reason_ = view.reason;
      WriteAll(2, absl::StrCat("kolorun: the coordinator ended the job: ",
                               view.reason, "\n"));
      return 1;
    }
    // Elastic: workers were lost and the job did not end in order.
    if (!elastic_lost_.empty() &&
        view.phase != CoordinatorView::Phase::kEndedOk) {
      WriteAll(2, absl::StrCat("kolorun: every worker ended before the job "
                               "ended in order; lost: ",
                               absl::StrJoin(elastic_lost_, "; "), "\n"));
      return 1;
    }
  }
  return exit_code_;
}

int Supervisor::Run() {
  if (!OpenSignalFd()) return 1;
  start_ = absl::Now();
  next_probe_ = start_;
  if (elastic_ != nullptr && !elastic_->discovery_script.empty())
    next_discovery_ = start_ + elastic_->discovery_interval;
  SpawnAll();

  absl::Time drain_until = absl::InfiniteFuture();
  std::vector<pollfd> pfds;
  std::vector<std::pair<Worker*, int>> owners;
  while (!Ended(absl::Now(), drain_until)) PollOnce(pfds, owners);
  return Conclude();
}

void Supervisor::HandleSignals() {
  signalfd_siginfo info;
  while (::read(signal_fd_, &info, sizeof(info)) == sizeof(info)) {
    int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) continue;  // ReapGuards runs on every turn
    if (sig == SIGTERM && elastic_ != nullptr && elastic_->graceful_term &&
        !draining_ && !terminating_) {
      BeginGracefulTerm();
      continue;
    }
    if (terminating_) {
      if (sig == SIGINT && !killed_) {
        WriteAll(2, "kolorun: second interrupt: killing every worker now\n");
        KillEverything();
      }
      continue;
    }
    failure_reason_ =
        absl::StrCat("the job was stopped by the launcher (kolorun received ",
                     SignalName(sig), ")");
    BeginTermination(128 + sig,
                     absl::StrCat("kolorun: received ", SignalName(sig),
                                  "; stopping ", LiveGuards(), " worker(s)"));
  }
}

void Supervisor::ReadFd(Worker& w, int which) {
  char buf[65536];
  while (w.fds[which] >= 0) {
    ssize_t n = ::read(w.fds[which], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {  // EOF or error
      ::close(w.fds[which]);
      w.fds[which] = -1;
      if (which < 2) WriteAll(which + 1, w.prefixers[which]->Finish());
      return;
    }
    absl::string_view data(buf, static_cast<size_t>(n));
    if (which < 2) {
      WriteAll(which + 1, w.prefixers[which]->Append(data));
    } else {
      w.status_text.append(data.data(), data.size());
      size_t last_nl = w.status_text.rfind('\n');
      if (last_nl != std::string::npos) {
        ParseGuardRecords(w.status_text.substr(0, last_nl + 1), &w.report);
        w.status_text.erase(0, last_nl + 1);
        if (w.report.ended) OnWorkerEnded(w);
      }
    }
  }
}

void Supervisor::ReapGuards() {
  // By index: an elastic replacement may be appended meanwhile.
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker* w = workers_[i].get();
    if (w->guard <= 0 || w->reaped) continue;
    int status = 0;
    if (::waitpid(w->guard, &status, WNOHANG) != w->guard) continue;
    w->reaped = true;
    w->guard_status = status;
    if (w->fds[2] >= 0) ReadFd(*w, 2);  // the guard's last records
    // A guard killed before its worker ended left the worker's group alive
    // (the worker's pid is still taken then: it cannot name another group).
    if (!w->report.ended && w->report.worker_pid > 0)
      ::kill(-w->report.worker_pid, SIGKILL);
    OnWorkerEnded(*w);
  }
}

void Supervisor::OnWorkerEnded(Worker& w) {
  if (w.ended) return;
  w.ended = true;
  bool exited;
  int code = 0, sig = 0;
  if (w.report.ended) {
    exited = w.report.exited;
    code = w.report.code;
    sig = w.report.signal;
  } else if (WIFEXITED(w.guard_status)) {  // no record: the guard's own status
    exited = true;
    code = WEXITSTATUS(w.guard_status);
  } else {
    exited = false;
    sig = WTERMSIG(w.guard_status);
  }
  auto log = GetLogger("kolorun");
  const bool in_table = elastic_ != nullptr && w.slot >= 0;
  if (options_.on_worker_end) {
    options_.on_worker_end(LiveWorker{w.plan.worker_id, w.plan.incarnation,
                                      w.plan.host, w.report.worker_pid},
                           exited ? absl::StrCat("exited with code ", code)
                                  : absl::StrCat("was killed by signal ", sig,
                                                 " (", SignalName(sig), ")"));
  }
  if (exited && code == 0) {
    log->info("{} exited with code 0{}", Describe(w),
              w.asked_to_leave ? " (it left as asked)" : "");
    if (in_table) {
      slots_->Ended(w.slot, w.asked_to_leave ? WorkerEnd::kStopped
                                             : WorkerEnd::kSucceeded);
    }
    return;
  }
  std::string what = exited ? absl::StrCat("exited with code ", code)
                            : absl::StrCat("was killed by signal ", sig, " (",
                                           SignalName(sig), ")");
  if (terminating_ || w.evicted_killed) {
    log->info("{} {} {}", Describe(w), what,
              w.evicted_killed ? "after its eviction (not a failure)"
                               : "while the job was stopping");
    if (in_table) slots_->Ended(w.slot, WorkerEnd::kStopped);
    return;
  }
  if (in_table && w.asked_to_leave) {
    // kolorun stopped it (its host left, --graceful-term): a leave.
    log->warn("{} {} after kolorun asked it to leave", Describe(w), what);
    slots_->Ended(w.slot, WorkerEnd::kStopped);
    if (draining_)
      drain_unclean_.push_back(absl::StrCat(Describe(w), " ", what));
    return;
  }
  w.failed_code = exited ? code : 128 + sig;
  w.failed_what = what;
  if (options_.elastic && !epoch_formed_ && probe_ &&
      probe_().phase != CoordinatorView::Phase::kForming) {
    epoch_formed_ = true;
  }
  if (options_.elastic && epoch_formed_) {
    elastic_lost_.push_back(absl::StrCat(Describe(w), " ", what));
    const bool job_over = LogElasticFailure(w, what);
    if (in_table) {
      // A job the coordinator has ended gets no replacement.
      if (job_over) StopGrowth();
      EndDecision d = slots_->Ended(w.slot, WorkerEnd::kFailed);
      if (!d.message.empty() && !growth_over_) log->warn("{}", d.message);
      SpawnReady();
    }
    if (LiveGuards() > 0 || ReplacementsPending()) return;
    // The last worker is gone and none is due: the coordinator's verdict,
    // when it has one, is the job's.
    if (in_table && probe_) {
      CoordinatorView view = probe_();
      if (view.phase == CoordinatorView::Phase::kEndedFailure) {
        failure_reason_ = view.reason;
        BeginTermination(
            1,
            absl::StrCat("kolorun: the coordinator ended the job: ",
                         view.reason),
            view.failed_worker);
        return;
      }
    }
  }
  if (failed_first_ != nullptr) return;  // already waiting for the verdict
  failed_first_ = &w;
  CoordinatorView view;
  if (probe_) view = probe_();
  // Only a running job can still bring a verdict.
  if (view.phase != CoordinatorView::Phase::kRunning || LiveGuards() == 0) {
    ConcludeFailure(w, view);
    return;
  }
  verdict_by_ = absl::Now() + kVerdictWait;  // Tick concludes
}

bool Supervisor::LogElasticFailure(const Worker& w, const std::string& what) {
  // The coordinator ends its epoch and the survivors go on -- unless the
  // job is over (the coordinator ended it, or is gone): then the workers
  // end one after the other, and that is said once.
  auto log = GetLogger("kolorun");
  CoordinatorView over;
  if (probe_) over = probe_();
  const bool job_over = over.phase == CoordinatorView::Phase::kEndedOk ||
                        over.phase == CoordinatorView::Phase::kEndedFailure;
  if (!job_over) {
    log->warn("{} {}; elastic job: the survivors go on", Describe(w), what);
  } else if (!job_over_said_) {
    job_over_said_ = true;
    log->warn(
        "{} {}; the coordinator has ended the job{}: no worker is "
        "replaced",
        Describe(w), what,
        over.reason.empty() ? "" : absl::StrCat(" (", over.reason, ")"));
  } else {
    log->info("{} {}", Describe(w), what);
  }
  return job_over;
}

void Supervisor::ConcludeFailure(Worker& w, const CoordinatorView& view) {
  Worker* blamed = nullptr;
  if (view.phase == CoordinatorView::Phase::kEndedFailure &&
      !view.failed_worker.empty() && view.failed_worker != w.plan.worker_id) {
    for (auto& other : workers_) {
      if (other->plan.worker_id == view.failed_worker) blamed = other.get();
    }
  }
  if (blamed == nullptr) {
    failure_reason_ = absl::StrCat(Describe(w), " ", w.failed_what);
    BeginTermination(w.failed_code, absl::StrCat("kolorun: ", failure_reason_),
                     w.plan.worker_id);
    return;
  }
  // The coordinator blames another worker: w ended because of it.
  GetLogger("kolorun")->info(
      "{} {}: a consequence of the coordinator's verdict", Describe(w),
      w.failed_what);
  failure_reason_ = view.reason;
  BeginTermination(
      blamed->failed_code != 0 ? blamed->failed_code : 1,
      absl::StrCat("kolorun: the coordinator ended the job: ", view.reason,
                   " (", Describe(w), " ", w.failed_what, " as a result)"),
      blamed->plan.worker_id);
}

void Supervisor::Tick(absl::Time now) {
  if (draining_ && !terminating_ && now >= drain_deadline_) {
    failure_reason_ =
        absl::StrCat(LiveGuards(), " worker(s) did not leave within ",
                     absl::FormatDuration(elastic_->graceful_timeout),
                     " of SIGTERM (--graceful-term)");
    BeginTermination(128 + SIGTERM, absl::StrCat("kolorun: ", failure_reason_,
                                                 "; stopping them"));
  }
  for (auto& w : workers_) {
    if (w->ended || w->reaped || w->guard <= 0 || w->stop_sent ||
        now < w->leave_by) {
      continue;
    }
    GetLogger("kolorun")->warn(
        "{} did not leave within {} of SIGTERM (its host left); stopping it",
        Describe(*w), absl::FormatDuration(elastic_->graceful_timeout));
    w->stop_sent = true;
    ::kill(w->guard, SIGTERM);
  }
  if (terminating_) {
    if (!killed_ && now >= kill_at_) {
      WriteAll(2, absl::StrCat("kolorun: ", LiveGuards(),
                               " worker(s) still running ",
                               absl::FormatDuration(kGuardGrace + kKillMargin),
                               " after SIGTERM; sending SIGKILL\n"));
      KillEverything();
    }
    return;
  }
  if (failed_first_ != nullptr) {
    CoordinatorView view = probe_();
    if (view.phase != CoordinatorView::Phase::kRunning || now >= verdict_by_ ||
        LiveGuards() == 0) {
      ConcludeFailure(*failed_first_, view);
    }
    return;
  }
  if (probe_ && now >= next_probe_) {
    next_probe_ = now + kProbeInterval;
    CheckCoordinator(now);
  }
  if (elastic_ != nullptr && !terminating_) {
    if (discovery_run_ == nullptr && now >= next_discovery_ && !draining_ &&
        !growth_over_) {
      StartDiscovery(now);
    }
    SpawnReady();  // cooldowns that ended, slots wanted before the epoch
  }
}

void Supervisor::CheckCoordinator(absl::Time now) {
  CoordinatorView view = probe_();
  if (view.phase != CoordinatorView::Phase::kForming) epoch_formed_ = true;
  if (view.phase == CoordinatorView::Phase::kEndedOk ||
      view.phase == CoordinatorView::Phase::kEndedFailure) {
    StopGrowth();
    EndEvicted(view);
  }
  if (view.phase == CoordinatorView::Phase::kEndedFailure) {
    if (coordinator_failure_seen_ == absl::InfiniteFuture())
      coordinator_failure_seen_ = now;
    if (now - coordinator_failure_seen_ >= kCoordinatorFailureDelay) {
      failure_reason_ = view.reason;
      BeginTermination(
          1,
          absl::StrCat("kolorun: the coordinator ended the job: ", view.reason),
          view.failed_worker);
    }
    return;
  }
  if (short_start_ && !epoch_formed_) {
    CheckShortStart(now, view);
    return;
  }
  if (epoch_formed_ || view.connected == 0 ||
      now - start_ < options_.start_timeout)
    return;
  std::vector<std::string> missing;
  for (const auto& w : workers_) {
    if (view.joined.count(w->plan.worker_id) == 0) {
      missing.push_back(absl::StrCat(w->plan.worker_id, " (rank ", w->plan.rank,
                                     ", host ", w->plan.host, ")"));
    }
  }
  failure_reason_ = absl::StrCat(
      "the job did not start within ",
      absl::FormatDuration(options_.start_timeout), ": ", missing.size(),
      " of ", workers_.size(), " workers have not joined the coordinator at ",
      options_.coordinator_address, ": ", absl::StrJoin(missing, ", "));
  BeginTermination(
      1, absl::StrCat(
             "kolorun: ", failure_reason_,
             ". Check that they run a kolo program and can reach that address "
             "(--coordinator-addr), or raise --start-timeout."));
}

void Supervisor::CheckShortStart(absl::Time now, const CoordinatorView& view) {
  const absl::Duration wait =
      std::max(options_.start_timeout, elastic_->start_wait);
  if (now - start_ < wait) return;
  std::vector<std::string> hosts;
  int slots = 0;
  for (const Slot& s : slots_->slots()) {
    if (!s.present) continue;
    ++slots;
    if (hosts.empty() || hosts.back() != s.host) hosts.push_back(s.host);
  }
  failure_reason_ = absl::StrCat(
      "the job did not reach --min-np ", elastic_->min_workers,
      " workers within ", absl::FormatDuration(wait),
      " (the longer of --start-timeout and --elastic-timeout): the host "
      "discovery script offered ",
      slots, " slot(s)",
      hosts.empty() ? "" : absl::StrCat(" (", absl::StrJoin(hosts, ", "), ")"),
      " and ", view.joined.size(), " worker(s) joined the coordinator at ",
      options_.coordinator_address);
  BeginTermination(1,
                   absl::StrCat("kolorun: ", failure_reason_,
                                ". Bring more hosts up, or lower --min-np."));
}

void Supervisor::BeginTermination(int exit_code, const std::string& message,
                                  const std::string& failed_worker) {
  if (terminating_) return;
  terminating_ = true;
  exit_code_ = exit_code;
  if (options_.end_job) {
    options_.end_job(failure_reason_.empty() ? message : failure_reason_,
                     failed_worker);
  }
  if (!message.empty()) WriteAll(2, message + "\n");
  for (auto& w : workers_) {
    if (w->guard > 0 && !w->reaped) ::kill(w->guard, SIGTERM);
  }
  kill_at_ = absl::Now() + kGuardGrace + kKillMargin;
}

void Supervisor::KillEverything() {
  killed_ = true;
  for (auto& w : workers_) {
    if (w->guard <= 0 || w->reaped) continue;
    if (!w->report.ended && w->report.worker_pid > 0)
      ::kill(-w->report.worker_pid, SIGKILL);
    ::kill(-w->guard, SIGKILL);
  }
  give_up_at_ = absl::Now() + kGiveUp;
}

}  // namespace kolo::launcher
