// kolo's public API (include/kolo/kolo.h): one Runtime per initialised job,
// owned here and referenced nowhere else.
//
// init() parses the WorkerConfig, starts the coordinator if this rank hosts
// it, opens the data-plane listener, connects the Session and waits for the
// Membership. shutdown() leaves in order; the hosting rank then waits
// (bounded) for the others to leave before it stops the coordinator.
//
// Thread-safety: init/shutdown/control_allgather take api_mu only to find the
// Runtime (a control_allgather in flight does not block shutdown, which fails
// it). Topology getters read atomics, without locks.
#include <signal.h>
#include <sys/eventfd.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/cuda/cuda_info.h"
#include "allreduce/data_plane.h"
#include "common/fd_limit.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/net.h"
#include "common/unique_fd.h"
#include "coordinator/server.h"
#include "kolo/kolo.h"
#include "worker_lib/api/api_internal.h"
#include "worker_lib/api/raw.h"
#include "worker_lib/config.h"
#include "worker_lib/fault_hook.h"
#include "worker_lib/runtime/data_listener.h"
#include "worker_lib/runtime/epoch_runtime.h"
#include "worker_lib/runtime/op_runtime.h"
#include "worker_lib/session/session_client.h"

namespace kolo {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  // Never destroyed: used by threads that may run while the process exits.
  static const auto* const logger =
      new std::shared_ptr<spdlog::logger>(GetLogger("api"));
  return *logger;
}

// A job this process has joined: what lives for the job. What lives for
// one epoch is in `epochs` (worker_lib/runtime/epoch_runtime.h).
struct Runtime {
  worker::WorkerConfig config;
  std::unique_ptr<coordinator::CoordinatorServer> server;  // if hosting
  // Shared with an epoch change in flight.
  std::shared_ptr<worker::DataListener> listener;
  // Shared with control_allgather calls in flight.
  std::shared_ptr<worker::SessionClient> client;
  // The coordinator's address as dialled.
  std::string target;
  // The current epoch (and a few retired ones); shared with the Session's
  // observers.
  std::shared_ptr<worker::EpochSlot> epochs;
};

absl::Status WithMessage(const absl::Status& s, absl::string_view message) {
  return absl::Status(s.code(), message);
}

absl::StatusOr<std::unique_ptr<coordinator::CoordinatorServer>> HostCoordinator(
    const worker::WorkerConfig& c) {
  coordinator::ServerOptions so = coordinator::ServerOptionsFromKnobs(c.knobs);
  so.bind_host =
      net::IsIpLiteral(c.coordinator.host) ? c.coordinator.host : "0.0.0.0";
  so.port = c.coordinator.port;
  so.expected_size = c.size;
  so.job_id = c.job_id;
  so.secret = c.secret;
  // The port came from a variable, not a flag: name it.
  so.port_hint =
      c.coordinator_source == "MASTER_ADDR:MASTER_PORT"
          ? "choose a free port in MASTER_PORT on every worker; under "
            "torchrun, MASTER_PORT is taken by torchrun's own rendezvous "
            "store: set KOLO_COORDINATOR=<rank 0 host>:<free port> on every "
            "worker"
          : absl::StrCat("choose a free port in ", c.coordinator_source,
                         "=<rank 0 host>:<port> on every worker, or set "
                         "KOLO_HOST_COORDINATOR=0 if a kolo-coordinator "
                         "already runs there");
  auto server = coordinator::CoordinatorServer::Start(so);
  if (server.ok()) return server;
  return WithMessage(
      server.status(),
      absl::StrCat("rank 0 (worker ", c.worker_id,
                   ") could not host the coordinator at ",
                   c.coordinator.ToString(), " (from ", c.coordinator_source,
                   "): ", server.status().message(),
                   "; the other workers stop when they find no coordinator "
                   "there"));
}

// Leaves the job; on the hosting rank, waits for the others, then stops the
// coordinator.
absl::Status StopRuntime(Runtime& rt) {
  absl::Status abandoned;
  if (rt.epochs != nullptr) {
    if (std::shared_ptr<worker::EpochRuntime> e = rt.epochs->current()) {
      abandoned = e->ops->Stop();  // before the data plane
    }
    rt.epochs.reset();  // closes the data connections
  }
  absl::Status result =
      rt.client != nullptr ? rt.client->Shutdown() : absl::OkStatus();
  if (result.ok()) result = abandoned;
  if (rt.server != nullptr) {
    absl::Status ended =
        rt.server->WaitUntilEnded(absl::Now() + rt.config.knobs.start_timeout);
    if (!ended.ok()) {
      Log()->warn("the coordinator hosted by worker {} stops: {}",
                  rt.config.worker_id, std::string(ended.message()));
      if (result.ok()) result = ended;
    }
    rt.server->Shutdown(!ended.ok(), ended.ok() ? "every worker left"
                                                : std::string(ended.message()));
  }
  return result;
}

// Elastic jobs: SIGTERM (a spot instance's notice) asks this worker to leave
// at its next membership check (State::commit); a second SIGTERM at least a
// second later ends the process as SIGTERM would have (copies of the same
// notice, sent to the process and to its group, arrive together).
std::atomic<bool> leave_requested{false};
std::atomic<int64_t> first_sigterm_ns{0};
static_assert(std::atomic<bool>::is_always_lock_free);
static_assert(std::atomic<int64_t>::is_always_lock_free);

void OnSigterm(int) {
  timespec ts = {};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  const int64_t now = int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  int64_t first = 0;
  if (first_sigterm_ns.compare_exchange_strong(first, now)) {
    leave_requested.store(true);
    return;
  }
  if (now - first >= 1000000000) {
    ::signal(SIGTERM, SIG_DFL);
    ::raise(SIGTERM);
  }
}

void InstallGracefulLeave() {
  struct sigaction old = {};
  if (::sigaction(SIGTERM, nullptr, &old) != 0) return;
  if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO) != 0) {
    Log()->info(
        "SIGTERM has a handler of the program's: kolo's graceful leave on "
        "SIGTERM is off (call kolo::elastic::request_leave() from it)");
    return;
  }
  struct sigaction sa = {};
  sa.sa_handler = OnSigterm;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (::sigaction(SIGTERM, &sa, nullptr) == 0) {
    Log()->debug("SIGTERM leaves the job at the next commit");
  }
}

worker::SessionOptions SessionOptionsFor(const worker::WorkerConfig& c,
                                         const std::string& target,
                                         const std::string& data_address) {
  worker::SessionOptions so;
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
  so.heartbeat_interval = c.knobs.heartbeat_interval;
  so.lease = c.lease;
  so.exit_on_lost_coordinator = true;
  // An evicted worker of an elastic job may rejoin (Rejoin, below).
  so.exit_on_evicted = !c.elastic;
  return so;
}

absl::StatusOr<std::unique_ptr<Runtime>> StartRuntime(
    worker::WorkerConfig config) {
  // A worker of an elastic job may have to wait until it is admitted (at
  // the members' next commit, or when a slot frees under --max-np).
  const absl::Time deadline =
      absl::Now() + (config.elastic ? std::max(config.knobs.start_timeout,
                                               config.knobs.elastic_timeout)
                                    : config.knobs.start_timeout);
  // As servers do: the data port and the hosted coordinator accept
  // connections from outside, which must not starve the job (issue 39).
  RaiseOpenFileLimitAndLog("api");
  auto rt = std::make_unique<Runtime>();
  rt->config = std::move(config);
  const worker::WorkerConfig& c = rt->config;
  auto ip = worker::ChooseDataIp(c);
  if (!ip.ok()) return ip.status();
  std::string source = !c.data_addr.empty()    ? "KOLO_ADDR"
                       : !c.data_iface.empty() ? "KOLO_IFACE=" + c.data_iface
                                               : "the route to the coordinator";
  tcp::AcceptorOptions accepting;
  accepting.owner = absl::StrCat("worker ", c.worker_id);
  auto listener = worker::DataListener::Open(*ip, source, accepting);
  if (!listener.ok()) return listener.status();
  rt->listener = std::shared_ptr<worker::DataListener>(*std::move(listener));
  std::string target = c.coordinator.ToString();
  if (c.host_coordinator) {
    auto server = HostCoordinator(c);
    if (!server.ok()) return server.status();
    rt->server = *std::move(server);
    net::HostPort hp = c.coordinator;
    if (hp.port == 0) hp.port = rt->server->port();
    target = hp.ToString();
  }

  auto client = worker::SessionClient::Connect(
      SessionOptionsFor(c, target, rt->listener->address()), deadline);
  if (!client.ok()) {
    if (rt->server != nullptr) {
      rt->server->Shutdown(
          true, absl::StrCat("rank 0 (worker ", c.worker_id,
                             ", which hosts the coordinator) could not join: ",
                             client.status().message()));
    }
    return client.status();
  }
  rt->client = *std::move(client);
  rt->target = target;
  rt->epochs = std::make_shared<worker::EpochSlot>();
  worker::EpochSlot::Attach(rt->epochs, *rt->client);
  worker::EpochInputs in;
  in.config = &rt->config;
  in.client = rt->client;
  in.acceptor = rt->listener->acceptor();
  in.coordinator = rt->target;
  auto epoch =
      worker::BuildEpoch(in, rt->client->current(), deadline, /*abort_fd=*/-1);
  if (!epoch.ok()) {
    (void)StopRuntime(*rt);
    return epoch.status();
  }
  rt->epochs->Install(*std::move(epoch));
  return rt;
}

// The topology of the current epoch; rank == -1 when not initialised. Rank
// is written last on init and first on shutdown.
struct Published {
  std::atomic<int> rank{-1}, size{-1}, local_rank{-1}, local_size{-1},
      cross_rank{-1}, cross_size{-1};
  Mutex mu;  // the strings; never held for long
  std::string worker_id ABSL_GUARDED_BY(mu);
  std::string data_address ABSL_GUARDED_BY(mu);
};
Published published;

void Publish(const proto::Membership* m, std::string worker_id,
             std::string data_address) {
  if (m == nullptr) published.rank.store(-1);
  {
    MutexLock lock(&published.mu);
    published.worker_id = std::move(worker_id);
    published.data_address = std::move(data_address);
  }
  published.size.store(m ? m->size() : -1);
  published.local_rank.store(m ? m->local_rank() : -1);
  published.local_size.store(m ? m->local_size() : -1);
  published.cross_rank.store(m ? m->cross_rank() : -1);
  published.cross_size.store(m ? m->cross_size() : -1);
  published.rank.store(m ? m->rank() : -1);
}

Mutex api_mu;
std::unique_ptr<Runtime> runtime ABSL_GUARDED_BY(api_mu);

// A process that exits with kolo initialised (returns from main without
// shutdown(), or calls exit()) shuts down here, before static destruction:
// otherwise ~Runtime would run among the statics while gRPC's threads still
// call into the session and the runtime. Registered by the first init(),
// after every static it uses was constructed, so it runs before they are
// destroyed.
void ShutdownAtExit() {
  {
    MutexLock lock(&api_mu);
    if (runtime == nullptr) return;
  }
  Log()->warn(
      "the process exits with kolo initialised (kolo::shutdown() was not "
      "called); shutting down now");
  if (absl::Status s = shutdown(); !s.ok()) {
    Log()->warn("shutdown at exit: {}", std::string(s.message()));
  }
}

}  // namespace

absl::Status init() {
  MutexLock lock(&api_mu);
  if (runtime != nullptr) return absl::OkStatus();
  worker::EnvMap env = worker::ReadProcessEnvironment();
  worker::ScrubSecretFromProcessEnvironment();
  auto config = worker::ParseWorkerConfig(env, net::KernelHostName());
  if (!config.ok()) return config.status();
  if (absl::Status s = SetLogLevel(config->knobs.log_level); !s.ok()) return s;
  for (const std::string& w : worker::UnknownVariableWarnings(env)) {
    Log()->warn("{}", w);
  }
  Log()->info("worker {} ({} launch, rank {} of {}) joins job '{}' at {}",
              config->worker_id,
              std::string(worker::LaunchModeName(config->launch_mode)),
              config->rank, config->size, config->job_id,
              config->coordinator.ToString());
  if (!config->fault_events.empty()) {
    // kolorun --fault: this worker's share of the plan (fault_hook.h).
    worker::faults::HookConfig hook;
    hook.plan = config->fault_plan;
    hook.events_path = config->fault_events;
    hook.origin = config->fault_origin;
    hook.worker_id = config->worker_id;
    hook.incarnation = config->worker_incarnation;
    if (absl::Status s = worker::faults::Arm(hook); !s.ok()) {
      Log()->warn("{}; this worker fires no fault and reports nothing",
                  std::string(s.message()));
    }
  }
  auto rt = StartRuntime(*std::move(config));
  if (!rt.ok()) return rt.status();
  runtime = *std::move(rt);
  if (runtime->config.elastic) InstallGracefulLeave();
  static const bool at_exit = std::atexit(ShutdownAtExit) == 0;
  if (!at_exit) Log()->warn("could not register kolo's shutdown at exit");
  const proto::Membership m = runtime->epochs->current()->membership;
  SetLogRank(m.rank());
  Publish(&m, runtime->config.worker_id, runtime->listener->address());
  Log()->info(
      "initialised: rank {} of {}, local {} of {}, cross {} of {}, "
      "data at {}",
      m.rank(), m.size(), m.local_rank(), m.local_size(), m.cross_rank(),
      m.cross_size(), runtime->listener->address());
  return absl::OkStatus();
}

absl::Status init(const InitOptions& options) {
  if (!options.process_sets.empty() && is_initialized()) {
    return absl::FailedPreconditionError(
        "init(options): kolo is initialised already; static process sets "
        "are registered by the first init() (use add_process_set now)");
  }
  if (absl::Status s = init(); !s.ok()) return s;
  for (size_t i = 0; i < options.process_sets.size(); ++i) {
    absl::StatusOr<ProcessSet> id = add_process_set(options.process_sets[i]);
    if (!id.ok()) {
      return absl::Status(id.status().code(),
                          absl::StrCat("init: static process set ", i, ": ",
                                       id.status().message()));
    }
  }
  return absl::OkStatus();
}

absl::Status shutdown() {
  MutexLock lock(&api_mu);
  if (runtime == nullptr) return absl::OkStatus();
  Publish(nullptr, "", "");
  absl::Status s = StopRuntime(*runtime);
  runtime.reset();
  worker::faults::Disarm();
  SetLogIdentity("rank ?");
  return s;
}

bool is_initialized() { return published.rank.load() >= 0; }

bool cuda_built() { return cuda::Built(); }
int nccl_built() { return cuda::NcclVersion(); }
int cuda_device_count() { return cuda::DeviceCount(); }
std::string cuda_status() {
  std::string why = cuda::Unusable();
  return why.empty() ? "ok" : why;
}
int rank() { return published.rank.load(); }
int size() { return published.size.load(); }
int local_rank() { return published.local_rank.load(); }
int local_size() { return published.local_size.load(); }
int cross_rank() { return published.cross_rank.load(); }
int cross_size() { return published.cross_size.load(); }

std::string worker_id() {
  MutexLock lock(&published.mu);
  return published.worker_id;
}

std::string data_address() {
  MutexLock lock(&published.mu);
  return published.data_address;
}

absl::StatusOr<std::vector<std::string>> control_allgather(
    absl::string_view key, absl::string_view value, absl::Duration timeout) {
  std::shared_ptr<worker::SessionClient> client;
  {
    MutexLock lock(&api_mu);
    if (runtime == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "control_allgather('", key, "') called before kolo::init()"));
    }
    client = runtime->client;
  }
  return client->Exchange(key, value, timeout);
}

namespace {

// The data plane of the current job, or kFailedPrecondition naming `op`.
absl::StatusOr<std::shared_ptr<DataPlane>> Data(absl::string_view op) {
  MutexLock lock(&api_mu);
  if (runtime == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(op, " called before kolo::init()"));
  }
  return runtime->epochs->current()->data;
}

}  // namespace

namespace raw {

absl::Status allreduce(const void* input, void* output, int64_t count,
                       DataType type, ReduceOp op, double prescale,
                       double postscale) {
  auto data = Data("raw::allreduce");
  if (!data.ok()) return data.status();
  ReduceOptions reduce;
  reduce.op = op;
  reduce.prescale = prescale;
  reduce.postscale = postscale;
  return (*data)->Allreduce(type, input, output, count, reduce);
}

absl::Status allgather(const void* input, int64_t count, DataType type,
                       absl::Span<const int64_t> counts, void* output) {
  auto data = Data("raw::allgather");
  if (!data.ok()) return data.status();
  return (*data)->Allgather(type, input, count, counts, output);
}

absl::Status broadcast(void* buffer, int64_t count, DataType type, int root) {
  auto data = Data("raw::broadcast");
  if (!data.ok()) return data.status();
  return (*data)->Broadcast(type, buffer, count, root);
}

absl::Status alltoall(const void* input, DataType type,
                      absl::Span<const int64_t> send_splits, void* output,
                      absl::Span<const int64_t> recv_splits) {
  auto data = Data("raw::alltoall");
  if (!data.ok()) return data.status();
  return (*data)->Alltoall(type, input, send_splits, output, recv_splits);
}

absl::Status reducescatter(const void* input, int64_t count, DataType type,
                           absl::Span<const int64_t> counts, void* output,
                           ReduceOp op) {
  auto data = Data("raw::reducescatter");
  if (!data.ok()) return data.status();
  ReduceOptions reduce;
  reduce.op = op;
  return (*data)->Reducescatter(type, input, count, counts, output, reduce);
}

absl::Status barrier() {
  auto data = Data("raw::barrier");
  if (!data.ok()) return data.status();
  return (*data)->Barrier();
}

}  // namespace raw

namespace internal {

absl::StatusOr<std::shared_ptr<worker::OpRuntime>> CurrentOps(
    absl::string_view op) {
  MutexLock lock(&api_mu);
  if (runtime == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(op, " called before kolo::init() (or after shutdown())"));
  }
  return runtime->epochs->current()->ops;
}

absl::StatusOr<std::shared_ptr<worker::OpRuntime>> OpsForHandle(
    absl::string_view op, Handle handle) {
  MutexLock lock(&api_mu);
  if (runtime == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(op, " called before kolo::init() (or after shutdown())"));
  }
  return runtime->epochs->ForHandle(handle)->ops;
}

absl::Status AwaitSessionVerdict() {
  std::shared_ptr<worker::SessionClient> client;
  absl::Duration lease;
  {
    MutexLock lock(&api_mu);
    if (runtime == nullptr) {
      return absl::FailedPreconditionError(
          "waiting for the coordinator's verdict found kolo shut down");
    }
    client = runtime->client;
    lease = runtime->config.lease;
  }
  const absl::Time deadline = absl::Now() + lease;
  absl::Status health = client->health();
  while (health.ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
    health = client->health();
  }
  return health;
}

absl::Status Rejoin(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::shared_ptr<worker::EpochSlot> old_epochs;
  std::shared_ptr<worker::DataListener> listener;
  worker::WorkerConfig config;
  std::string target;
  {
    MutexLock lock(&api_mu);
    if (runtime == nullptr) {
      return absl::FailedPreconditionError(
          "rejoining found kolo shut down (kolo::shutdown() was called)");
    }
    old_epochs = runtime->epochs;
    listener = runtime->listener;
    config = runtime->config;
    target = runtime->target;
  }
  if (!config.elastic) {
    return absl::FailedPreconditionError(
        "only a worker of an elastic job rejoins after its eviction");
  }
  std::shared_ptr<worker::EpochRuntime> old = old_epochs->current();
  (void)old->ops->Stop(/*close_timeline=*/false);
  Log()->warn("worker {} rejoins job '{}' as a newcomer", config.worker_id,
              config.job_id);
  auto connected = worker::SessionClient::Connect(
      SessionOptionsFor(config, target, listener->address()), deadline);
  if (!connected.ok()) return connected.status();
  std::shared_ptr<worker::SessionClient> client = *std::move(connected);
  auto epochs = std::make_shared<worker::EpochSlot>();
  worker::EpochSlot::Attach(epochs, *client);
  worker::EpochInputs in;
  in.config = &config;
  in.client = client;
  in.acceptor = listener->acceptor();
  in.coordinator = target;
  in.first = false;
  in.first_handle = old->ops->next_handle();
  in.dissolved_sets = old_epochs->KnownSets();
  in.timeline = old->ops->timeline();
  in.cause = "this worker rejoined after its eviction";
  auto epoch = worker::BuildEpoch(in, client->current(), deadline, -1);
  if (!epoch.ok()) {
    (void)client->Shutdown();
    return epoch.status();
  }
  const proto::Membership m = (*epoch)->membership;
  epochs->Install(*std::move(epoch));
  {
    MutexLock lock(&api_mu);
    if (runtime == nullptr) {
      (void)client->Shutdown();
      return absl::FailedPreconditionError(
          "kolo was shut down while this worker rejoined");
    }
    runtime->client = client;
    runtime->epochs = epochs;
  }
  SetLogRank(m.rank());
  Publish(&m, config.worker_id, listener->address());
  Log()->info("rejoined in epoch {}: rank {} of {}", client->epoch(), m.rank(),
              m.size());
  return absl::OkStatus();
}

bool IsElasticJob() {
  MutexLock lock(&api_mu);
  return runtime != nullptr && runtime->config.elastic;
}

bool LeaveRequested() { return leave_requested.load(); }

void RequestLeave() { leave_requested.store(true); }

absl::Status AwaitNextEpoch(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::shared_ptr<worker::EpochSlot> epochs;
  std::shared_ptr<worker::SessionClient> client;
  std::shared_ptr<worker::DataListener> listener;
  worker::WorkerConfig config;
  worker::EpochInputs in;
  in.config = &config;
  {
    MutexLock lock(&api_mu);
    if (runtime == nullptr) {
      return absl::FailedPreconditionError(
          "the elastic retry found kolo shut down (kolo::shutdown() was "
          "called, or init() never was)");
    }
    epochs = runtime->epochs;
    client = runtime->client;
    listener = runtime->listener;
    config = runtime->config;
    in.coordinator = runtime->target;
  }
  in.client = client;
  in.acceptor = listener->acceptor();
  in.first = false;
  while (true) {
    std::shared_ptr<worker::EpochRuntime> old = epochs->current();
    const absl::Status ended_with = epochs->EndedWith(old->number);
    if (ended_with.ok()) {
      return absl::OkStatus();  // the current epoch is alive: nothing to do
    }
    in.cause = std::string(ended_with.message());
    absl::StatusOr<worker::SessionClient::EpochView> view =
        client->WaitForEpochAfter(old->number, deadline);
    if (!view.ok()) return view.status();
    // The ended epoch's runtime stops before the next one starts (its
    // pending ops failed already); the timeline goes on in the next.
    in.timeline = old->ops->timeline();
    (void)old->ops->Stop(/*close_timeline=*/false);
    in.first_handle = old->ops->next_handle();
    in.dissolved_sets = epochs->KnownSets();
    net::UniqueFd abort(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    epochs->BeginBuild(view->epoch, abort.get());
    auto epoch = worker::BuildEpoch(in, *view, deadline, abort.get());
    epochs->EndBuild();
    if (!epoch.ok()) {
      absl::Status ended = epochs->EndedWith(view->epoch);
      if (ended.ok()) return epoch.status();
      // Epoch e+1 ended while its data plane formed: wait for e+2. The
      // failed build leaves the ended epoch current.
      Log()->warn("epoch {} ended while it formed: {}", view->epoch,
                  std::string(ended.message()));
      continue;
    }
    const proto::Membership m = (*epoch)->membership;
    epochs->Install(*std::move(epoch));
    SetLogRank(m.rank());
    Publish(&m, config.worker_id, listener->address());
    Log()->info("epoch {}: rank {} of {}, local {} of {}, cross {} of {}",
                view->epoch, m.rank(), m.size(), m.local_rank(), m.local_size(),
                m.cross_rank(), m.cross_size());
    return absl::OkStatus();
  }
}

}  // namespace internal
}  // namespace kolo
