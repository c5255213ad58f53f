#include "worker_lib/config.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/auth.h"
#include "common/mutex.h"

extern char** environ;

namespace kolo::worker {
namespace {

// Every knob of common/knobs.h's table.
constexpr const Knob* kSharedKnobs[] = {
    &knobs::kStartTimeout, &knobs::kHeartbeatInterval,
    &knobs::kHeartbeatTimeout, &knobs::kCycleTime, &knobs::kStallCheck,
    &knobs::kStallShutdown, &knobs::kDataTimeout, &knobs::kLogLevel,
    // How long an elastic newcomer may wait to be admitted (StartRuntime);
    // kolorun passes --elastic-timeout down as KOLO_ELASTIC_TIMEOUT.
    &knobs::kElasticTimeout};

constexpr char kSecretHowTo[] =
    "write a secret with `openssl rand -hex 32 > /path/secret` and set "
    "KOLO_SECRET_FILE=/path/secret on every worker";

// The value of `name`; an empty value counts as unset.
std::optional<std::string> Get(const EnvMap& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// The first of `names` that is set, with its name.
struct Found {
  std::string name, value;
};
std::optional<Found> First(const EnvMap& env,
                           std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (auto v = Get(env, n)) return Found{n, *v};
  }
  return std::nullopt;
}

absl::Status Bad(absl::string_view name, absl::string_view value,
                 absl::string_view want) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad value ", name, "='", value, "': expected ", want));
}

absl::StatusOr<int> ParseInt(const std::string& name, const std::string& value,
                             int min, int max) {
  int v = 0;
  if (!absl::SimpleAtoi(value, &v) || v < min || v > max) {
    return Bad(name, value, absl::StrCat("an integer in ", min, "..", max));
  }
  return v;
}

absl::StatusOr<int64_t> ParseInt64(const Found& f, int64_t min, int64_t max) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(f.value, &v) || v < min || v > max) {
    return Bad(f.name, f.value, absl::StrCat("an integer in ", min, "..", max));
  }
  return v;
}

// A required integer variable of launch mode `mode`.
absl::StatusOr<int> RequiredInt(const EnvMap& env, const std::string& name,
                                int min, LaunchMode mode) {
  auto v = Get(env, name);
  if (!v) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " is not set, but the environment looks like a ",
                     LaunchModeName(mode), " launch, which sets it"));
  }
  return ParseInt(name, *v, min, 1 << 24);
}

absl::StatusOr<bool> ParseBool(const Found& f) {
  std::string v = absl::AsciiStrToLower(f.value);
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return Bad(f.name, f.value, "0 or 1");
}

// Launch mode, rank, size and local rank.
absl::Status ParseTopology(const EnvMap& env, WorkerConfig& c) {
  const char* rank_var = nullptr;
  const char* size_var = nullptr;
  const char* local_var = nullptr;
  if (auto l = Get(env, "KOLO_LAUNCHER")) {
    if (*l != "kolorun") {
      return Bad("KOLO_LAUNCHER", *l, "'kolorun' (or unset)");
    }
    c.launch_mode = LaunchMode::kKolorun;
    rank_var = "KOLO_RANK", size_var = "KOLO_SIZE";
    local_var = "KOLO_LOCAL_RANK";
  } else if (Get(env, "RANK") && Get(env, "WORLD_SIZE")) {
    c.launch_mode = LaunchMode::kTorchrun;
    rank_var = "RANK", size_var = "WORLD_SIZE", local_var = "LOCAL_RANK";
  } else if (Get(env, "OMPI_COMM_WORLD_RANK")) {
    c.launch_mode = LaunchMode::kOpenMpi;
    rank_var = "OMPI_COMM_WORLD_RANK", size_var = "OMPI_COMM_WORLD_SIZE";
    local_var = "OMPI_COMM_WORLD_LOCAL_RANK";
  } else if (Get(env, "SLURM_PROCID")) {
    c.launch_mode = LaunchMode::kSlurm;
    rank_var = "SLURM_PROCID", size_var = "SLURM_NTASKS";
    local_var = "SLURM_LOCALID";
  } else {
    c.launch_mode = LaunchMode::kSingle;
    c.rank = 0, c.size = 1, c.local_rank = 0;
    return absl::OkStatus();
  }
  auto size = RequiredInt(env, size_var, 1, c.launch_mode);
  if (!size.ok()) return size.status();
  auto rank = RequiredInt(env, rank_var, 0, c.launch_mode);
  if (!rank.ok()) return rank.status();
  if (*rank >= *size) {
    return absl::InvalidArgumentError(
        absl::StrCat(rank_var, "=", *rank, " is not below ", size_var, "=",
                     *size, ": ranks run from 0 to size-1"));
  }
  c.rank = *rank, c.size = *size;
  if (auto lr = Get(env, local_var)) {
    auto v = ParseInt(local_var, *lr, 0, *size - 1);
    if (!v.ok()) return v.status();
    c.local_rank = *v;
  }
  return absl::OkStatus();
}

// The coordinator_source of a worker alone with a private coordinator.
constexpr char kAloneCoordinator[] = "the single-worker default";

// Where the coordinator is, and whether this process starts it.
absl::Status ParseCoordinator(const EnvMap& env, WorkerConfig& c) {
  // A job of one worker: the process alone (no launcher), or a launcher's
  // single task (`sbatch -n 1` running the script itself, `srun -n 1`,
  // `srun --pty bash`, `mpirun -np 1`): nobody else must find its
  // coordinator, so it needs no address, and without one no shared secret.
  const bool single = c.launch_mode == LaunchMode::kSingle || c.size == 1;
  const bool kolorun = c.launch_mode == LaunchMode::kKolorun;
  c.host_coordinator = c.rank == 0 && !kolorun;
  if (auto h = First(env, {"KOLO_HOST_COORDINATOR"})) {
    auto v = ParseBool(*h);
    if (!v.ok()) return v.status();
    if (*v && kolorun) {
      // Rank 0 would try kolorun's own port and fail on every start.
      return absl::FailedPreconditionError(
          "KOLO_HOST_COORDINATOR=1 under kolorun: kolorun runs the job's "
          "coordinator itself, on the port KOLO_COORDINATOR names, so rank 0 "
          "cannot host one there; unset KOLO_HOST_COORDINATOR (it is for "
          "torchrun, Slurm and Open MPI launches)");
    }
    c.host_coordinator = c.rank == 0 && *v;
  }
  std::string address;
  if (auto k = Get(env, "KOLO_COORDINATOR")) {
    address = *k;
    c.coordinator_source = "KOLO_COORDINATOR";
  } else if (kolorun) {
    return absl::InvalidArgumentError(
        "KOLO_LAUNCHER=kolorun but KOLO_COORDINATOR is not set: kolorun sets "
        "it for every worker; start workers through kolorun, or set "
        "KOLO_COORDINATOR=host:port");
  } else {
    auto addr = Get(env, "MASTER_ADDR");
    auto port = Get(env, "MASTER_PORT");
    // torchrun's static rendezvous: its agent's own store listens on
    // MASTER_PORT (torch compares the variable with "True" too).
    const bool agent_store =
        c.launch_mode == LaunchMode::kTorchrun && addr && port &&
        Get(env, "TORCHELASTIC_USE_AGENT_STORE") == std::string("True");
    if (agent_store) {
      return absl::FailedPreconditionError(absl::StrCat(
          "under torchrun MASTER_PORT=", *port,
          " is torchrun's own rendezvous store, so kolo's coordinator cannot "
          "run there: set KOLO_COORDINATOR=",
          *addr,
          ":<a free port other than MASTER_PORT> and KOLO_SECRET_FILE=<a file "
          "holding the job secret> on every worker (kolo.torch sets both "
          "itself through torchrun's store)"));
    } else if (addr && port) {
      address = absl::StrCat(*addr, ":", *port);
      c.coordinator_source = "MASTER_ADDR:MASTER_PORT";
    } else if (single && !addr && !port && c.host_coordinator) {
      address = "127.0.0.1:0";
      c.coordinator_source = kAloneCoordinator;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "no coordinator address for this ", LaunchModeName(c.launch_mode),
          " launch", addr ? " (MASTER_PORT is not set)" : "",
          port ? " (MASTER_ADDR is not set)" : "",
          ": set KOLO_COORDINATOR=host:port (rank 0's host and a free port) or "
          "MASTER_ADDR/MASTER_PORT on every worker"));
    }
  }
  // Port 0 (the kernel picks) only works when nobody else must find it.
  const bool lone_host = c.host_coordinator && c.size == 1;
  auto hp = net::ParseHostPort(address, /*allow_zero=*/lone_host);
  if (!hp.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad coordinator address from ", c.coordinator_source,
                     ": ", hp.status().message()));
  }
  c.coordinator = *hp;
  return absl::OkStatus();
}

absl::Status ParseSecret(const EnvMap& env, WorkerConfig& c) {
  if (auto s = Get(env, "KOLO_SECRET")) {
    c.secret = *s;
  } else if (auto f = Get(env, "KOLO_SECRET_FILE")) {
    auto loaded = auth::LoadSecretFile(*f);
    if (!loaded.ok()) return loaded.status();
    c.secret = *loaded;
  } else if (c.host_coordinator &&
             (c.launch_mode == LaunchMode::kSingle ||
              c.coordinator_source == kAloneCoordinator)) {
    c.secret = auth::RandomHex(32);  // nobody else needs to know it
  } else {
    return absl::FailedPreconditionError(absl::StrCat(
        "no job secret for worker ", c.worker_id, " (",
        LaunchModeName(c.launch_mode),
        " launch): the coordinator only admits "
        "workers that prove they know the job's secret; ",
        kSecretHowTo, " (or pass the secret itself in KOLO_SECRET)"));
  }
  if (c.secret.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the job secret is empty; ", kSecretHowTo));
  }
  // (A secret file was checked when it was read.)
  if (Get(env, "KOLO_SECRET")) {
    return auth::CheckSecretStrength(c.secret, "KOLO_SECRET");
  }
  return absl::OkStatus();
}

// KOLO_LEASE_SECONDS (checked against the heartbeat interval by
// CheckLease, once every variable is read).
absl::Status ParseLease(const EnvMap& env, WorkerConfig& c) {
  if (auto f = First(env, {"KOLO_LEASE_SECONDS"})) {
    double s = 0;
    if (!absl::SimpleAtod(f->value, &s) || !(s > 0) || s > 1e7) {
      return Bad(f->name, f->value,
                 "a positive number of seconds up to 10000000");
    }
    c.lease = absl::Seconds(s);
  }
  return absl::OkStatus();
}

// How this worker takes part in the job: elastic or not, and whether it
// negotiates on a link of its own.
absl::Status ParseJobMode(const EnvMap& env, WorkerConfig& c) {
  if (auto f = First(env, {"KOLO_ELASTIC"})) {
    auto v = ParseBool(*f);
    if (!v.ok()) return v.status();
    c.elastic = *v;
    if (c.elastic && c.host_coordinator) {
      return absl::FailedPreconditionError(absl::StrCat(
          "KOLO_ELASTIC=1 but rank ", c.rank,
          " would host the coordinator (torchrun/Slurm-style start): an "
          "elastic job's coordinator must outlive every worker. Launch with "
          "kolorun --min-np N, or run kolo-coordinator --min-np N and set "
          "KOLO_COORDINATOR=host:port KOLO_HOST_COORDINATOR=0 on the "
          "workers"));
    }
  }
  if (auto f = First(env, {"KOLO_COORDINATOR_RETURNS"})) {
    auto v = ParseBool(*f);
    if (!v.ok()) return v.status();
    if (*v && (!c.elastic || c.host_coordinator)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "KOLO_COORDINATOR_RETURNS=1 but ",
          c.host_coordinator
              ? absl::StrCat("rank ", c.rank,
                             " hosts the coordinator, which ends with it")
              : std::string("the job is not elastic (KOLO_ELASTIC=1): a "
                            "fixed job ends when its coordinator is lost"),
          "; unset it"));
    }
    c.coordinator_returns = *v;
  }
  if (auto f = First(env, {"KOLO_NEGOTIATION_LINK"})) {
    auto v = ParseBool(*f);
    if (!v.ok()) return v.status();
    c.negotiation_link = *v;
  }
  if (auto f = First(env, {"KOLO_FAST_PATH"})) {
    auto v = ParseBool(*f);
    if (!v.ok()) return v.status();
    c.fast_path = *v;
  }
  return absl::OkStatus();
}

// The data plane's waiting, sizes and shared memory.
absl::Status ParseDataPlane(const EnvMap& env, WorkerConfig& c) {
  if (auto f = First(env, {"KOLO_SPIN_US"})) {
    auto us = ParseInt(f->name, f->value, 0, 1000000);
    if (!us.ok()) return us.status();
    c.spin = absl::Microseconds(*us);
  }
  for (auto [name, field] :
       {std::pair{"KOLO_SMALL_ALLREDUCE_BYTES", &c.small_allreduce_bytes},
        std::pair{"KOLO_SEGMENT_BYTES", &c.segment_bytes},
        std::pair{"KOLO_SOCKET_SNDBUF", &c.socket_sndbuf},
        std::pair{"KOLO_SOCKET_RCVBUF", &c.socket_rcvbuf}}) {
    if (auto f = First(env, {name})) {
      auto b = ParseInt(f->name, f->value, 0, 1 << 30);
      if (!b.ok()) return b.status();
      *field = *b;
    }
  }
  if (auto f = First(env, {"KOLO_SHM"})) {
    auto v = ParseBool(*f);
    if (!v.ok()) return v.status();
    c.shm = *v;
  }
  if (auto f = First(env, {"KOLO_SHM_BYTES"})) {
    auto b = ParseInt64(*f, 64 * 1024, int64_t{1} << 40);
    if (!b.ok()) return b.status();
    c.shm_bytes = *b;
  }
  return absl::OkStatus();
}

// KOLO_HIERARCHICAL (or Horovod's allreduce-only switch).
absl::Status ParseHierarchical(const EnvMap& env, WorkerConfig& c) {
  if (auto f =
          First(env, {"KOLO_HIERARCHICAL", "HOROVOD_HIERARCHICAL_ALLREDUCE"})) {
    if (absl::AsciiStrToLower(f->value) == "auto") {
      c.hierarchical = HierarchicalMode::kAuto;
    } else {
      auto v = ParseBool(*f);
      if (!v.ok()) return Bad(f->name, f->value, "auto, 0 or 1");
      c.hierarchical = *v ? HierarchicalMode::kOn : HierarchicalMode::kOff;
    }
  }
  return absl::OkStatus();
}

// KOLO_TCP_CONGESTION: names the kernel may accept, or "system".
absl::Status ParseTcpCongestion(const EnvMap& env, WorkerConfig& c) {
  if (auto f = First(env, {"KOLO_TCP_CONGESTION"})) {
    std::vector<std::string> names = absl::StrSplit(
        absl::AsciiStrToLower(f->value), ',', absl::SkipWhitespace());
    for (std::string& name : names) {
      absl::StripAsciiWhitespace(&name);
      if (name.empty() || name.size() > 15 ||
          !std::all_of(name.begin(), name.end(), [](char ch) {
            return absl::ascii_isalnum(ch) || ch == '_' || ch == '-';
          })) {
        return Bad(f->name, f->value,
                   "a comma-separated list of congestion control names "
                   "(e.g. cubic,reno) or system");
      }
    }
    if (names.size() == 1 && names[0] == "system") names.clear();
    c.tcp_congestion = std::move(names);
  }
  return absl::OkStatus();
}

// KOLO_DATA_ENCRYPTION: none, or aes-256-gcm (alias aes-gcm).
absl::Status ParseDataEncryption(const EnvMap& env, WorkerConfig& c) {
  if (auto f = First(env, {"KOLO_DATA_ENCRYPTION"})) {
    const std::string v =
        absl::AsciiStrToLower(absl::StripAsciiWhitespace(f->value));
    if (v == "none" || v == "0" || v.empty()) {
      c.data_encryption = DataEncryption::kNone;
    } else if (v == "aes-256-gcm" || v == "aes-gcm") {
      c.data_encryption = DataEncryption::kAes256Gcm;
    } else {
      return Bad(f->name, f->value, "none or aes-256-gcm");
    }
  }
  return absl::OkStatus();
}

// KOLO_ALLREDUCE_ALGORITHM.
absl::Status ParseAllreduceAlgorithm(const EnvMap& env, WorkerConfig& c) {
  if (auto f = First(env, {"KOLO_ALLREDUCE_ALGORITHM"})) {
    const std::string v = absl::AsciiStrToLower(f->value);
    if (v == "auto") {
      c.allreduce_algorithm = Algorithm::kAuto;
    } else if (v == "ring") {
      c.allreduce_algorithm = Algorithm::kRing;
    } else if (v == "small") {
      c.allreduce_algorithm = Algorithm::kSmall;
    } else {
      return Bad(f->name, f->value, "auto, ring or small");
    }
  }
  return absl::OkStatus();
}

// The lease must outlast the heartbeat interval.
absl::Status CheckLease(const EnvMap&, WorkerConfig& c) {
  if (c.lease <= c.knobs.heartbeat_interval) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KOLO_LEASE_SECONDS (", absl::FormatDuration(c.lease),
        ") must be longer than ", knobs::kHeartbeatInterval.variable, " (",
        absl::FormatDuration(c.knobs.heartbeat_interval),
        "), or every worker would lose the coordinator between heartbeats"));
  }
  return absl::OkStatus();
}

// Fusion, the response cache and the timeline.
absl::Status ParseNegotiation(const EnvMap& env, WorkerConfig& c) {
  if (auto f =
          First(env, {"KOLO_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD"})) {
    auto v = ParseInt64(*f, 0, int64_t{1} << 40);
    if (!v.ok()) return v.status();
    c.fusion_threshold = *v;
  }
  if (auto f = First(env, {"KOLO_FUSION_DIRECT_BYTES"})) {
    auto v = ParseInt64(*f, 0, int64_t{1} << 40);
    if (!v.ok()) return v.status();
    c.fusion_direct_bytes = *v;
  }
  if (auto f = First(env, {"KOLO_CACHE_CAPACITY", "HOROVOD_CACHE_CAPACITY"})) {
    auto v = ParseInt64(*f, 0, int64_t{1} << 20);
    if (!v.ok()) return v.status();
    c.cache_capacity = *v;
  }
  if (auto f = First(env, {"KOLO_TIMELINE", "HOROVOD_TIMELINE"})) {
    c.timeline_dynamic = f->value == "DYNAMIC";
    c.timeline = c.timeline_dynamic ? "" : f->value;
  }
  if (auto f = First(
          env, {"KOLO_DISABLE_GROUP_FUSION", "HOROVOD_DISABLE_GROUP_FUSION"})) {
    auto v = ParseBool(*f);
    if (!v.ok()) return v.status();
    c.disable_group_fusion = *v;
  }
  if (auto f = First(env, {"KOLO_CUDA_STAGING"})) {
    auto v = ParseBool(*f);
    if (!v.ok()) return v.status();
    c.cuda_staging = *v;
  }
  return absl::OkStatus();
}

// kolorun --fault (worker_lib/fault_hook.h).
absl::Status ParseFaults(const EnvMap& env, WorkerConfig& c) {
  c.fault_origin = absl::Now();
  if (auto f = First(env, {"KOLO_FAULT_EVENTS"})) c.fault_events = f->value;
  if (auto f = First(env, {"KOLO_FAULT_PLAN"})) {
    absl::StatusOr<std::vector<PlannedFault>> plan = DecodeWorkerPlan(f->value);
    if (!plan.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("KOLO_FAULT_PLAN: ", plan.status().message()));
    }
    c.fault_plan = *std::move(plan);
  }
  if (auto f = First(env, {"KOLO_FAULT_ORIGIN_MS"})) {
    auto v = ParseInt64(*f, 0, int64_t{1} << 50);
    if (!v.ok()) return v.status();
    c.fault_origin = absl::FromUnixMillis(*v);
  }
  return absl::OkStatus();
}

absl::Status ParseMisc(const EnvMap& env, WorkerConfig& c) {
  if (auto a = Get(env, "KOLO_ADDR")) {
    if (!net::IsIpLiteral(*a)) {
      return Bad("KOLO_ADDR", *a, "an IP address of this host");
    }
    c.data_addr = *a;
  }
  if (auto i = Get(env, "KOLO_IFACE")) c.data_iface = *i;
  if (auto f = First(env, {"KOLO_WORKER_INCARNATION"})) {
    auto v = ParseInt(f->name, f->value, 0, 1 << 30);
    if (!v.ok()) return v.status();
    c.worker_incarnation = static_cast<uint32_t>(*v);
  }
  return absl::OkStatus();
}

// The KOLO_SECRET that ScrubSecretFromProcessEnvironment removed.
Mutex scrubbed_mu;
std::optional<std::string> scrubbed_secret ABSL_GUARDED_BY(scrubbed_mu);

}  // namespace

absl::string_view LaunchModeName(LaunchMode mode) {
  switch (mode) {
    case LaunchMode::kKolorun:
      return "kolorun";
    case LaunchMode::kTorchrun:
      return "torchrun";
    case LaunchMode::kOpenMpi:
      return "Open MPI";
    case LaunchMode::kSlurm:
      return "Slurm";
    case LaunchMode::kSingle:
      return "single-worker";
  }
  return "unknown";
}

// The job's certificates, when KOLO_TLS_* name them: read and checked now,
// so that a wrong file is said at init, not as a refused handshake.
absl::Status ParseTls(const EnvMap& env, WorkerConfig& c) {
  absl::StatusOr<tls::TlsFiles> files =
      tls::TlsFilesFromEnvironment([&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      });
  if (!files.ok()) return files.status();
  if (!files->enabled()) return absl::OkStatus();
  absl::StatusOr<tls::TlsMaterial> material = tls::LoadTlsMaterial(*files);
  if (!material.ok()) {
    return absl::Status(material.status().code(),
                        absl::StrCat("worker ", c.worker_id, ": ",
                                     material.status().message()));
  }
  c.tls = std::make_shared<const tls::TlsMaterial>(*std::move(material));
  return absl::OkStatus();
}

absl::StatusOr<WorkerConfig> ParseWorkerConfig(
    const EnvMap& env, absl::string_view kernel_host_name) {
  WorkerConfig c;
  if (absl::Status s = ParseTopology(env, c); !s.ok()) return s;
  c.host_name = std::string(kernel_host_name);
  if (auto h = First(env, {"KOLO_HOSTNAME", "SLURMD_NODENAME"})) {
    c.host_name = h->value;
  }
  c.job_id = "default";
  if (auto j =
          First(env, {"KOLO_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"})) {
    c.job_id = j->value;
  }
  c.worker_id = absl::StrCat("rank", c.rank, "@", c.host_name);
  if (auto w = Get(env, "KOLO_WORKER_ID")) c.worker_id = *w;
  if (absl::Status s = ParseCoordinator(env, c); !s.ok()) return s;
  if (absl::Status s = ParseSecret(env, c); !s.ok()) return s;
  if (absl::Status s = ParseTls(env, c); !s.ok()) return s;
  // The knobs kolorun and kolo-coordinator share (common/knobs.h): the worker
  // reads every one of them.
  if (absl::Status s = SetKnobsFromEnv(kSharedKnobs, InMap(env), c.knobs);
      !s.ok()) {
    return s;
  }
  // The worker's own knobs, each step a group of them, in this order (the
  // first bad value is the error).
  using Step = absl::Status (*)(const EnvMap&, WorkerConfig&);
  for (Step step :
       {ParseLease, ParseJobMode, ParseDataPlane, ParseHierarchical,
        ParseTcpCongestion, ParseDataEncryption, ParseAllreduceAlgorithm,
        CheckLease, ParseNegotiation, ParseMisc, ParseFaults}) {
    if (absl::Status s = step(env, c); !s.ok()) return s;
  }
  if (c.host_coordinator) {
    if (absl::Status s = AutotuneFromEnv(InMap(env), c.autotune); !s.ok()) {
      return s;
    }
  }
  return c;
}

EnvMap ReadProcessEnvironment() {
  EnvMap env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == absl::string_view::npos) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  MutexLock lock(&scrubbed_mu);
  if (scrubbed_secret.has_value() && !env.contains("KOLO_SECRET")) {
    env["KOLO_SECRET"] = *scrubbed_secret;
  }
  return env;
}

void ScrubSecretFromProcessEnvironment() {
  const char* s = std::getenv("KOLO_SECRET");
  if (s == nullptr) return;
  MutexLock lock(&scrubbed_mu);
  scrubbed_secret = std::string(s);  // a later init() may need it
  ::unsetenv("KOLO_SECRET");
}

}  // namespace kolo::worker
