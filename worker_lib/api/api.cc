// kolo's public API (include/kolo/kolo.h): the process's current Job
// (worker_lib/runtime/job.h), its published topology and the leave flag, and
// the API functions, which forward to the Job.
//
// init() parses the WorkerConfig and starts the Job (it hosts the
// coordinator if this rank does, opens the data-plane listener, connects the
// Session and waits for the Membership). shutdown() stops it: it leaves in
// order; the hosting rank then waits (bounded) for the others to leave
// before it stops the coordinator.
//
// Thread-safety: api_mu guards the current Job and its attachment; calls
// that block (control_allgather, an elastic retry, a rejoin) take it only to
// find the Job (a call in flight does not block shutdown, which fails it).
// Topology getters read atomics, without locks.
#include <signal.h>
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
#include "common/log.h"
#include "common/mutex.h"
#include "kolo/kolo.h"
#include "worker_lib/api/api_internal.h"
#include "worker_lib/api/raw.h"
#include "worker_lib/config.h"
#include "worker_lib/fault_hook.h"
#include "worker_lib/runtime/epoch_runtime.h"
#include "worker_lib/runtime/job.h"
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

// Installed before the worker joins, so that a SIGTERM while it waits for
// admission (a pod scaled down as it starts) is a leave too: the worker
// leaves at its first commit. Returns whether it was installed.
bool InstallGracefulLeave() {
  struct sigaction old = {};
  if (::sigaction(SIGTERM, nullptr, &old) != 0) return false;
  if (old.sa_handler == OnSigterm) return true;  // an earlier init()
  if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO) != 0) {
    Log()->info(
        "SIGTERM has a handler of the program's: kolo's graceful leave on "
        "SIGTERM is off (call kolo::elastic::request_leave() from it)");
    return false;
  }
  struct sigaction sa = {};
  sa.sa_handler = OnSigterm;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (::sigaction(SIGTERM, &sa, nullptr) != 0) return false;
  Log()->debug("SIGTERM leaves the job at the next commit");
  return true;
}

// init() failed: SIGTERM ends the process again, and one that came while
// it tried does now (there is no job to leave).
void UninstallGracefulLeave(const absl::Status& why) {
  ::signal(SIGTERM, SIG_DFL);
  if (!leave_requested.load()) return;
  Log()->warn("{}; the process ends as SIGTERM ends it",
              std::string(why.message()));
  ::raise(SIGTERM);
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
// Shared with the calls in flight that block outside api_mu.
std::shared_ptr<worker::Job> job ABSL_GUARDED_BY(api_mu);

// A process that exits with kolo initialised (returns from main without
// shutdown(), or calls exit()) shuts down here, before static destruction:
// otherwise ~Job would run among the statics while gRPC's threads still
// call into the session and the runtime. Registered by the first init(),
// after every static it uses was constructed, so it runs before they are
// destroyed.
void ShutdownAtExit() {
  {
    MutexLock lock(&api_mu);
    if (job == nullptr) return;
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
  if (job != nullptr) return absl::OkStatus();
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
  const bool graceful = config->elastic && InstallGracefulLeave();
  auto started = worker::Job::Start(*std::move(config),
                                    [] { return leave_requested.load(); });
  if (!started.ok()) {
    if (graceful) UninstallGracefulLeave(started.status());
    return started.status();
  }
  job = *std::move(started);
  worker::BumpOpsGeneration();
  static const bool at_exit = std::atexit(ShutdownAtExit) == 0;
  if (!at_exit) Log()->warn("could not register kolo's shutdown at exit");
  const proto::Membership m = job->membership();
  SetLogRank(m.rank());
  Publish(&m, job->config().worker_id, job->data_address());
  Log()->info(
      "initialised: rank {} of {}, local {} of {}, cross {} of {}, "
      "data at {}",
      m.rank(), m.size(), m.local_rank(), m.local_size(), m.cross_rank(),
      m.cross_size(), job->data_address());
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
  if (job == nullptr) return absl::OkStatus();
  worker::BumpOpsGeneration();  // before anything stops: see CurrentOps
  Publish(nullptr, "", "");
  absl::Status s = job->Stop();
  job.reset();
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
    if (job == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "control_allgather('", key, "') called before kolo::init()"));
    }
    client = job->attachment().client;
  }
  return client->Exchange(key, value, timeout);
}

namespace {

// The data plane of the current job, or kFailedPrecondition naming `op`.
absl::StatusOr<std::shared_ptr<DataPlane>> Data(absl::string_view op) {
  MutexLock lock(&api_mu);
  if (job == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(op, " called before kolo::init()"));
  }
  return job->attachment().epochs->current()->data;
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
  // Each submission asks: the thread remembers the answer while no epoch
  // or job changed since it looked it up (worker::OpsGeneration), which
  // spares it two locks and two reference counts.
  struct Remembered {
    uint64_t generation = 0;
    std::weak_ptr<worker::OpRuntime> ops;
  };
  thread_local Remembered remembered;
  const uint64_t generation = worker::OpsGeneration();
  if (remembered.generation == generation) {
    if (std::shared_ptr<worker::OpRuntime> ops = remembered.ops.lock()) {
      return ops;
    }
  }
  MutexLock lock(&api_mu);
  if (job == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(op, " called before kolo::init() (or after shutdown())"));
  }
  std::shared_ptr<worker::OpRuntime> ops =
      job->attachment().epochs->current()->ops;
  remembered = {generation, ops};
  return ops;
}

absl::StatusOr<std::shared_ptr<worker::OpRuntime>> OpsForHandle(
    absl::string_view op, Handle handle) {
  MutexLock lock(&api_mu);
  if (job == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(op, " called before kolo::init() (or after shutdown())"));
  }
  return job->attachment().epochs->ForHandle(handle)->ops;
}

namespace {

// The current Job and its attachment, or kFailedPrecondition with `message`.
absl::StatusOr<std::pair<std::shared_ptr<worker::Job>, worker::Job::Attachment>>
CurrentJob(absl::string_view message) {
  MutexLock lock(&api_mu);
  if (job == nullptr) return absl::FailedPreconditionError(message);
  return std::make_pair(job, job->attachment());
}

}  // namespace

absl::Status AwaitSessionVerdict() {
  auto current =
      CurrentJob("waiting for the coordinator's verdict found kolo shut down");
  if (!current.ok()) return current.status();
  return current->first->AwaitVerdict(current->second);
}

absl::Status Rejoin(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  auto current = CurrentJob(
      "rejoining found kolo shut down (kolo::shutdown() was called)");
  if (!current.ok()) return current.status();
  const std::shared_ptr<worker::Job>& joined = current->first;
  if (!joined->config().elastic) {
    return absl::FailedPreconditionError(
        "only a worker of an elastic job rejoins after its eviction");
  }
  auto rejoined = joined->Rejoin(current->second, deadline);
  if (!rejoined.ok()) return rejoined.status();
  const proto::Membership m = rejoined->epochs->current()->membership;
  const std::shared_ptr<worker::SessionClient> client = rejoined->client;
  {
    MutexLock lock(&api_mu);
    if (job == nullptr) {
      (void)client->Shutdown();
      return absl::FailedPreconditionError(
          "kolo was shut down while this worker rejoined");
    }
    job->Adopt(*std::move(rejoined));
  }
  SetLogRank(m.rank());
  Publish(&m, joined->config().worker_id, joined->data_address());
  Log()->info("rejoined in epoch {}: rank {} of {}", client->epoch(), m.rank(),
              m.size());
  return absl::OkStatus();
}

bool IsElasticJob() {
  MutexLock lock(&api_mu);
  return job != nullptr && job->config().elastic;
}

absl::Duration CoordinatorReconnectWindow() {
  MutexLock lock(&api_mu);
  if (job == nullptr || !job->MayOutliveCoordinator()) {
    return absl::ZeroDuration();
  }
  // A second past the lost Session's own end (status 75, the lost
  // coordinator's exit code): a coordinator that does not come back ends
  // the worker as a lost one always does, and its launcher replaces it.
  return job->config().lease + worker::kReconnectGrace + absl::Seconds(1);
}

bool LeaveRequested() { return leave_requested.load(); }

void RequestLeave() { leave_requested.store(true); }

absl::Status AwaitNextEpoch(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  auto current = CurrentJob(
      "the elastic retry found kolo shut down (kolo::shutdown() was "
      "called, or init() never was)");
  if (!current.ok()) return current.status();
  auto next = current->first->AwaitNextEpoch(current->second, deadline);
  if (!next.ok()) return next.status();
  if (*next == nullptr) return absl::OkStatus();  // the epoch is alive
  const proto::Membership& m = (*next)->membership;
  SetLogRank(m.rank());
  Publish(&m, current->first->config().worker_id,
          current->first->data_address());
  Log()->info("epoch {}: rank {} of {}, local {} of {}, cross {} of {}",
              (*next)->number, m.rank(), m.size(), m.local_rank(),
              m.local_size(), m.cross_rank(), m.cross_size());
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace kolo
