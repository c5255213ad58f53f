// FaultDriver: kolorun's half of fault injection (kolorun --fault; issue 19).
// It owns the job's fault plan (common/fault_spec.h PlanFaults), fires the
// faults kolorun fires — kill / stop / term by time (signals to the target
// worker's process group), partition (the namespace's links down, then up),
// kill-coordinator — sends SIGCONT when a stop's `for` ends (also for stops
// the workers fired themselves), starts the coordinator again when a
// kill-coordinator's `for` ends, and reads the events the workers' fault
// hooks write (worker_lib/fault_hook.h) for the recovery report
// (launcher/fault_report.h).
//
// Workers learn their share through WorkerEnv (KOLO_FAULT_PLAN: the
// worker-fired faults not fired yet, so that a replacement does not fire
// again what its predecessor did; KOLO_FAULT_EVENTS; KOLO_FAULT_ORIGIN_MS;
// KOLO_COORDINATOR_RETURNS=1 when the plan restarts the coordinator, so
// that the workers wait for it instead of exiting).
//
// Targets: rank=N is the worker with rank N in the current epoch (the
// coordinator's view, JobView) when the fault fires; worker=ID the live
// process of that worker id; pick=U rank floor(U * size). A fault whose
// target does not exist when it is due is recorded as skipped, with why.
// The same plan and seed fire the same faults at the same times; which
// process a rank target hits depends on the membership then.
//
// Process faults reach the process kolorun started: for workers started
// over ssh that is the ssh client (kill/term end the connection; stop
// stops only the client). Partitions run `ip -n HOST link set DEV
// down|up` on every non-loopback link of the namespace HOST.
//
// Faults kolorun settles (fired or skipped) are also handed to
// Options::on_settled; the worker-fired ones are not (they are read from the
// workers' events file only).
//
// Thread-safety: used by kolorun's main thread only (the supervisor loop
// calls Tick and OnWorkerEnded; main calls the rest before and after).
#ifndef KOLO_LAUNCHER_FAULT_DRIVER_H_
#define KOLO_LAUNCHER_FAULT_DRIVER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/fault_spec.h"
#include "launcher/supervisor.h"
#include "nlohmann/json.hpp"

namespace kolo::launcher {

// The coordinator's view of the current epoch.
struct JobView {
  uint64_t epoch = 0;
  std::map<std::string, int> rank_of;  // members' worker id -> rank
  int size = 0;
};

// What became of one planned fault.
struct FaultRecord {
  PlannedFault fault;
  bool by_worker = false;  // fired by the worker's hook
  enum class State { kPending, kFired, kSkipped } state = State::kPending;
  absl::Time fired_at = absl::InfinitePast();
  std::string worker_id;  // the target, when it fired
  int incarnation = -1;
  int rank = -1;  // its rank then (-1: not a member, or unknown)
  uint64_t epoch = 0;
  int64_t pid = 0;
  int64_t at_op = -1;  // worker-fired: its completed collectives then
  std::string detail;  // what was done, or why it was skipped
  absl::Time ended_at = absl::InfiniteFuture();  // SIGCONT / link up / ran out
};

class FaultDriver {
 public:
  struct Options {
    std::vector<FaultSpec> specs;
    uint64_t seed = 1;
    std::string events_path;  // the workers' events file (created here)
    absl::Time origin = absl::Now();
    std::function<JobView()> job_view;
    std::function<void()> kill_coordinator;
    // Starts the killed coordinator again at its address (kill-coordinator
    // with for=). An error leaves it down: the job ends.
    std::function<absl::Status()> restart_coordinator;
    // Runs a command (argv) to its end within a bound; the partition's `ip`.
    std::function<absl::Status(const std::vector<std::string>&)> run;
    // Elastic jobs: kolorun's --min-np. A *random* term that would leave
    // fewer members is skipped (a leave frees no slot that kolorun refills,
    // so a chaos run would otherwise drain the job); explicit specs fire
    // as asked.
    int min_members = 0;
    // Called once for each fault kolorun fired or skipped, when it did
    // (kolorun writes it to the --events log as a `fault` event).
    std::function<void(const FaultRecord&)> on_settled;
  };
  explicit FaultDriver(Options options);

  // The variables a worker gets (KOLO_FAULT_*).
  std::vector<std::pair<std::string, std::string>> WorkerEnv() const;

  // Fires what is due at `now` among `live`, sends SIGCONT and heals
  // partitions whose time came, and reads new worker events.
  void Tick(absl::Time now, const std::vector<LiveWorker>& live);
  // A worker process ended (`what`: "exited with code 0", "was killed by
  // signal 9 (SIGKILL)").
  void OnWorkerEnded(const LiveWorker& w, const std::string& what);
  // Ends what is still in force (SIGCONT to stopped workers, links up):
  // the job is over.
  void Finish(const std::vector<LiveWorker>& live);

  // The coordinator was killed and will not be started again (no for=, or
  // the restart failed): the job is over.
  bool coordinator_gone() const { return coordinator_gone_; }
  const std::vector<FaultRecord>& records() const { return records_; }
  const std::vector<nlohmann::json>& events() const { return events_; }
  struct WorkerEnd {
    std::string worker_id;
    int incarnation = 0;
    std::string what;
    absl::Time at;
  };
  const std::vector<WorkerEnd>& worker_ends() const { return ends_; }
  const Options& options() const { return options_; }
  // The soonest time Tick has something to do (for the poll timeout).
  absl::Time NextDue() const;

 private:
  void Fire(FaultRecord& r, absl::Time now,
            const std::vector<LiveWorker>& live);
  void ReadEvents();
  void OnEvent(const nlohmann::json& e);
  absl::Status SetLinks(const std::string& host, bool up);
  // Schedules the SIGCONT of a stop `r` fired at `fired` on `pid`.
  void ContinueLater(pid_t pid, absl::Time fired, const FaultRecord& r);
  // Starts the killed coordinator again when its fault's `for` ended.
  void RestartDue(absl::Time now);

  Options options_;
  std::vector<FaultRecord> records_;
  std::vector<nlohmann::json> events_;
  std::vector<WorkerEnd> ends_;
  int64_t events_offset_ = 0;
  std::string partial_line_;
  bool coordinator_gone_ = false;
  // A killed coordinator to start again: record index -> when (one at most).
  std::map<size_t, absl::Time> to_restart_;
  // Workers a random term was sent to (they leave at their next commit).
  std::set<std::string> termed_;
  // Stopped processes to continue: pid -> when, and the stops that end
  // then (two stops of one process end together, at the later end).
  struct Continue {
    absl::Time when;
    std::vector<int> faults;
  };
  std::map<pid_t, Continue> to_continue_;
  // Partitioned hosts to heal: record index -> when.
  std::map<size_t, absl::Time> to_heal_;
};

// Runs argv (no shell) to its end within `timeout`; kolorun's default
// Options::run. Its output goes to kolorun's stderr.
absl::Status RunCommand(const std::vector<std::string>& argv,
                        absl::Duration timeout);

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_FAULT_DRIVER_H_
