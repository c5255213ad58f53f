// PlanRunner: what runs a plan's steps on the data plane — the fusion
// buffer, the process sets' data planes, the CUDA executor and the ordered
// list of executors (step_executor.h). The op runtime (runtime/op_runtime.h)
// resolves a plan to this rank's ops; the runner runs them; the runtime
// then completes them.
//
// Ownership is the lock: the runtime keeps one PlanRunner, and the thread
// that runs plans (its background thread, or a caller waiting for its ops)
// holds it as a std::unique_ptr for as long as it reads the coordinator
// link and runs what comes, then hands it back. Nobody else touches it.
//
// Thread-safety: none, by the above; cuda().Abort() alone may be called from
// any thread (cuda_executor.h).
// Invariant: the data plane given at construction outlives the runner, and
// the process sets' planes (which use its connections) go first (DropPlanes,
// or the destructor).
#ifndef KOLO_WORKER_LIB_EXEC_PLAN_RUNNER_H_
#define KOLO_WORKER_LIB_EXEC_PLAN_RUNNER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "allreduce/data_plane.h"
#include "proto/kolo.pb.h"
#include "worker_lib/exec/cuda_executor.h"
#include "worker_lib/exec/fused_executor.h"
#include "worker_lib/exec/step_executor.h"
#include "worker_lib/op_request.h"
#include "worker_lib/timeline.h"

namespace kolo::worker {

// One response of a plan being run: ops[i] is the op of names(i), null when
// it is not pending here; rank/size: this rank's place in the response's
// process set (member: whether it is in it; members: the set's ranks, empty
// for the global set).
struct PlanStep {
  const proto::Response* response = nullptr;
  std::vector<std::shared_ptr<PendingOp>> ops;
  bool member = true;
  std::vector<int> members;
  int rank = 0, size = 0;
};

// Per step, per op: the op's result.
using StepResults = std::vector<std::vector<absl::Status>>;

class PlanRunner {
 public:
  // This rank's place in the epoch, for fault injection's report.
  struct Place {
    uint64_t epoch = 0;
    int rank = 0, size = 0;
  };
  PlanRunner(DataPlane* data, std::unique_ptr<CudaExecutor> cuda, Place place);
  ~PlanRunner() { DropPlanes(); }
  PlanRunner(const PlanRunner&) = delete;
  PlanRunner& operator=(const PlanRunner&) = delete;

  // Runs the steps this rank is a member of, in order, each stamped from
  // (plan_seq, its index) so that every rank running it stamps it alike;
  // drops the planes of process sets the plan removed.
  StepResults Run(uint64_t plan_seq, std::vector<PlanStep>& steps,
                  Timeline* timeline);
  // The process sets' data planes go (nothing runs plans any more).
  void DropPlanes() { set_planes_.clear(); }
  CudaExecutor& cuda() { return *cuda_; }

 private:
  // A process set's data plane (made on first use).
  DataPlane& PlaneFor(int32_t set, const std::vector<int>& members);
  std::vector<absl::Status> ExecuteStep(PlanStep& step, uint64_t stamp,
                                        Timeline* plan_timeline);
  // Fault injection's report of a plan run (fault_hook.h).
  void ReportFaults(const std::vector<PlanStep>& steps,
                    const StepResults& results, absl::Duration took);
  void DropRemovedPlanes(const std::vector<PlanStep>& steps,
                         const StepResults& results);

  DataPlane* const data_;
  const Place place_;
  const std::unique_ptr<CudaExecutor> cuda_;
  // The executors a step is offered to, in order, and the step's ops as
  // they take them (reused: no allocation once it has grown).
  const std::vector<std::unique_ptr<StepExecutor>> executors_;
  std::vector<PendingOp*> step_ops_;
  FusionBuffer fusion_buffer_;
  absl::flat_hash_map<int32_t, std::unique_ptr<DataPlane>> set_planes_;
};

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_EXEC_PLAN_RUNNER_H_
