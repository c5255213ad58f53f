// WorkerConfig: everything a worker reads from its environment, parsed once
// at init() into one struct and passed down. No other part of the worker
// library reads the environment.
//
// How the worker was launched decides where its rank, size and coordinator
// come from (first match wins):
//   kolorun   KOLO_LAUNCHER=kolorun: KOLO_COORDINATOR, KOLO_JOB_ID,
//             KOLO_WORKER_ID, KOLO_HOSTNAME, KOLO_RANK, KOLO_SIZE,
//             KOLO_LOCAL_RANK, KOLO_SECRET. kolorun hosts the coordinator.
//   torchrun  RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT.
//   Open MPI  OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK. (Before Slurm:
//             mpirun inside an allocation inherits SLURM_PROCID.)
//   Slurm     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURMD_NODENAME.
//   single    none of the above: one worker (rank 0 of 1) hosting its own
//             coordinator on 127.0.0.1 with a random secret, as Horovod does
//             when a script runs without horovodrun.
// Outside kolorun, rank 0 hosts the coordinator at KOLO_COORDINATOR, else at
// MASTER_ADDR:MASTER_PORT, unless KOLO_HOST_COORDINATOR=0 says one (a
// standalone kolo-coordinator) already runs there.
//
// Every knob is declared once, with its default and why: below, or in
// common/knobs.h for those kolorun and kolo-coordinator read too
// (docs/configuration.md lists them for users).
// Bad values are kInvalidArgument naming the variable and the value.
//
// Thread-safety: ParseWorkerConfig is a pure function. ReadProcessEnvironment
// and ScrubSecretFromProcessEnvironment touch the process environment (not
// thread-safe against concurrent getenv/setenv by other code); call them from
// init() only.
#ifndef KOLO_WORKER_LIB_CONFIG_H_
#define KOLO_WORKER_LIB_CONFIG_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "allreduce/collectives.h"
#include "allreduce/hierarchy.h"
#include "allreduce/tcp/tcp_options.h"
#include "common/autotune_config.h"
#include "common/fault_spec.h"
#include "common/knob_defaults.h"
#include "common/knobs.h"
#include "common/net.h"
#include "common/tls.h"

namespace kolo::worker {

using EnvMap = absl::flat_hash_map<std::string, std::string>;

enum class LaunchMode { kKolorun, kTorchrun, kOpenMpi, kSlurm, kSingle };
absl::string_view LaunchModeName(LaunchMode mode);

struct WorkerConfig {
  LaunchMode launch_mode = LaunchMode::kSingle;

  // --- Identity -------------------------------------------------------------
  std::string job_id;     // KOLO_JOB_ID, TORCHELASTIC_RUN_ID, SLURM_JOB_ID
  std::string worker_id;  // KOLO_WORKER_ID, else "rank<R>@<host>"
  uint32_t worker_incarnation = 0;  // KOLO_WORKER_INCARNATION
  std::string host_name;            // KOLO_HOSTNAME, SLURMD_NODENAME, kernel's
  int rank = 0;         // the launcher's rank (a hint to the coordinator)
  int size = 1;         // the world size the launcher promised
  int local_rank = -1;  // the launcher's local rank, -1 if not given

  // --- Coordinator ----------------------------------------------------------
  net::HostPort coordinator;       // where to connect
  std::string coordinator_source;  // which variables gave it, for messages
  // KOLO_HOST_COORDINATOR (0/1): whether rank 0 starts the coordinator.
  // Default: yes unless launched by kolorun (which runs it itself). Only
  // rank 0 ever hosts.
  bool host_coordinator = false;
  // KOLO_SECRET, else the content of KOLO_SECRET_FILE. Required (a random one
  // in single mode). Never logged.
  std::string secret;
  // KOLO_AUTOTUNE and its settings (common/autotune_config.h), read only
  // where this process hosts the coordinator (rank 0 outside kolorun), whose
  // autotuner they configure; kolorun and kolo-coordinator read them
  // themselves.
  AutotuneConfig autotune;
  // KOLO_TLS_CERT, KOLO_TLS_KEY, KOLO_TLS_CA (common/tls.h): the job's
  // certificates, read and checked at init; null: the control plane is
  // plaintext. Shared: the Session and a hosted coordinator use them.
  std::shared_ptr<const tls::TlsMaterial> tls;

  // --- Shared knobs ---------------------------------------------------------
  // start_timeout (init()'s deadline), heartbeat_interval, heartbeat_timeout
  // (used when this process hosts the coordinator), data_timeout, cycle_time,
  // stall_check, stall_shutdown and log_level: the knobs this library shares
  // with kolorun and kolo-coordinator, declared with their variables,
  // aliases, defaults, ranges and reasons in common/knobs.h.
  KnobValues knobs;

  // --- Timing ---------------------------------------------------------------
  // KOLO_LEASE_SECONDS: a coordinator silent this long (it heartbeats every
  // interval) is lost: pending calls fail and the worker exits. 10 s rides
  // out GC pauses and loaded hosts; must exceed the heartbeat interval.
  absl::Duration lease = knob_defaults::kLease;

  // --- Data plane -----------------------------------------------------------
  // The data address defaults to the local address of the route to the
  // coordinator (a wrong interface is Horovod's most common hang); these
  // override it. KOLO_ADDR wins over KOLO_IFACE.
  std::string data_addr;   // KOLO_ADDR: advertise exactly this IP
  std::string data_iface;  // KOLO_IFACE: advertise this interface's IPv4
  // KOLO_SPIN_US: how long a data-plane wait polls before it blocks. Spinning
  // pays only when every local rank has a core: with more local ranks than
  // cores the runtime does not spin at all (docs/design.md "Waiting
  // policy").
  absl::Duration spin = absl::Microseconds(50);
  // KOLO_SMALL_ALLREDUCE_BYTES: allreduces up to this size use the
  // latency-optimal algorithm (direct exchange / recursive doubling), larger
  // ones the pipelined ring. -1 (unset): DefaultSmallBytes(world size) in
  // allreduce/collectives.h, 64 KiB at 2 ranks to 256 KiB from 4, where
  // the ring's extra steps start to cost less than sending the whole buffer
  // log2(n) times (measured on loopback).
  int64_t small_allreduce_bytes = -1;
  // KOLO_ALLREDUCE_ALGORITHM = auto | ring | small (like NCCL_ALGO): forces
  // allreduce's algorithm whatever the size (the other collectives still
  // choose their own). auto, the default, picks by KOLO_SMALL_ALLREDUCE_BYTES;
  // forcing one is for tests and for measuring one algorithm across sizes.
  Algorithm allreduce_algorithm = Algorithm::kAuto;
  // KOLO_SEGMENT_BYTES: the message size of the pipelined algorithms (ring
  // allreduce/allgather/reducescatter, chain broadcast). 0, the default,
  // lets them choose from the chunk size (a quarter of it, within 64 KiB -
  // 1 MiB, as measured on loopback; docs/benchmarks.md); set it to tune a
  // particular network.
  int64_t segment_bytes = 0;
  // KOLO_SOCKET_SNDBUF / KOLO_SOCKET_RCVBUF: the data connections' socket
  // buffers in bytes; 0 keeps the kernel's autotuning. 256 KiB / 512 KiB by
  // default: bytes in flight stay in cache (measured ~1.5x faster 1 MiB
  // allreduces on loopback); raise them for long fat networks.
  int64_t socket_sndbuf = 256 * 1024;
  int64_t socket_rcvbuf = 512 * 1024;
  // KOLO_SHM: ranks with the same launcher host name exchange data through
  // shared memory (allreduce/shm/); 0 keeps TCP for them too, to compare.
  bool shm = true;
  // KOLO_SHM_BYTES: the size of an epoch's shared-memory segment: half (at
  // most 2 MiB per rank) for one slot per local rank, which ShmAllreduce
  // reduces out of when every rank shares the host (1 MiB each at 4 ranks;
  // none below 64 KiB), the rest split evenly into one ring per ordered
  // pair of local ranks (2 MiB each at 2 ranks, ~340 KiB at 4, ~73 KiB at
  // 8). Touched lazily: the memory in use is what was carried.
  int64_t shm_bytes = 8 << 20;
  // KOLO_HIERARCHICAL = auto | 0 | 1 (alias HOROVOD_HIERARCHICAL_ALLREDUCE,
  // 0/1): allreduce, allgather, broadcast and reducescatter run in two
  // levels, within each launcher host and across hosts among one rank per
  // host (allreduce/hierarchical.h). auto, the default, turns it on when the
  // epoch spans at least two hosts and some host has two ranks or more: then
  // most steps stay on the host (shared memory) and fewer cross the network;
  // with one host, or one rank per host, the flat algorithms are already
  // that. 1 forces it (for tests and to compare), 0 keeps the flat ones.
  // Horovod's variable governs allreduce only; here it governs all four.
  HierarchicalMode hierarchical = HierarchicalMode::kAuto;
  // KOLO_TCP_CONGESTION: comma-separated TCP congestion controls for the data
  // connections, the first one the kernel accepts wins; "system" keeps the
  // kernel's default. cubic (reno where an unprivileged process may not pick
  // cubic) by default: pacing-based BBR throttles a collective's bursts.
  std::vector<std::string> tcp_congestion = {"cubic", "reno"};
  // KOLO_DATA_ENCRYPTION = none | aes-256-gcm (alias aes-gcm): encrypt and
  // authenticate every frame of the TCP data connections
  // (allreduce/tcp/record_cipher.h), with keys derived from the job secret
  // per epoch, connection and direction. Every worker must set the same
  // (the data-plane handshake refuses a mismatch). Shared memory between
  // the ranks of one host stays unencrypted (same host, same user).
  DataEncryption data_encryption = DataEncryption::kNone;

  // --- Negotiation (used when this process hosts the coordinator) -----------
  // KOLO_NEGOTIATION_LINK (0/1): carry announcements, plans and Done on a
  // plain TCP link to the coordinator beside the Session stream (1, the
  // default: a gRPC stream round trip costs several times a socket's), or on
  // the stream itself (0; for comparison, or where only the gRPC port is
  // reachable). A link that cannot be opened falls back to the stream with a
  // warning.
  bool negotiation_link = true;
  // KOLO_FAST_PATH (0/1): once every rank's step is in the response cache,
  // negotiate it among the ranks over the data plane instead of through the
  // coordinator (runtime/fast_path_link.h; needs the negotiation link). On
  // unless a rank sets 0 (then no rank takes it).
  bool fast_path = true;
  // KOLO_ELASTIC (set by kolorun --min-np, or by hand with a standalone
  // kolo-coordinator --min-np): the job is elastic (docs/design.md
  // "Elastic").
  // Refused on a worker that would host the coordinator: the coordinator
  // must outlive any worker.
  bool elastic = false;
  // KOLO_COORDINATOR_RETURNS (0/1): whether a lost coordinator may be started
  // again, so that the worker waits for it within its lease instead of
  // exiting. Unset: yes for an elastic job's standalone coordinator, no for
  // kolorun's (it ends with kolorun) and rank 0's (it ends with rank 0).
  // kolorun sets 1 when a fault of its plan starts its coordinator again.
  std::optional<bool> coordinator_returns;

  // --- Fusion, response cache, timeline (issue 5) ----------------------------
  // KOLO_FUSION_THRESHOLD (alias HOROVOD_FUSION_THRESHOLD), bytes: ready
  // allreduces (and allgathers) that agree on dtype, reduce op, scale factors
  // and device are packed into one buffer of at most this size and run as
  // one collective. 128 MiB, as Horovod: a ResNet-50 step fits in one buffer.
  // 0 = no fusion. The coordinator uses the smallest value over the ranks;
  // kolo::set_fusion_threshold changes it at run time.
  int64_t fusion_threshold = knob_defaults::kFusionThreshold;
  // KOLO_FUSION_DIRECT_BYTES, bytes: tensors at least this big never fuse;
  // they run in place, skipping the copies into and out of the fusion
  // buffer, which cost more than a collective's fixed cost from about this
  // size (docs/benchmarks.md). 0 = nothing fuses.
  int64_t fusion_direct_bytes = knob_defaults::kFusionDirectBytes;
  // KOLO_CACHE_CAPACITY (alias HOROVOD_CACHE_CAPACITY), entries: tensors
  // announced again with unchanged metadata travel as a cache bit instead of
  // a Request. 1024, as Horovod: above the tensor count of common models.
  // 0 = no cache. kolo::set_cache_capacity changes it at run time.
  int64_t cache_capacity = knob_defaults::kCacheCapacity;
  // KOLO_TIMELINE (alias HOROVOD_TIMELINE): a path; rank 0 writes a Chrome
  // trace of every op there (chrome://tracing, Perfetto). Empty = none.
  // "DYNAMIC" (as Horovod): none at start, but kolo::start_timeline /
  // stop_timeline may open and close one at run time (timeline_dynamic).
  std::string timeline;
  bool timeline_dynamic = false;
  // KOLO_DISABLE_GROUP_FUSION (alias HOROVOD_DISABLE_GROUP_FUSION): 1 = the
  // members of a grouped op fuse only with each other, not with other
  // tensors. Default 0.
  bool disable_group_fusion = false;

  // --- Fault injection (set by kolorun --fault; worker_lib/fault_hook.h) ---
  // KOLO_FAULT_EVENTS: the file this worker appends its fault events to;
  // empty (the default): the fault hook is never armed.
  std::string fault_events;
  // KOLO_FAULT_PLAN: the job's worker-fired faults, "ID=SPEC;..."
  // (common/fault_spec.h).
  std::vector<PlannedFault> fault_plan;
  // KOLO_FAULT_ORIGIN_MS: kolorun's start (Unix ms), from which after=
  // counts. Default: now.
  absl::Time fault_origin = absl::UnixEpoch();

  // KOLO_CUDA_STAGING (no Horovod alias: Horovod has no such switch): 1 =
  // CUDA tensors always go through pinned host memory on kolo's own data
  // plane, even where NCCL is built and usable. Default 0: NCCL where it can
  // serve the tensor (docs/gpus.md).
  bool cuda_staging = false;
};

// Parses `env` (variable -> value). `kernel_host_name` is the fallback host
// name (tests pass a fixed one).
absl::StatusOr<WorkerConfig> ParseWorkerConfig(
    const EnvMap& env, absl::string_view kernel_host_name);

// One warning per KOLO_* variable in `env` that no part of kolo reads (a
// typo would otherwise be ignored in silence), sorted by name, e.g.
//   KOLO_CYCLE_TIME=5 is not a kolo variable; did you mean
//   KOLO_CYCLE_TIME_MS? (docs/configuration.md lists every variable)
// The suggestion is the known variable closest by edit distance (case and
// transpositions forgiven), or one that is a prefix of the name or has it as
// a prefix (a unit added or left out); none when no known name is within
// about a third of the name's length or so related. Values are not shown for
// names that look secret or are closest to one (a misspelt KOLO_SECRET).
// Only names starting with KOLO_ are checked (HOROVOD_* and others are not).
// init() logs these; kolorun prints them for its own environment.
std::vector<std::string> UnknownVariableWarnings(const EnvMap& env);

// Every KOLO_* environment variable some part of kolo reads (the worker
// library, kolorun, kolo-coordinator, kolo-bench, the tests and scripts:
// common/variables.h's table), sorted. UnknownVariableWarnings checks
// against it.
std::vector<std::string> KnownVariables();

// The real environment as an EnvMap. A KOLO_SECRET scrubbed earlier by
// ScrubSecretFromProcessEnvironment is put back in the map (not in environ),
// so a later init() in the same process still finds it.
EnvMap ReadProcessEnvironment();

// Removes KOLO_SECRET from environ (remembering it for ReadProcessEnvironment)
// so that processes this worker starts do not inherit the secret.
void ScrubSecretFromProcessEnvironment();

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_CONFIG_H_
