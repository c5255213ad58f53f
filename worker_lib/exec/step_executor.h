// StepExecutor: one way of running a plan's response (a "step") on the data
// plane — the CUDA, fused and per-op executors, tried in that order by the
// plan runner; the first that can run a response runs it.
//
// Thread-safety: used by the thread that runs plans only (one at a time);
// the ops are not touched by anyone else meanwhile (they are marked
// running). Invariant: Run is called only when CanRun said yes, and returns
// one status per entry of `ops` (nullptr entries included).
#ifndef KOLO_WORKER_LIB_EXEC_STEP_EXECUTOR_H_
#define KOLO_WORKER_LIB_EXEC_STEP_EXECUTOR_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "allreduce/data_plane.h"
#include "proto/kolo.pb.h"
#include "worker_lib/exec/cuda_executor.h"
#include "worker_lib/exec/fused_executor.h"
#include "worker_lib/op_request.h"
#include "worker_lib/timeline.h"

namespace kolo::worker {

// Where a step runs: its process set's plane, this rank's place in the set,
// the runner's fusion buffer and the timeline (null: none).
struct StepPlace {
  DataPlane& plane;
  int rank = 0, size = 0;
  FusionBuffer& buffer;
  Timeline* timeline = nullptr;
};

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  // Whether this executor runs `response` for `ops` (ops[i]: this rank's op
  // for response.names(i), nullptr when not pending here).
  virtual bool CanRun(const proto::Response& response,
                      absl::Span<PendingOp* const> ops) const = 0;
  virtual std::vector<absl::Status> Run(const proto::Response& response,
                                        absl::Span<PendingOp* const> ops,
                                        const StepPlace& place) = 0;
};

// Responses with a CUDA tensor (cuda_executor.h). `cuda` outlives it.
class CudaStepExecutor : public StepExecutor {
 public:
  explicit CudaStepExecutor(CudaExecutor& cuda) : cuda_(cuda) {}
  bool CanRun(const proto::Response& response,
              absl::Span<PendingOp* const> ops) const override;
  std::vector<absl::Status> Run(const proto::Response& response,
                                absl::Span<PendingOp* const> ops,
                                const StepPlace& place) override;

 private:
  CudaExecutor& cuda_;
};

// Fused responses over host memory (fused_executor.h).
class FusedStepExecutor : public StepExecutor {
 public:
  bool CanRun(const proto::Response& response,
              absl::Span<PendingOp* const> ops) const override;
  std::vector<absl::Status> Run(const proto::Response& response,
                                absl::Span<PendingOp* const> ops,
                                const StepPlace& place) override;
};

// Any response, one op at a time (plan_executor.h), each op's collective
// on the timeline.
class PerOpStepExecutor : public StepExecutor {
 public:
  bool CanRun(const proto::Response& response,
              absl::Span<PendingOp* const> ops) const override;
  std::vector<absl::Status> Run(const proto::Response& response,
                                absl::Span<PendingOp* const> ops,
                                const StepPlace& place) override;
};

// The executors in the order they are tried: CUDA, fused, per op (the last
// runs anything).
std::vector<std::unique_ptr<StepExecutor>> DefaultStepExecutors(
    CudaExecutor& cuda);

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_EXEC_STEP_EXECUTOR_H_
