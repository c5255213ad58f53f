// Supervisor: kolorun's main loop. It spawns every worker under a guard,
// relays their output line by line with the rank prefixed, and ends the job
// when it must:
//   - every worker exited 0                    -> exit 0 (1 if the
//     coordinator ended the job in failure meanwhile);
//   - a worker exited non-zero or was killed   -> names it (worker id, rank,
//     host, code or signal), stops the others, exits with its code (128+sig);
//     but once the job's epoch formed, the coordinator's verdict comes first
//     (waited for up to 2 s): when it blames another worker (say a stopped
//     one, whose neighbours gave up), kolorun reports the verdict and exits
//     with the blamed worker's code (1 while it still runs); in an elastic
//     job (--min-np), once the epoch formed, it is a loss the coordinator
//     recovers from: the survivors go on;
//   - SIGINT / SIGTERM / SIGHUP to kolorun     -> stops every worker, exits
//     130 / 143 / 129 (a second SIGINT skips the grace); with
//     --graceful-term, a first SIGTERM asks every worker to leave instead
//     (below);
//   - the coordinator ended the job in failure -> prints its reason, exit 1;
//   - start timeout: once a worker has reached the coordinator, the epoch
//     must form within start_timeout of kolorun's start, else the workers
//     that have not joined are named, exit 1. Commands that never reach the
//     coordinator (not kolo programs) are not timed.
// Stopping = SIGTERM to each guard (which stops its worker's process group),
// SIGKILL to what is left after the guard's grace + 2 s.
//
// Elastic policy (the ElasticSetup constructor; kolorun --min-np): workers
// run on the slots of a SlotTable (launcher/slots.h), which decides; this
// class carries the decisions out:
//   - once the first epoch formed, a worker that fails is a loss the
//     coordinator recovers from, and kolorun starts its replacement (same
//     worker id, next incarnation) at once or after its slot's cooldown;
//     one that exits 0 is not replaced. While a replacement is pending the
//     job does not end for want of workers; the cooldowns are bounded, and
//     the coordinator ends a job that stays below --min-np.
//   - the discovery script (launcher/discovery.h) runs every interval, in
//     the poll loop (never blocking it); a run that fails is retried with a
//     warning. A host that appears gets workers on its slots (within
//     --max-np, and only once the first epoch formed); a host that
//     disappears has its workers asked to leave: SIGTERM to their guards
//     (they leave at their next commit; after the guard's grace they are
//     killed), and their ends count as leaves, not failures.
//   - --graceful-term: the first SIGTERM goes to every worker's process
//     group directly (no guard grace), no worker is started any more, and
//     the job ends when every worker ended: as usual when all exited 0,
//     else 143 naming those that did not; past graceful_timeout, or at a
//     second SIGTERM/SIGINT, the job is stopped as by a plain SIGTERM.
//   - once the coordinator ended the job, nothing is started any more, and
//     worker processes it evicted that are still alive (stopped, frozen,
//     cut off) are killed: the job's outcome is its members', the eviction
//     a line in the log.
//
// Everything runs on one thread — the main thread, which must also be the one
// that spawns guards (see spawn.h) — over poll(): a signalfd and the
// stdout/stderr/status pipes of every worker. The coordinator is seen only
// through CoordinatorProbe, so this file does not depend on gRPC.
//
// Files: supervisor.cc (the loop, worker ends, verdicts), supervisor_elastic.cc
// (the elastic policy), supervisor_internal.h (the worker record).
//
// Thread-safety: a Supervisor is used by the main thread only.
// REQUIRES: BlockSupervisorSignals() ran before any thread was started.
#ifndef KOLO_LAUNCHER_SUPERVISOR_H_
#define KOLO_LAUNCHER_SUPERVISOR_H_

#include <poll.h>
#include <sys/types.h>

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "launcher/args.h"
#include "launcher/discovery.h"
#include "launcher/slots.h"
#include "launcher/spawn.h"

namespace kolo::launcher {

// What the supervisor learns from the coordinator (polled a few times a
// second).
struct CoordinatorView {
  enum class Phase { kForming, kRunning, kEndedOk, kEndedFailure };
  Phase phase = Phase::kForming;
  int connected = 0;             // workers that opened a Session
  std::set<std::string> joined;  // worker ids past authentication
  std::string reason;            // why the job ended, for kEndedFailure
  // The worker the coordinator judged failed ("" when none), ditto.
  std::string failed_worker;
  // Elastic: the worker processes it evicted, as (worker id, incarnation).
  std::set<std::pair<std::string, int>> evicted;
};
using CoordinatorProbe = std::function<CoordinatorView()>;

// A worker process kolorun runs now (for fault injection).
struct LiveWorker {
  std::string worker_id;
  int incarnation = 0;
  std::string host;
  pid_t pid = 0;  // the worker's (its process group); 0 before it started
};

struct WorkerLaunch {
  WorkerPlan plan;
  GuardSpec spec;
};

struct SupervisorOptions {
  absl::Duration start_timeout = absl::Seconds(30);
  // Called once when kolorun ends the job itself (a signal, a worker that
  // died, the start timeout), before any worker is stopped, so that the
  // coordinator records kolorun's reason and not the disconnects that
  // follow. `failed_worker`: the worker id it blames, or "".
  std::function<void(const std::string& reason,
                     const std::string& failed_worker)>
      end_job;
  std::string coordinator_address;  // for messages
  // Elastic job (kolorun --min-np): once the epoch formed, a worker that
  // ends is a loss the coordinator recovers from (the survivors go on), not
  // the job's end; the job ends when the coordinator ends it, or when every
  // worker ended (exit 0 only if the coordinator ended the job well).
  bool elastic = false;
  std::string self_exe = "/proc/self/exe";
  // Fault injection (launcher/fault_driver.h; all optional): on_tick runs on
  // every turn of the loop with the live workers, and at least by the time
  // next_due gives; on_worker_end once per worker process that ended, with
  // what ended it ("exited with code 0", "was killed by signal 9 (SIGKILL)").
  std::function<void(absl::Time, const std::vector<LiveWorker>&)> on_tick;
  std::function<absl::Time()> next_due;
  std::function<void(const LiveWorker&, const std::string&)> on_worker_end;
  // --output-filename DIR (created already; "" for none): each worker's
  // stdout and stderr also go, raw, to DIR/rank.<N>/stdout and .../stderr,
  // N as in its prefix; an elastic replacement (incarnation > 0) appends.
  // A file that cannot be opened is a warning (the terminal has the lines).
  std::string output_dir;
  // --prefix-output-with-timestamp: a timestamp after each line's prefix
  // (launcher/line_prefixer.h has the format).
  bool prefix_timestamp = false;
};

// The launcher policy of an elastic job (see the file comment).
struct ElasticSetup {
  std::vector<HostSlots> hosts;  // -H, or the discovery script's first answer
  int initial_workers = 1;       // started at once, on the first free slots
  SlotPolicy slots;              // cooldowns, --max-np
  std::string discovery_script;  // "" for none
  int slots_per_host = 1;
  absl::Duration discovery_interval = absl::Seconds(1);
  bool graceful_term = false;
  // --min-np. When initial_workers (the slots the discovery script's first
  // answer offered) is below it, the job starts short: the first epoch forms
  // once min_workers have joined, workers start on slots as the script
  // offers them, and past max(start timeout, start_wait) the job ends naming
  // what it waited for.
  int min_workers = 1;
  absl::Duration start_wait = absl::Seconds(600);  // --elastic-timeout
  // After a --graceful-term SIGTERM, or when their host left the discovery
  // script, how long workers have to leave (at their next commit) before
  // they are stopped.
  absl::Duration graceful_timeout = absl::Seconds(60);
  // Builds a worker's command and environment (KOLO_WORKER_ID,
  // KOLO_WORKER_INCARNATION, ...) from its plan: rank = worker number,
  // worker_id, incarnation, host, local_rank = slot index on its host,
  // local_size = that host's slots.
  std::function<GuardSpec(const WorkerPlan&)> make_spec;
  SlotTable::Clock clock = [] { return absl::Now(); };
};

class Supervisor {
 public:
  // `probe` may be empty (no coordinator: no start timeout, no job end).
  Supervisor(SupervisorOptions options, std::vector<WorkerLaunch> workers,
             CoordinatorProbe probe);
  // An elastic job. REQUIRES: options.elastic; elastic.make_spec is set.
  Supervisor(SupervisorOptions options, ElasticSetup elastic,
             CoordinatorProbe probe);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Runs the job to its end; returns kolorun's exit code. Every guard has
  // been reaped when it returns. Call once.
  int Run();

  // Why the job failed ("" when it did not): for the coordinator's JobEnd.
  const std::string& failure_reason() const { return failure_reason_; }

  // The workers running now (for fault injection).
  std::vector<LiveWorker> Live() const;

 private:
  struct Worker;

  void SpawnAll();
  // The signals Run handles arrive on signal_fd_; false (said on stderr)
  // when it cannot be made.
  bool OpenSignalFd();
  // Whether the loop of Run is over at `now`: every guard ended and the
  // output drained (for at most kDrain; `drain_until` keeps when), or
  // guards outlived SIGKILL.
  bool Ended(absl::Time now, absl::Time& drain_until);
  // One turn of Run: polls the signals, the workers' pipes and the
  // discovery script (`pfds`, `owners`: reused buffers), then ticks.
  void PollOnce(std::vector<pollfd>& pfds,
                std::vector<std::pair<Worker*, int>>& owners);
  // After the loop: flushes the output; returns the job's exit status.
  int Conclude();
  void HandleSignals();
  void ReadFd(Worker& w, int which);
  void ReapGuards();
  void OnWorkerEnded(Worker& w);
  void Tick(absl::Time now);
  void CheckCoordinator(absl::Time now);
  // A short start past its wait: ends the job naming what it waited for.
  void CheckShortStart(absl::Time now, const CoordinatorView& view);
  void BeginTermination(int exit_code, const std::string& message,
                        const std::string& failed_worker = "");
  // A worker ended non-zero: `view` is the coordinator's account. Ends the
  // job with the verdict when it blames another worker, else with `w`'s.
  void ConcludeFailure(Worker& w, const CoordinatorView& view);
  void KillEverything();
  // Kills the live workers the coordinator evicted (the job ended).
  void EndEvicted(const CoordinatorView& view);
  std::string Describe(const Worker& w) const;
  int LiveGuards() const;
  bool Spawn(Worker& w);
  // The prefixers (and output files) of a worker numbered `number` in the
  // prefix; `append`: an elastic replacement's files are appended to.
  void MakePrefixers(Worker& w, int number, bool append);
  // Elastic: starts a worker on every slot the table says may start.
  void SpawnReady();
  bool ReplacementsPending() const;
  // A short start still waiting for its first epoch.
  bool WaitingForMinimum() const;
  void StartDiscovery(absl::Time now);
  void OnDiscovery();
  void BeginGracefulTerm();
  // Elastic: SIGTERM to the worker's own process group (a notice: it
  // leaves at its next commit), not through its guard.
  void AskToLeave(Worker& w);
  // Elastic: nothing is started any more (the job is ending).
  void StopGrowth();
  // Elastic, a worker that failed after the first epoch formed: logs it
  // ("the survivors go on", or once that the coordinator ended the job);
  // returns whether the coordinator has ended the job.
  bool LogElasticFailure(const Worker& w, const std::string& what);

  SupervisorOptions options_;
  std::vector<std::unique_ptr<Worker>> workers_;
  CoordinatorProbe probe_;
  int signal_fd_ = -1;
  absl::Time start_;
  bool terminating_ = false;
  bool killed_ = false;
  int exit_code_ = 0;
  std::string failure_reason_;
  // Elastic: the workers that ended while the job went on.
  std::vector<std::string> elastic_lost_;
  // Elastic: a worker's end after the coordinator ended the job was logged
  // as such (once; the others end quietly, at info).
  bool job_over_said_ = false;
  absl::Time kill_at_ = absl::InfiniteFuture();
  absl::Time give_up_at_ = absl::InfiniteFuture();
  absl::Time next_probe_;
  bool epoch_formed_ = false;
  absl::Time coordinator_failure_seen_ = absl::InfiniteFuture();
  // The first worker that ended non-zero, while kolorun waits (until
  // verdict_by_) for the coordinator's verdict.
  Worker* failed_first_ = nullptr;
  absl::Time verdict_by_ = absl::InfiniteFuture();

  // Elastic (null otherwise).
  std::unique_ptr<ElasticSetup> elastic_;
  std::unique_ptr<SlotTable> slots_;
  std::unique_ptr<DiscoveryRun> discovery_run_;
  absl::Time next_discovery_ = absl::InfiniteFuture();
  bool discovery_failing_ = false;
  bool spawned_initial_ = false;
  // Started below --min-np (see ElasticSetup::min_workers): waiting for the
  // discovery script to offer enough slots for the first epoch.
  bool short_start_ = false;
  bool growth_over_ = false;  // nothing is started any more
  // --graceful-term: the workers were asked to leave.
  bool draining_ = false;
  absl::Time drain_deadline_ = absl::InfiniteFuture();
  std::vector<std::string> drain_unclean_;  // those that did not exit 0
};

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_SUPERVISOR_H_
