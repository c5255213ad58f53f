// kolorun's --help text: every flag, its default (filled in from
// common/knobs.h) and what the workers get. docs/running.md has a row per
// flag listed here (tests/docs/check_reference.py --kolorun checks it).
//
// Thread-safety: UsageText is thread-safe (a constant, formatted).
#include <string>

#include "common/knobs.h"
#include "launcher/args.h"

namespace kolo::launcher {
namespace {

// The defaults in <--flag> are filled in from common/knobs.h (UsageText).
constexpr const char* kUsage =
    R"(Usage: kolorun -np N [options] [--] command [args...]

Starts N workers of a kolo job, each running `command args...`, with an
embedded coordinator, and supervises them until they end.

Options:
  -np, --np, --num-proc N      Number of workers (required).
  -H, --hosts H1:S1,H2:S2,...  Hosts and their slots (slots default to 1).
                               Ranks fill slots in host order: rank 0 takes
                               the first slot of H1. Default: localhost:N.
                               localhost, 127.0.0.1 and this machine's host
                               name start local processes; other hosts are
                               reached with --ssh-cmd.
  --ssh-cmd CMD                How to reach a remote host (run by /bin/sh as
                               `CMD host 'remote command'`).
                               Default: ssh -o BatchMode=yes
  --launcher-cmd TEMPLATE      Start EVERY worker through TEMPLATE, with
                               {host} replaced by the worker's host name, e.g.
                               'ip netns exec {host}'. The worker command is
                               appended to the expanded template.
  --start-timeout S            Seconds the workers have to form the job once
                               the first of them has reached the coordinator;
                               past it, kolorun ends the job naming the workers
                               that have not joined. Commands that never reach
                               the coordinator are not timed. Default: <--start-timeout>, or
                               KOLO_START_TIMEOUT / HOROVOD_START_TIMEOUT.
  --heartbeat-timeout-seconds S
                               A worker silent this long is declared failed
                               and the job ends. Default: <--heartbeat-timeout-seconds>, or
                               KOLO_HEARTBEAT_TIMEOUT_SECONDS.
  --cycle-time-ms X            Milliseconds (fractions allowed) a ready tensor
                               waits for others to batch with while the data
                               plane is busy. Default: <--cycle-time-ms>, or
                               KOLO_CYCLE_TIME_MS / HOROVOD_CYCLE_TIME.
  --stall-check-time-seconds S
                               Warn, naming the missing ranks, when some ranks
                               submitted a tensor and others have not for S
                               seconds; 0 disables the warning. Default: <--stall-check-time-seconds>, or
                               KOLO_STALL_CHECK_TIME_SECONDS /
                               HOROVOD_STALL_CHECK_TIME_SECONDS.
  --stall-shutdown-time-seconds S
                               End the job (every pending op fails, saying
                               why) after a stall of S seconds; 0 = never.
                               Default: <--stall-shutdown-time-seconds>, or KOLO_STALL_SHUTDOWN_TIME_SECONDS
                               / HOROVOD_STALL_SHUTDOWN_TIME_SECONDS.
  --min-np N                   Elastic mode: a worker that fails or is
                               stopped ends its epoch, not the job; the
                               survivors go on (their pending ops fail with
                               the membership error; kolo::elastic::run
                               retries) and kolorun starts a replacement.
                               Below N workers the job waits up to
                               --elastic-timeout, then ends; so does a job
                               whose discovery script first offers fewer
                               than N slots (its first epoch forms at N).
  --max-np N                   Elastic mode: the most workers that run at
                               once; slots beyond it stay idle (with
                               --max-np alone, --min-np is 1).
  --elastic-timeout S          Seconds an elastic job below --min-np waits
                               before it ends. Default: <--elastic-timeout>,
                               or KOLO_ELASTIC_TIMEOUT /
                               HOROVOD_ELASTIC_TIMEOUT.
  --reset-limit N              Elastic mode: end the job after N membership
                               changes. Default: unlimited.
  --host-discovery-script S    Elastic mode (--min-np defaults to 1): run S
                               with /bin/sh every --discovery-interval-seconds;
                               it prints the usable hosts, one a line, as
                               host or host:slots ('#' comments and blank
                               lines are skipped). A host that appears gets
                               workers on its slots; a host that disappears
                               has its workers stopped (SIGTERM: they leave at
                               their next commit). A failing run is retried
                               with a warning; a failing first run ends
                               kolorun (exit 2). -np, when given, is the
                               number of workers to start with (default: every
                               discovered slot). Exclusive with -H.
  --discovery-interval-seconds S
                               Seconds between runs of the discovery script
                               (fractions allowed). Default: 1.
  --slots-per-host K, --slots K
                               Slots of a host whose discovery line (or -H
                               entry) does not say. Default: 1.
  --blacklist-cooldown-range LO HI
                               Elastic mode: a worker that fails is replaced
                               at once in its slot; when the replacement fails
                               too (within 30 s of its start), the slot cools
                               down LO seconds, then 2 LO, 4 LO, ... at most HI
                               (never forever), and its want moves to a free
                               slot if there is one. A host is blacklisted as
                               a whole only while it has no live worker.
                               Default: 2 60.
  --graceful-term              Elastic mode: SIGTERM to kolorun is forwarded
                               to every worker, which leaves at its next
                               commit; the job ends when every worker has
                               ended (a second SIGTERM or SIGINT stops them
                               all at once). Without it, SIGTERM stops the
                               job.
  --fault SPEC                 Inject a fault (repeatable; KOLO_FAULTS holds
                               more, ';'-separated): kill, stop, term, delay,
                               drop, slow, partition, kill-coordinator or
                               random, with a target (rank=N at firing, or
                               worker=ID) and a trigger (after=DUR since the
                               start, or at-op=N completed collectives), e.g.
                               kill:rank=2:after=3s,
                               stop:rank=1:at-op=500:for=4s,
                               delay:rank=0:ms=20:for=5s,
                               random:rate=6/min:until=60s (random requires
                               rate= and until=: it draws faults at that
                               rate up to that time). The grammar is on the
                               documentation's "Fault injection" page
                               (docs/fault-injection.md). A run with faults
                               ends with a recovery report on stderr.
  --fault-seed N               Seed of random's draws (KOLO_FAULT_SEED).
                               Default: 1.
  --fault-report FILE          Also write the recovery report to FILE as
                               JSON.
  --metrics-port P             Serve the coordinator's Prometheus metrics on
                               http://A:P/metrics (0: a free port, logged at
                               info). Default: off.
  --metrics-address A          The metrics page's address. Default:
                               127.0.0.1.
  --events FILE                Write the coordinator's event log to FILE: one
                               JSON object a line (epochs, losses, faults,
                               stalls, refusals, the job's end).
  --tls                        The control plane (gRPC, kolo-ctl) over TLS
                               with mutual authentication: with no files,
                               kolorun makes a CA and a certificate for the
                               job (local workers only), removed when it ends.
  --tls-cert F --tls-key F --tls-ca F
                               The job's certificate, its key and its CA
                               (PEM; default: KOLO_TLS_CERT, KOLO_TLS_KEY,
                               KOLO_TLS_CA); given, they imply --tls. Paths
                               must hold on every host (docs/security.md).
  --log-level L                trace, debug, info, warn, error, critical, off;
                               for kolorun and (as KOLO_LOG_LEVEL) the workers.
                               Default: KOLO_LOG_LEVEL / HOROVOD_LOG_LEVEL, or
                               <--log-level>.
  --coordinator-addr ADDR      Host or IP address workers dial to reach the
                               embedded coordinator (its port is picked by
                               the kernel). Default: 127.0.0.1 when every
                               worker is local, else this machine's address
                               toward the first remote host, or this
                               machine's host name if that host does not
                               resolve.
  -x NAME[=VALUE]              Set NAME for every worker, local or remote
                               (mpirun's flag; repeatable). NAME alone passes
                               kolorun's own value of NAME.
  --hostfile FILE, -hostfile FILE
                               Hosts and slots from FILE, one host a line:
                               'host slots=N' (also host:N or a bare host;
                               '#' comments). Exclusive with -H and
                               --host-discovery-script.
  --config-file FILE           horovodrun's YAML config file (params,
                               timeline, stall_check, logging, ...); flags
                               on the command line win over it.
  --output-filename DIR        Also write rank N's output to
                               DIR/rank.N/stdout and DIR/rank.N/stderr.
  --network-interface IF[,IF], --network-interfaces IF[,IF]
                               The only network interfaces the job uses
                               (repeatable; workers get KOLO_IFACE).
  -p, --ssh-port N             The ssh port of remote hosts.
  -i, --ssh-identity-file FILE The ssh identity file for remote hosts.
  -cb, --check-build           Show what this build of kolo has, and exit.
  --verbose                    kolorun logs at debug (unless --log-level).
  --fusion-threshold-mb N      Workers get KOLO_FUSION_THRESHOLD (N MiB).
  --cache-capacity N           Workers get KOLO_CACHE_CAPACITY=N (0: off).
  --hierarchical-allreduce, --no-hierarchical-allreduce
                               Workers get KOLO_HIERARCHICAL=1 (or 0).
  --timeline-filename FILE     Workers get KOLO_TIMELINE=FILE.
  --gloo-timeout-seconds S     Workers get KOLO_TIMEOUT_SECONDS=S.
  --no-stall-check, --stall-check
                               Stall warning and shutdown off (both 0), or
                               on again.
  --stall-check-warning-time-seconds S
                               Same as --stall-check-time-seconds.
  --stall-check-shutdown-time-seconds S
                               Same as --stall-shutdown-time-seconds.
  --min-num-proc N, --max-num-proc N
                               Same as --min-np, --max-np.
  --prefix-output-with-timestamp, -prefix-timestamp, --log-with-timestamp,
  --no-log-hide-timestamp
                               Workers' output lines carry a timestamp after
                               the rank prefix.
  --log-without-timestamp, --log-hide-timestamp
                               No timestamp (the default).
  --autotune, --no-autotune    The coordinator tunes the fusion threshold,
                               cycle time and response cache during the
                               first steps and keeps the best (KOLO_AUTOTUNE=1,
                               HOROVOD_AUTOTUNE=1); see docs/tensor-fusion.md.
  --autotune-log-file F        One CSV line per sample, and the choice.
  --autotune-warmup-samples N  Samples not scored (default 3).
  --autotune-steps-per-sample N
                               Training steps per sample (default 10).
  --autotune-bayes-opt-max-samples N
                               Scored samples before the choice (default 20).
  --autotune-gaussian-process-noise X
                               How noisy the scores are (default 0.8).
  --gloo, --tcp, --disable-cache, --mpi-threads-disable,
  --no-mpi-threads-disable, --timeline-mark-cycles,
  --no-timeline-mark-cycles, --hierarchical-allgather,
  --no-hierarchical-allgather, --torus-allreduce, --no-torus-allreduce,
  --num-nccl-streams N, --thread-affinity N
                               horovodrun's flags kolo does not need:
                               accepted, and kolorun says why at start.
  --mpi, --jsrun, --mpi-args ARGS, --binding-args ARGS
                               Refused: kolorun starts the workers itself;
                               to use mpirun or jsrun, run it directly.
  -h, --help                   Show this help.
  -v, --version                Show kolorun's version.

Each worker gets KOLO_LAUNCHER=kolorun, KOLO_COORDINATOR, KOLO_JOB_ID,
KOLO_WORKER_ID (w<rank>), KOLO_WORKER_INCARNATION (elastic mode: 0 for the
first process of a slot, then 1, 2, ... for its replacements), KOLO_HOSTNAME
(its -H or discovered host name), KOLO_RANK,
KOLO_SIZE, KOLO_LOCAL_RANK, KOLO_LOCAL_SIZE, KOLO_START_TIMEOUT,
KOLO_CYCLE_TIME_MS, KOLO_STALL_CHECK_TIME_SECONDS,
KOLO_STALL_SHUTDOWN_TIME_SECONDS, KOLO_LOG_LEVEL (with --log-level) and the
job secret KOLO_SECRET. The secret is never put on a command line: local
workers get it in their environment, remote and templated workers on stdin.
kolorun warns about KOLO_* variables in its environment that kolo does not
know (a typo, usually), naming the closest known one.

Output lines are prefixed with the rank: [3]<stdout>:... and [3]<stderr>:...
A worker that exits non-zero or dies ends the job: kolorun names it, stops the
others and exits with its code (128+signal when killed). Ctrl-C / SIGTERM stop
every worker (exit 130 / 143). Workers never outlive kolorun, even when it is
killed with SIGKILL.

Elastic mode, once the first epoch formed: a worker that exits non-zero or
dies is replaced (same worker id, next incarnation; its lines keep the prefix
[N] of its id wN); one that exits 0 is not (it finished or left). The job
ends with 0 when every worker exited 0 and the coordinator ended the job in
order.
)";

}  // namespace

std::string UsageText() { return FillKnobDefaults(kUsage, KolorunKnobs()); }

}  // namespace kolo::launcher
