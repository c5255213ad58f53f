// Supervisor (supervisor.h), the elastic policy: starting workers on the
// slots the SlotTable allows, the host-discovery script, asking workers to
// leave (--graceful-term, a host that left), and ending the processes the
// coordinator evicted once the job ended.
#include <signal.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "launcher/supervisor.h"
#include "launcher/supervisor_internal.h"

namespace kolo::launcher {

using supervisor_internal::SignalName;
using supervisor_internal::WriteAll;

void Supervisor::SpawnReady() {
  if (terminating_ || draining_ || growth_over_) return;
  // Before the first epoch formed only the first workers start: the
  // coordinator forms it from exactly that many. A short start takes every
  // slot the script offers (the coordinator forms the epoch from the first
  // --min-np; the others join at the first commit).
  if (!epoch_formed_ && spawned_initial_ && !short_start_) return;
  spawned_initial_ = true;
  auto log = GetLogger("kolorun");
  for (int slot : slots_->Startable()) {
    WorkerIdentity id = slots_->Start(slot);
    auto w = std::make_unique<Worker>();
    w->plan.rank = id.worker_number;
    w->plan.worker_id = id.worker_id;
    w->plan.incarnation = id.incarnation;
    w->plan.host = id.host;
    w->plan.local_rank = id.local_index;
    w->plan.local_size = id.host_slots;
    w->slot = slot;
    w->spec = elastic_->make_spec(w->plan);
    MakePrefixers(*w, id.worker_number, /*append=*/id.incarnation > 0);
    Worker& ref = *w;
    workers_.push_back(std::move(w));
    if (id.incarnation > 0 || epoch_formed_) {
      log->warn("starting {} on slot {}", Describe(ref),
                slots_->slots()[static_cast<size_t>(slot)].Name());
    }
    if (!Spawn(ref)) {
      slots_->Ended(slot, WorkerEnd::kStopped);
      ref.ended = true;
      return;
    }
  }
}

bool Supervisor::WaitingForMinimum() const {
  return short_start_ && !epoch_formed_ && !terminating_ && !draining_ &&
         !growth_over_;
}

bool Supervisor::ReplacementsPending() const {
  return elastic_ != nullptr && !terminating_ && !draining_ && !growth_over_ &&
         epoch_formed_ && slots_->Pending();
}

void Supervisor::StopGrowth() {
  if (elastic_ == nullptr || growth_over_) return;
  growth_over_ = true;
  slots_->UnwantAll();
  discovery_run_.reset();
  next_discovery_ = absl::InfiniteFuture();
}

void Supervisor::StartDiscovery(absl::Time now) {
  next_discovery_ = now + elastic_->discovery_interval;
  absl::StatusOr<std::unique_ptr<DiscoveryRun>> run =
      DiscoveryRun::Start(elastic_->discovery_script, elastic_->slots_per_host);
  if (!run.ok()) {
    GetLogger("kolorun")->warn("cannot run the host discovery script: {}",
                               std::string(run.status().message()));
    return;
  }
  discovery_run_ = *std::move(run);
}

void Supervisor::OnDiscovery() {
  absl::StatusOr<std::vector<HostSlots>> hosts = discovery_run_->result();
  discovery_run_.reset();
  next_discovery_ = absl::Now() + elastic_->discovery_interval;
  auto log = GetLogger("kolorun");
  if (!hosts.ok()) {
    if (!discovery_failing_) {
      log->warn("{}; keeping the hosts as they are and retrying every {}",
                std::string(hosts.status().message()),
                absl::FormatDuration(elastic_->discovery_interval));
    } else {
      log->debug("{}", std::string(hosts.status().message()));
    }
    discovery_failing_ = true;
    return;
  }
  if (discovery_failing_) log->warn("the host discovery script works again");
  discovery_failing_ = false;
  if (terminating_ || draining_ || growth_over_) return;
  HostChange change = slots_->SetHosts(*hosts);
  for (const std::string& host : change.removed_hosts) {
    log->warn("host {} left the discovery script's output: its workers leave",
              host);
  }
  for (int slot : change.to_stop) {
    for (auto& w : workers_) {
      if (w->slot != slot || w->ended || w->guard <= 0 || w->reaped) continue;
      log->warn(
          "asking {} to leave (SIGTERM) at its next commit, within {}: its "
          "slot {} is gone",
          Describe(*w), absl::FormatDuration(elastic_->graceful_timeout),
          slots_->slots()[static_cast<size_t>(slot)].Name());
      AskToLeave(*w);
      w->leave_by = absl::Now() + elastic_->graceful_timeout;
    }
  }
  for (const std::string& host : change.added_hosts) {
    log->warn("host {} appeared in the discovery script's output", host);
  }
  if (!change.added_slots.empty()) {
    int wanted = slots_->Want(change.added_slots,
                              static_cast<int>(change.added_slots.size()));
    if (wanted < static_cast<int>(change.added_slots.size())) {
      log->warn("{} new slot(s) stay idle: --max-np {} workers already run",
                change.added_slots.size() - static_cast<size_t>(wanted),
                elastic_->slots.max_workers);
    }
  }
  SpawnReady();
}

void Supervisor::BeginGracefulTerm() {
  draining_ = true;
  slots_->UnwantAll();
  discovery_run_.reset();
  next_discovery_ = absl::InfiniteFuture();
  drain_deadline_ = absl::Now() + elastic_->graceful_timeout;
  WriteAll(2, absl::StrCat("kolorun: received SIGTERM (--graceful-term): "
                           "asking ",
                           LiveGuards(),
                           " worker(s) to leave at their next commit; a "
                           "second SIGTERM or SIGINT stops them at once\n"));
  for (auto& w : workers_) {
    if (w->guard <= 0 || w->reaped || w->ended) continue;
    AskToLeave(*w);
  }
}

void Supervisor::AskToLeave(Worker& w) {
  w.asked_to_leave = true;
  // The worker's own group, so that the guard does not start its grace
  // (SIGKILL after kGuardGrace): the worker leaves at its next commit.
  if (w.report.worker_pid > 0) {
    ::kill(-w.report.worker_pid, SIGTERM);
  } else {
    ::kill(w.guard, SIGTERM);
  }
}

void Supervisor::EndEvicted(const CoordinatorView& view) {
  for (auto& w : workers_) {
    if (w->reaped || w->ended || w->evicted_killed || w->guard <= 0 ||
        view.evicted.count({w->plan.worker_id, w->plan.incarnation}) == 0) {
      continue;
    }
    // Out of the job for good, and nothing waits for it: a stopped process
    // would never end by itself (SIGKILL reaches it; SIGTERM would not).
    GetLogger("kolorun")->warn(
        "{} was evicted by the coordinator and is still alive after the job "
        "ended (stopped, frozen or cut off): killed",
        Describe(*w));
    w->evicted_killed = true;
    // Its group (the guard then records the end), else the guard itself.
    ::kill(w->report.worker_pid > 0 ? -w->report.worker_pid : w->guard,
           SIGKILL);
  }
}

}  // namespace kolo::launcher
