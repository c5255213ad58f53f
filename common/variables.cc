// The table of common/variables.h and the markdown of its documented rows.
//
// Thread-safety: immutable data and pure functions.
#include "common/variables.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kolo {
namespace {

// The rows, grouped by the page's sections in its order.
constexpr Variable kVariables[] = {
    {.name = "KOLO_START_TIMEOUT",
     .read_by = "worker, kolorun",
     .knob = &knobs::kStartTimeout,
     .section = "Timeouts and failure detection",
     .flag = "`--start-timeout` (kolorun)",
     .unit = "seconds",
     .meaning = "How long the workers have to form the job: `init()`'s "
                "deadline, and kolorun's once the first worker has reached the "
                "coordinator. kolorun passes its value on to the workers."},
    {.name = "KOLO_HEARTBEAT_INTERVAL_MS",
     .read_by = "worker",
     .knob = &knobs::kHeartbeatInterval,
     .section = "Timeouts and failure detection",
     .flag = "`--heartbeat-interval-seconds` (kolo-coordinator, in seconds)",
     .unit = "milliseconds (integer)",
     .meaning = "How often a worker and the coordinator tell each other they "
                "are alive. At most 600000."},
    {.name = "KOLO_HEARTBEAT_TIMEOUT_SECONDS",
     .read_by = "worker, kolorun",
     .knob = &knobs::kHeartbeatTimeout,
     .section = "Timeouts and failure detection",
     .flag = "`--heartbeat-timeout-seconds` (kolorun, kolo-coordinator)",
     .unit = "seconds",
     .meaning =
         "A worker silent this long has failed; the coordinator decides, and "
         "checks every half heartbeat interval. Read by kolorun and by a rank "
         "0 that hosts the coordinator; kolo-coordinator takes the flag only."},
    {.name = "KOLO_LEASE_SECONDS",
     .read_by = "worker",
     .section = "Timeouts and failure detection",
     .unit = "seconds",
     .default_text = "10",
     .meaning = "A worker whose coordinator is silent this long has lost it: "
                "pending calls fail and the worker exits with status 75. Must "
                "be longer than the heartbeat interval."},
    {.name = "KOLO_TIMEOUT_SECONDS",
     .read_by = "worker",
     .knob = &knobs::kDataTimeout,
     .section = "Timeouts and failure detection",
     .unit = "seconds",
     .meaning =
         "A data-plane wait fails after this long without any byte moving, "
         "naming the peer. It does not bound the wait for other ranks to "
         "submit an op: the stall check below names those ranks."},
    {.name = "KOLO_STALL_CHECK_TIME_SECONDS",
     .read_by = "worker, kolorun, kolo-coordinator",
     .knob = &knobs::kStallCheck,
     .section = "Timeouts and failure detection",
     .flag = "`--stall-check-time-seconds` (kolorun, kolo-coordinator, "
             "`kolo-ctl status`)",
     .unit = "seconds",
     .meaning = "A tensor that some ranks submitted and others have not for "
                "this long gets a warning naming the missing ranks, repeated "
                "while the stall lasts. 0 turns the warning off."},
    {.name = "KOLO_STALL_SHUTDOWN_TIME_SECONDS",
     .read_by = "worker, kolorun, kolo-coordinator",
     .knob = &knobs::kStallShutdown,
     .section = "Timeouts and failure detection",
     .flag = "`--stall-shutdown-time-seconds` (kolorun, kolo-coordinator)",
     .unit = "seconds",
     .meaning = "A stall this long fails every pending op, saying why, and "
                "ends the job."},
    {.name = "KOLO_CYCLE_TIME_MS",
     .read_by = "worker, kolorun, kolo-coordinator",
     .knob = &knobs::kCycleTime,
     .section = "Negotiation, fusion and the response cache",
     .flag = "`--cycle-time-ms` (kolorun, kolo-coordinator)",
     .unit = "milliseconds (fractions allowed)",
     .meaning = "The longest a ready tensor waits for others to batch with "
                "while the data plane is busy. On every worker, also the "
                "longest a submission waits to be announced together with "
                "later ones. Greater than 0, at most 60000."},
    {.name = "KOLO_FUSION_THRESHOLD",
     .read_by = "worker",
     .section = "Negotiation, fusion and the response cache",
     .alias = "`HOROVOD_FUSION_THRESHOLD`",
     .unit = "bytes",
     .default_text = "134217728 (128 MiB)",
     .meaning = "Ready allreduces (and allgathers) that agree on dtype, reduce "
                "op, scale factors and device run as one collective over a "
                "fusion buffer of at most this size. 0 turns fusion off. The "
                "coordinator uses the smallest value over the ranks. "
                "`kolo::set_fusion_threshold()` changes it at run time."},
    {.name = "KOLO_FUSION_DIRECT_BYTES",
     .read_by = "worker",
     .section = "Negotiation, fusion and the response cache",
     .unit = "bytes",
     .default_text = "1048576 (1 MiB)",
     .meaning = "Tensors at least this big never fuse: they run in place, "
                "without the copies into and out of the fusion buffer. The "
                "smallest value over the ranks counts."},
    {.name = "KOLO_CACHE_CAPACITY",
     .read_by = "worker",
     .section = "Negotiation, fusion and the response cache",
     .alias = "`HOROVOD_CACHE_CAPACITY`",
     .unit = "entries",
     .default_text = "1024",
     .meaning = "Size of the response cache: a tensor announced again with "
                "unchanged metadata travels as a bit instead of a full "
                "request. 0 turns the cache off. The smallest value over the "
                "ranks counts. `kolo::set_cache_capacity()` changes it at run "
                "time. At most 1048576."},
    {.name = "KOLO_DISABLE_GROUP_FUSION",
     .read_by = "worker",
     .section = "Negotiation, fusion and the response cache",
     .alias = "`HOROVOD_DISABLE_GROUP_FUSION`",
     .unit = "0/1",
     .default_text = "0",
     .meaning = "1: the members of a grouped op fuse only with each other, not "
                "with other tensors. One rank setting it is enough."},
    {.name = "KOLO_AUTOTUNE",
     .read_by =
         "kolorun, kolo-coordinator, a rank 0 that hosts the coordinator",
     .section = "Negotiation, fusion and the response cache",
     .flag = "`--autotune`, `--no-autotune` (kolorun, kolo-coordinator)",
     .alias = "`HOROVOD_AUTOTUNE`",
     .unit = "0/1",
     .default_text = "0",
     .meaning = "1: during the first steps the coordinator tries settings of "
                "the fusion threshold, the cycle time and the response cache "
                "(on or off), scores each by the "
                "bytes reduced per second, and keeps the best; the choice "
                "overrides `KOLO_FUSION_THRESHOLD` (and a cache turned off, "
                "`KOLO_CACHE_CAPACITY`). See "
                "[Autotune](tensor-fusion.md#autotune). Read by kolorun, "
                "kolo-coordinator and a rank 0 that hosts the coordinator "
                "(torchrun, Slurm, by hand), like the settings below."},
    {.name = "KOLO_AUTOTUNE_LOG",
     .read_by =
         "kolorun, kolo-coordinator, a rank 0 that hosts the coordinator",
     .section = "Negotiation, fusion and the response cache",
     .flag = "`--autotune-log-file`",
     .alias = "`HOROVOD_AUTOTUNE_LOG`",
     .unit = "path",
     .default_text = "none",
     .meaning = "The autotuner's CSV log: one line per sample (the setting "
                "and its score), and the choice."},
    {.name = "KOLO_AUTOTUNE_WARMUP_SAMPLES",
     .read_by =
         "kolorun, kolo-coordinator, a rank 0 that hosts the coordinator",
     .section = "Negotiation, fusion and the response cache",
     .flag = "`--autotune-warmup-samples`",
     .alias = "`HOROVOD_AUTOTUNE_WARMUP_SAMPLES`",
     .unit = "samples",
     .default_text = "3",
     .meaning = "Samples at the start that run the starting settings and are "
                "not scored."},
    {.name = "KOLO_AUTOTUNE_STEPS_PER_SAMPLE",
     .read_by =
         "kolorun, kolo-coordinator, a rank 0 that hosts the coordinator",
     .section = "Negotiation, fusion and the response cache",
     .flag = "`--autotune-steps-per-sample`",
     .alias = "`HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE`",
     .unit = "steps",
     .default_text = "10",
     .meaning = "Training steps each setting runs for its score. A step ends "
                "when a tensor comes again."},
    {.name = "KOLO_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
     .read_by =
         "kolorun, kolo-coordinator, a rank 0 that hosts the coordinator",
     .section = "Negotiation, fusion and the response cache",
     .flag = "`--autotune-bayes-opt-max-samples`",
     .alias = "`HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES`",
     .unit = "samples",
     .default_text = "20",
     .meaning = "Scored samples (the starting settings' included) before the "
                "best is chosen and kept. At least 2."},
    {.name = "KOLO_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
     .read_by =
         "kolorun, kolo-coordinator, a rank 0 that hosts the coordinator",
     .section = "Negotiation, fusion and the response cache",
     .flag = "`--autotune-gaussian-process-noise`",
     .alias = "`HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE`",
     .unit = "number",
     .default_text = "0.8",
     .meaning = "How much a score may vary by chance: dlib's relative noise "
                "magnitude for its global optimizer. At least 0."},
    {.name = "KOLO_NEGOTIATION_LINK",
     .read_by = "worker, kolo-bench",
     .section = "Negotiation, fusion and the response cache",
     .unit = "0/1",
     .default_text = "1",
     .meaning =
         "1: announcements, plans and completions travel on a TCP link of "
         "their own to the coordinator (TLS when `KOLO_TLS_CERT` is set). 0: "
         "on the gRPC stream (slower; for comparison, "
         "or where only the coordinator's gRPC port is reachable). A link that "
         "cannot be opened falls back to the stream with a warning."},
    {.name = "KOLO_FAST_PATH",
     .read_by = "worker, kolo-bench",
     .section = "Negotiation, fusion and the response cache",
     .unit = "0/1",
     .default_text = "1",
     .meaning =
         "1: once a step's tensors are in the response cache on every rank, "
         "the ranks agree on them among themselves over the data plane "
         "instead of through the coordinator (the fast path; needs the "
         "negotiation link). 0 on any rank: every negotiation goes through "
         "the coordinator."},
    {.name = "KOLO_ADDR",
     .read_by = "worker",
     .section = "Data plane",
     .unit = "IP address",
     .default_text = "unset",
     .meaning = "The address this worker's data plane advertises; must be one "
                "of this host's. Wins over `KOLO_IFACE`. By default kolo takes "
                "the local address of the route to the coordinator."},
    {.name = "KOLO_IFACE",
     .read_by = "worker",
     .section = "Data plane",
     .unit = "interface name",
     .default_text = "unset",
     .meaning = "Advertise this network interface's IPv4 address."},
    {.name = "KOLO_SPIN_US",
     .read_by = "worker, kolo-bench",
     .section = "Data plane",
     .unit = "microseconds (integer)",
     .default_text = "50",
     .meaning =
         "How long a data-plane wait polls before it blocks. Never spins when "
         "a host runs more ranks than it has cores. At most 1000000."},
    {.name = "KOLO_SMALL_ALLREDUCE_BYTES",
     .read_by = "worker, kolo-bench",
     .section = "Data plane",
     .unit = "bytes",
     .default_text = "65536 at 2 ranks, 131072 at 3, 262144 from 4",
     .meaning =
         "Allreduces up to this size use the latency-optimal algorithm (direct "
         "exchange or recursive doubling), larger ones the pipelined ring."},
    {.name = "KOLO_ALLREDUCE_ALGORITHM",
     .read_by = "worker, kolo-bench",
     .section = "Data plane",
     .unit = "`auto`, `ring` or `small`",
     .default_text = "`auto`",
     .meaning = "`ring` or `small` forces allreduce's algorithm at every size "
                "(as `NCCL_ALGO` does for NCCL); `auto` chooses by "
                "`KOLO_SMALL_ALLREDUCE_BYTES`."},
    {.name = "KOLO_SEGMENT_BYTES",
     .read_by = "worker",
     .section = "Data plane",
     .unit = "bytes",
     .default_text = "0 (automatic)",
     .meaning = "Message size of the pipelined algorithms (ring allreduce, "
                "allgather and reducescatter; chain broadcast). 0: a quarter "
                "of the chunk, within 64 KiB to 1 MiB."},
    {.name = "KOLO_SOCKET_SNDBUF",
     .read_by = "worker",
     .section = "Data plane",
     .unit = "bytes",
     .default_text = "262144",
     .meaning = "Send buffer of each data connection. 0 keeps the kernel's "
                "autotuning. Raise it for networks with a large "
                "bandwidth-delay product."},
    {.name = "KOLO_SOCKET_RCVBUF",
     .read_by = "worker",
     .section = "Data plane",
     .unit = "bytes",
     .default_text = "524288",
     .meaning = "Receive buffer of each data connection. 0 keeps the kernel's "
                "autotuning."},
    {.name = "KOLO_TCP_CONGESTION",
     .read_by = "worker",
     .section = "Data plane",
     .unit = "comma-separated names, or `system`",
     .default_text = "`cubic,reno`",
     .meaning = "TCP congestion control of the data connections; the first one "
                "the kernel accepts wins. `system` keeps the kernel's default "
                "(pacing BBR slows collectives down)."},
    {.name = "KOLO_DATA_ENCRYPTION",
     .read_by = "worker, kolo-bench",
     .section = "Data plane",
     .unit = "`none` or `aes-256-gcm` (alias `aes-gcm`)",
     .default_text = "`none`",
     .meaning = "`aes-256-gcm` encrypts and authenticates every frame of the "
                "TCP data connections, with keys derived from the job secret "
                "per epoch, connection and direction; a tampered or replayed "
                "frame fails the collective. Every worker must set the same. "
                "Shared memory between the ranks of one host stays "
                "unencrypted. See [Security](security.md)."},
    {.name = "KOLO_SHM",
     .read_by = "worker, kolo-bench",
     .section = "Data plane",
     .unit = "0/1",
     .default_text = "1",
     .meaning = "Ranks with the same launcher host name exchange data through "
                "shared memory. 0 keeps TCP for them too, to compare."},
    {.name = "KOLO_SHM_BYTES",
     .read_by = "worker, kolo-bench",
     .section = "Data plane",
     .unit = "bytes",
     .default_text = "8388608 (8 MiB)",
     .meaning =
         "Size of each epoch's shared-memory segment on a host. At least "
         "65536. See [Transports](transports.md) for how it is divided."},
    {.name = "KOLO_HIERARCHICAL",
     .read_by = "worker, kolo-bench",
     .section = "Data plane",
     .alias = "`HOROVOD_HIERARCHICAL_ALLREDUCE`",
     .unit = "`auto`, 0 or 1",
     .default_text = "`auto`",
     .meaning =
         "Allreduce, allgather, broadcast and reducescatter run in two levels: "
         "within each host (shared memory), then across hosts among one rank "
         "per host. `auto` turns it on when the epoch spans at least two hosts "
         "and some host has two ranks or more. Horovod's variable governs "
         "allreduce only; kolo's governs all four."},
    {.name = "KOLO_CUDA_STAGING",
     .read_by = "worker",
     .section = "GPUs",
     .unit = "0/1",
     .default_text = "0",
     .meaning =
         "1: CUDA tensors always go through pinned host memory on kolo's own "
         "data plane, never NCCL. Every rank's setting is exchanged: one rank "
         "with 1 makes the whole epoch stage, on every process set it is in."},
    {.name = "KOLO_ELASTIC",
     .read_by = "worker (set by kolorun --min-np), kolo-coordinator",
     .section = "Elastic jobs",
     .flag = "`--min-np` (kolorun, kolo-coordinator)",
     .unit = "0/1",
     .default_text = "0",
     .meaning = "1: the job is elastic. kolorun sets it for its workers when "
                "given `--min-np`, `--max-np` or a discovery script. With a "
                "standalone `kolo-coordinator --min-np`, set it on every "
                "worker yourself. Refused on a worker that would host the "
                "coordinator. For kolo-coordinator, `KOLO_ELASTIC=1` alone "
                "makes the job elastic with a minimum of 1."},
    {.name = "KOLO_COORDINATOR_RETURNS",
     .read_by = "worker (set by kolorun --fault kill-coordinator:for=)",
     .section = "Elastic jobs",
     .unit = "0/1",
     .default_text = "1 with a standalone coordinator, else 0",
     .meaning =
         "1: when the coordinator of an elastic job is lost, the worker keeps "
         "its lease (`KOLO_LEASE_SECONDS`) and waits for a coordinator "
         "started again at the same address, then rejoins; 0: it exits with "
         "status 75 at once. kolorun sets 1 when a fault starts its "
         "coordinator again. Refused with 1 on a worker of a fixed job, or "
         "on one that hosts the coordinator."},
    {.name = "KOLO_ELASTIC_TIMEOUT",
     .read_by = "worker, kolorun, kolo-coordinator",
     .knob = &knobs::kElasticTimeout,
     .section = "Elastic jobs",
     .flag = "`--elastic-timeout` (kolorun, kolo-coordinator)",
     .unit = "seconds",
     .meaning =
         "How long an elastic job with fewer workers than its minimum waits "
         "for workers before it ends; also how long a worker joining an "
         "elastic job waits to be admitted (at least `KOLO_START_TIMEOUT`)."},
    {.name = "HOROVOD_ELASTIC",
     .read_by = "kolo.torch",
     .section = "Elastic jobs",
     .unit = "0/1",
     .default_text = "unset",
     .meaning = "Read by `kolo.torch.DistributedOptimizer` only: `1` (like "
                "`KOLO_ELASTIC=1`) installs its gradient hooks even when the "
                "job has one rank, as Horovod's does."},
    {.name = "KOLO_FAULTS",
     .read_by = "kolorun (like --fault)",
     .section = "Fault injection",
     .flag = "`--fault` (kolorun)",
     .unit = "fault specs, `;`-separated",
     .default_text = "unset",
     .meaning = "Faults for kolorun to inject, in addition to those given with "
                "`--fault`."},
    {.name = "KOLO_FAULT_SEED",
     .read_by = "kolorun (like --fault-seed)",
     .section = "Fault injection",
     .flag = "`--fault-seed` (kolorun)",
     .unit = "integer",
     .default_text = "1",
     .meaning = "Seed of the `random` fault's draws."},
    {.name = "KOLO_LOG_LEVEL",
     .read_by = "worker, kolorun, kolo-coordinator",
     .knob = &knobs::kLogLevel,
     .section = "Logging and the timeline",
     .flag = "`--log-level` (kolorun, kolo-coordinator)",
     .unit = "`trace`, `debug`, `info`, `warn`, `error`, `critical` or `off`",
     .meaning =
         "How much kolo logs, to stderr. A healthy job prints nothing from "
         "kolo. kolorun's `--log-level` applies to kolorun and its workers."},
    {.name = "KOLO_TIMELINE",
     .read_by = "worker (rank 0)",
     .section = "Logging and the timeline",
     .alias = "`HOROVOD_TIMELINE`",
     .unit = "a path, or `DYNAMIC`",
     .default_text = "unset",
     .meaning = "A path: rank 0 writes a Chrome trace of every op there (for "
                "`chrome://tracing` or Perfetto). A path that cannot be "
                "written is a warning, and the job goes on. `DYNAMIC`: no "
                "timeline at start; `start_timeline()` and `stop_timeline()` "
                "open and close one at run time."},
    {.name = "KOLO_LAUNCHER",
     .read_by = "worker (set by kolorun)",
     .section = "Set by the launcher",
     .unit = "`kolorun` or unset",
     .default_text = "unset",
     .meaning = "`kolorun` when kolorun started the worker; any other value is "
                "refused."},
    {.name = "KOLO_COORDINATOR",
     .read_by = "worker (set by kolorun)",
     .section = "Set by the launcher",
     .flag = "`--coordinator` (`kolo-ctl status`)",
     .unit = "`host:port`",
     .default_text =
         "kolorun: its coordinator; other launchers: `MASTER_ADDR:MASTER_PORT`",
     .meaning = "The coordinator's address. By hand: outside kolorun, when "
                "`MASTER_ADDR` and `MASTER_PORT` are not set, or to reach a "
                "standalone kolo-coordinator."},
    {.name = "KOLO_HOST_COORDINATOR",
     .read_by = "worker",
     .section = "Set by the launcher",
     .unit = "0/1",
     .default_text = "1 on rank 0 outside kolorun, else 0",
     .meaning =
         "By hand: 0 says a coordinator already runs at `KOLO_COORDINATOR` (a "
         "standalone kolo-coordinator), so rank 0 does not start one. 1 is "
         "refused under kolorun, which runs the coordinator itself."},
    {.name = "KOLO_SECRET",
     .read_by = "worker (set by kolorun)",
     .section = "Set by the launcher",
     .unit = "text, at least 16 bytes",
     .default_text = "kolorun: a fresh random secret per job",
     .meaning =
         "The job secret itself. kolorun gives it to local workers in their "
         "environment and to remote ones on stdin, never on a command line; "
         "the worker removes it from its environment at `init()`."},
    {.name = "KOLO_SECRET_FILE",
     .read_by = "worker, kolo-coordinator",
     .section = "Set by the launcher",
     .flag = "`--secret-file` (kolo-coordinator, `kolo-ctl status`)",
     .unit = "a file path",
     .default_text = "unset",
     .meaning = "By hand: a file holding the job secret (at least 16 bytes; "
                "trailing whitespace is dropped; a file that group or others "
                "may read or write gets a warning). Needed outside kolorun "
                "unless a single process runs alone, and by kolo-coordinator."},
    {.name = "KOLO_TLS_CERT",
     .read_by = "worker, kolorun, kolo-coordinator, kolo-ctl",
     .section = "Set by the launcher",
     .flag = "`--tls-cert` (kolorun, kolo-coordinator, kolo-ctl)",
     .unit = "a file path (PEM)",
     .default_text = "unset (plaintext); kolorun `--tls`: its own",
     .meaning =
         "This process's TLS certificate for the control plane (gRPC "
         "Session and Status) with mutual authentication: signed by "
         "`KOLO_TLS_CA`, naming `kolo-job` as a DNS subjectAltName "
         "(docs/security.md). `KOLO_TLS_CERT`, `KOLO_TLS_KEY` and "
         "`KOLO_TLS_CA` are given all three or not at all. kolorun passes "
         "its files on to the workers."},
    {.name = "KOLO_TLS_KEY",
     .read_by = "worker, kolorun, kolo-coordinator, kolo-ctl",
     .section = "Set by the launcher",
     .flag = "`--tls-key` (kolorun, kolo-coordinator, kolo-ctl)",
     .unit = "a file path (PEM)",
     .default_text = "unset",
     .meaning = "The private key of `KOLO_TLS_CERT`, unencrypted."},
    {.name = "KOLO_TLS_CA",
     .read_by = "worker, kolorun, kolo-coordinator, kolo-ctl",
     .section = "Set by the launcher",
     .flag = "`--tls-ca` (kolorun, kolo-coordinator, kolo-ctl)",
     .unit = "a file path (PEM)",
     .default_text = "unset",
     .meaning = "The job's CA certificate: the only CA every process of the "
                "job trusts (a certificate of another CA, another job's, is "
                "refused)."},
    {.name = "KOLO_JOB_ID",
     .read_by = "worker (set by kolorun)",
     .section = "Set by the launcher",
     .flag = "`--job-id` (kolo-coordinator, `kolo-ctl status`)",
     .unit = "text",
     .default_text = "kolorun: `kolo-` and random hex; else "
                     "`TORCHELASTIC_RUN_ID`, `SLURM_JOB_ID`, or `default`",
     .meaning = "The job id every worker presents to the coordinator."},
    {.name = "KOLO_WORKER_ID",
     .read_by = "worker (set by kolorun)",
     .section = "Set by the launcher",
     .unit = "text",
     .default_text = "kolorun: `w0`, `w1`, ...; else `rank<R>@<host>`",
     .meaning = "The worker's stable identity, separate from its rank."},
    {.name = "KOLO_WORKER_INCARNATION",
     .read_by = "worker",
     .section = "Set by the launcher",
     .unit = "integer",
     .default_text = "0",
     .meaning = "How many times this worker id was restarted; kolorun counts "
                "it in elastic jobs."},
    {.name = "KOLO_HOSTNAME",
     .read_by = "worker (set by kolorun)",
     .section = "Set by the launcher",
     .unit = "text",
     .default_text =
         "kolorun: the host's name in `-H` or the discovery script; else "
         "`SLURMD_NODENAME`, else the kernel's host name",
     .meaning = "The launcher host name, which groups ranks into hosts (local "
                "ranks, shared memory)."},
    {.name = "KOLO_RANK",
     .read_by = "worker (set by kolorun)",
     .section = "Set by the launcher",
     .unit = "integer",
     .default_text = "set by kolorun",
     .meaning = "The launcher's rank for this worker, a hint to the "
                "coordinator, which assigns ranks."},
    {.name = "KOLO_SIZE",
     .read_by = "worker (set by kolorun)",
     .section = "Set by the launcher",
     .unit = "integer",
     .default_text = "set by kolorun",
     .meaning = "The number of workers the launcher started the job with."},
    {.name = "KOLO_LOCAL_RANK",
     .read_by = "worker (set by kolorun)",
     .section = "Set by the launcher",
     .unit = "integer",
     .default_text = "set by kolorun",
     .meaning = "The launcher's local rank for this worker."},
    {.name = "KOLO_LOCAL_SIZE",
     .read_by = "user scripts (set by kolorun)",
     .section = "Set by the launcher",
     .unit = "integer",
     .default_text = "set by kolorun",
     .meaning = "The number of workers on this worker's host, for scripts; "
                "kolo itself does not read it."},
    {.name =
         "HOROVOD_RANK, HOROVOD_SIZE, HOROVOD_LOCAL_RANK, HOROVOD_LOCAL_SIZE, "
         "HOROVOD_CROSS_RANK, HOROVOD_CROSS_SIZE, HOROVOD_HOSTNAME",
     .read_by = "user scripts (set by kolorun)",
     .section = "Set by the launcher",
     .unit = "as named",
     .default_text = "set by kolorun",
     .meaning = "What horovodrun sets, for scripts that read them before "
                "`init()`. kolo does not read them."},
    {.name = "KOLO_BENCH_OUT",
     .read_by = "scripts/bench-report.sh",
     .section = "Scripts",
     .unit = "a directory",
     .default_text = "a new temporary directory",
     .meaning = "Where `scripts/bench-report.sh` and `scripts/peer-bench.sh` "
                "keep the JSON of every run."},
    {.name = "KOLO_BIN_DIR",
     .read_by = "tests (set by CTest)",
     .internal = true},
    {.name = "KOLO_FAULT_EVENTS",
     .read_by = "worker (set by kolorun --fault)",
     .internal = true},
    {.name = "KOLO_FAULT_ORIGIN_MS",
     .read_by = "worker (set by kolorun --fault)",
     .internal = true},
    {.name = "KOLO_FAULT_PLAN",
     .read_by = "worker (set by kolorun --fault)",
     .internal = true},
    {.name = "KOLO_LONG_TESTS",
     .read_by = "tests (the long soaks)",
     .internal = true},
    {.name = "KOLO_SOAK_SECONDS",
     .read_by = "tests (multiprocess_elastic_test's soak)",
     .internal = true},
    {.name = "KOLO_TEST_FAKE_HOST",
     .read_by = "tests/workers/mp_worker",
     .internal = true},
    {.name = "KOLO_TIMEOUT_SCALE",
     .read_by = "tests (set by CTest)",
     .internal = true},
};

constexpr char kHeader[] =
    "| Variable | Flag | Horovod alias | Unit | Default | Meaning |\n"
    "|---|---|---|---|---|---|\n";

// A cell: its text, or "—" when it has none.
absl::string_view Cell(const char* text) {
  return text == nullptr ? "—" : absl::string_view(text);
}

// The name cell: each name in backticks.
std::string NameCell(const Variable& v) {
  return absl::StrJoin(absl::StrSplit(v.name, ", "), ", ",
                       [](std::string* out, absl::string_view name) {
                         absl::StrAppend(out, "`", name, "`");
                       });
}

std::string AliasCell(const Variable& v) {
  if (v.knob == nullptr) return std::string(Cell(v.alias));
  if (v.knob->alias == nullptr) return std::string(Cell(nullptr));
  return absl::StrCat("`", v.knob->alias, "`");
}

// A knob's default as the page writes it: a level in backticks, a zero
// that turns the knob off as "0 (never)".
std::string DefaultCell(const Variable& v) {
  if (v.knob == nullptr) return std::string(Cell(v.default_text));
  const std::string text = KnobDefaultText(*v.knob, KnobSpelling::kVariable);
  if (v.knob->type == KnobType::kLogLevel) return absl::StrCat("`", text, "`");
  if (v.knob->zero_allowed && text == "0") return "0 (never)";
  return text;
}

}  // namespace

absl::Span<const Variable> Variables() { return kVariables; }

std::vector<std::string> VariableSections() {
  std::vector<std::string> sections;
  for (const Variable& v : kVariables) {
    if (v.section != nullptr &&
        (sections.empty() || sections.back() != v.section)) {
      sections.emplace_back(v.section);
    }
  }
  return sections;
}

std::string VariablesMarkdown(absl::string_view section) {
  std::string out = kHeader;
  for (const Variable& v : kVariables) {
    if (v.section == nullptr || section != v.section) continue;
    absl::StrAppend(&out, "| ", NameCell(v), " | ", Cell(v.flag), " | ",
                    AliasCell(v), " | ", Cell(v.unit), " | ", DefaultCell(v),
                    " | ", Cell(v.meaning), " |\n");
  }
  return out;
}

}  // namespace kolo
