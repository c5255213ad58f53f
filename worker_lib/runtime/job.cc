#include "worker_lib/runtime/job.h"

#include <sys/eventfd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "allreduce/transport.h"
#include "common/fd_limit.h"
#include "common/log.h"
#include "common/unique_fd.h"

namespace kolo::worker {
namespace {

std::shared_ptr<spdlog::logger> JobLog() {
  // Never destroyed: used by threads that may run while the process exits.
  static const auto* const logger =
      new std::shared_ptr<spdlog::logger>(GetLogger("api"));
  return *logger;
}

// An elastic job's standalone coordinator may come back; kolorun's and rank
// 0's end with their process, unless KOLO_COORDINATOR_RETURNS says
// otherwise (kolorun's fault injection starts its coordinator again).
bool OutlivesCoordinator(const WorkerConfig& c) {
  if (!c.elastic || c.host_coordinator) return false;
  return c.coordinator_returns.value_or(c.launch_mode != LaunchMode::kKolorun);
}

SessionOptions SessionOptionsFor(const WorkerConfig& c,
                                 const std::string& target,
                                 const std::string& data_address) {
  SessionOptions so;
  so.coordinator = target;
  so.coordinator_source = c.coordinator_source;
  so.job_id = c.job_id;
  so.worker_id = c.worker_id;
  so.worker_incarnation = c.worker_incarnation;
  so.host_name = c.host_name;
  so.data_address = data_address;
  so.requested_rank = c.rank;
  so.expected_size = c.size;
  so.secret = c.secret;
  so.tls = c.tls;
  so.heartbeat_interval = c.knobs.heartbeat_interval;
  so.lease = c.lease;
  so.exit_on_lost_coordinator = true;
  // An evicted worker of an elastic job may rejoin (Job::Rejoin).
  so.exit_on_evicted = !c.elastic;
  // So may one that lost a standalone coordinator, restarted within the
  // lease.
  if (OutlivesCoordinator(c)) so.reconnect_window = c.lease;
  return so;
}

absl::StatusOr<std::shared_ptr<DataListener>> OpenListener(
    const WorkerConfig& c) {
  auto ip = ChooseDataIp(c);
  if (!ip.ok()) return ip.status();
  std::string source = !c.data_addr.empty()    ? "KOLO_ADDR"
                       : !c.data_iface.empty() ? "KOLO_IFACE=" + c.data_iface
                                               : "the route to the coordinator";
  tcp::AcceptorOptions accepting;
  accepting.owner = absl::StrCat("worker ", c.worker_id);
  auto listener = DataListener::Open(*ip, source, accepting);
  if (!listener.ok()) return listener.status();
  return std::shared_ptr<DataListener>(*std::move(listener));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Job>> Job::Start(
    WorkerConfig config, std::function<bool()> asked_to_leave) {
  // A worker of an elastic job may have to wait until it is admitted (at
  // the members' next commit, or when a slot frees under --max-np).
  const absl::Time deadline =
      absl::Now() + (config.elastic ? std::max(config.knobs.start_timeout,
                                               config.knobs.elastic_timeout)
                                    : config.knobs.start_timeout);
  // As servers do: the data port and the hosted coordinator accept
  // connections from outside, which must not starve the job (issue 39).
  RaiseOpenFileLimitAndLog("api");
  std::unique_ptr<Job> job(new Job(std::move(config)));
  job->asked_to_leave_ = std::move(asked_to_leave);
  auto listener = OpenListener(job->config_);
  if (!listener.ok()) return listener.status();
  job->listener_ = *std::move(listener);
  auto target = job->HostIfAsked();
  if (!target.ok()) return target.status();
  job->context_.config = &job->config_;
  job->context_.acceptor = job->listener_->acceptor();
  job->context_.coordinator = *std::move(target);
  if (absl::Status s = job->Join(deadline); !s.ok()) return s;
  return job;
}

absl::StatusOr<std::string> Job::HostIfAsked() {
  if (!config_.host_coordinator) return config_.coordinator.ToString();
  auto hosted = HostCoordinator(config_);
  if (!hosted.ok()) return hosted.status();
  hosted_ = *std::move(hosted);
  net::HostPort hp = config_.coordinator;
  if (hp.port == 0) hp.port = hosted_->port();
  return hp.ToString();
}

absl::StatusOr<std::shared_ptr<SessionClient>> Job::Connect(
    absl::Time deadline, bool reconnecting) const {
  SessionOptions so =
      SessionOptionsFor(config_, context_.coordinator, listener_->address());
  so.give_up = asked_to_leave_;
  so.reconnecting = reconnecting;
  auto client = SessionClient::Connect(std::move(so), deadline);
  if (!client.ok()) return client.status();
  return std::shared_ptr<SessionClient>(*std::move(client));
}

EpochInputs Job::InputsFor(std::shared_ptr<SessionClient> client) const {
  EpochInputs in;
  in.job = &context_;
  in.client = std::move(client);
  return in;
}

absl::Status Job::Join(absl::Time deadline) {
  auto client = Connect(deadline);
  if (!client.ok()) {
    if (hosted_ != nullptr) {
      hosted_->Shutdown(
          true, absl::StrCat("rank 0 (worker ", config_.worker_id,
                             ", which hosts the coordinator) could not join: ",
                             client.status().message()));
    }
    return client.status();
  }
  attachment_.client = *std::move(client);
  attachment_.epochs = std::make_shared<EpochSlot>();
  EpochSlot::Attach(attachment_.epochs, *attachment_.client);
  auto epoch =
      BuildEpoch(InputsFor(attachment_.client), attachment_.client->current(),
                 deadline, /*abort_fd=*/-1);
  if (!epoch.ok()) {
    (void)Stop();
    return epoch.status();
  }
  attachment_.epochs->Install(*std::move(epoch));
  return absl::OkStatus();
}

proto::Membership Job::membership() const {
  return attachment_.epochs->current()->membership;
}

absl::Status Job::Stop() {
  absl::Status abandoned;
  if (attachment_.epochs != nullptr) {
    if (std::shared_ptr<EpochRuntime> e = attachment_.epochs->current()) {
      // No round of the fast path may wait for this rank once it stopped.
      if (attachment_.epochs->EndedWith(e->number).ok()) {
        e->ops->LeaveFastPath();
      }
      abandoned = e->ops->Stop();  // before the data plane
    }
    attachment_.epochs.reset();  // closes the data connections
  }
  absl::Status result = attachment_.client != nullptr
                            ? attachment_.client->Shutdown()
                            : absl::OkStatus();
  if (result.ok()) result = abandoned;
  if (hosted_ != nullptr) {
    absl::Status ended =
        hosted_->WaitUntilEnded(absl::Now() + config_.knobs.start_timeout);
    if (!ended.ok()) {
      JobLog()->warn("the coordinator hosted by worker {} stops: {}",
                     config_.worker_id, std::string(ended.message()));
      if (result.ok()) result = ended;
    }
    hosted_->Shutdown(!ended.ok(), ended.ok() ? "every worker left"
                                              : std::string(ended.message()));
  }
  return result;
}

absl::StatusOr<Job::Attachment> Job::Rejoin(const Attachment& old,
                                            absl::Time deadline) const {
  std::shared_ptr<EpochRuntime> ended = old.epochs->current();
  (void)ended->ops->Stop(/*close_timeline=*/false);
  JobLog()->warn("worker {} rejoins job '{}' as a newcomer", config_.worker_id,
                 config_.job_id);
  auto client = Connect(deadline, absl::IsUnavailable(old.client->health()));
  if (!client.ok()) return client.status();
  // The old Session (evicted, or its coordinator lost) is done for.
  (void)old.client->Shutdown(absl::Seconds(1));
  Attachment a;
  a.client = *std::move(client);
  a.epochs = std::make_shared<EpochSlot>();
  EpochSlot::Attach(a.epochs, *a.client);
  EpochInputs in = InputsFor(a.client);
  in.first = false;
  in.first_handle = ended->ops->next_handle();
  in.dissolved_sets = old.epochs->KnownSets();
  in.timeline = ended->ops->timeline();
  in.cause = "this worker rejoined after its eviction";
  auto epoch = BuildEpoch(in, a.client->current(), deadline, -1);
  if (!epoch.ok()) {
    (void)a.client->Shutdown();
    return epoch.status();
  }
  a.epochs->Install(*std::move(epoch));
  return a;
}

absl::StatusOr<std::shared_ptr<EpochRuntime>> Job::AwaitNextEpoch(
    const Attachment& a, absl::Time deadline) const {
  EpochInputs in = InputsFor(a.client);
  in.first = false;
  while (true) {
    std::shared_ptr<EpochRuntime> old = a.epochs->current();
    const absl::Status ended_with = a.epochs->EndedWith(old->number);
    if (ended_with.ok()) {
      return nullptr;  // the current epoch is alive: nothing to do
    }
    in.cause = std::string(ended_with.message());
    absl::StatusOr<SessionClient::EpochView> view =
        a.client->WaitForEpochAfter(old->number, deadline);
    if (!view.ok()) return view.status();
    // The ended epoch's runtime stops before the next one starts (its
    // pending ops failed already); the timeline goes on in the next.
    in.timeline = old->ops->timeline();
    (void)old->ops->Stop(/*close_timeline=*/false);
    in.first_handle = old->ops->next_handle();
    in.dissolved_sets = a.epochs->KnownSets();
    net::UniqueFd abort(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    a.epochs->BeginBuild(view->epoch, abort.get());
    auto epoch = BuildEpoch(in, *view, deadline, abort.get());
    a.epochs->EndBuild();
    if (!epoch.ok()) {
      absl::Status ended = a.epochs->EndedWith(view->epoch);
      if (ended.ok()) {
        // A member died or left while the data plane formed, and this
        // rank saw it first (a refused connection, a cut shared-memory
        // handshake): the coordinator's verdict ends the epoch within its
        // heartbeat timeout. Only if it finds everyone alive is the
        // failure this worker's own.
        absl::Status verdict = a.client->ReportPeerFault(
            epoch.status(), PeersOf(epoch.status()),
            config_.knobs.heartbeat_timeout + absl::Seconds(2));
        ended = a.epochs->EndedWith(view->epoch);
        if (ended.ok()) return verdict;
      }
      // Epoch e+1 ended while its data plane formed: wait for e+2. The
      // failed build leaves the ended epoch current.
      JobLog()->warn("epoch {} ended while it formed: {}", view->epoch,
                     std::string(ended.message()));
      continue;
    }
    std::shared_ptr<EpochRuntime> next = *epoch;
    a.epochs->Install(*std::move(epoch));
    return next;
  }
}

bool Job::MayOutliveCoordinator() const { return OutlivesCoordinator(config_); }

absl::Status Job::AwaitVerdict(const Attachment& a) const {
  const absl::Time deadline = absl::Now() + config_.lease;
  absl::Status health = a.client->health();
  while (health.ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
    health = a.client->health();
  }
  return health;
}

}  // namespace kolo::worker
