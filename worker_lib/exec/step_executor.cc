#include "worker_lib/exec/step_executor.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "proto/op_names.h"
#include "worker_lib/exec/plan_executor.h"

namespace kolo::worker {

bool CudaStepExecutor::CanRun(const proto::Response& /*response*/,
                              absl::Span<PendingOp* const> ops) const {
  for (const PendingOp* op : ops) {
    if (op != nullptr &&
        (op->input.device != kCpu || op->output.device != kCpu)) {
      return true;
    }
  }
  return false;
}

std::vector<absl::Status> CudaStepExecutor::Run(
    const proto::Response& response, absl::Span<PendingOp* const> ops,
    const StepPlace& place) {
  return cuda_.Run(response, ops, place.plane, place.rank, place.size,
                   place.buffer, place.timeline);
}

bool FusedStepExecutor::CanRun(const proto::Response& response,
                               absl::Span<PendingOp* const> /*ops*/) const {
  return IsFused(response);
}

std::vector<absl::Status> FusedStepExecutor::Run(
    const proto::Response& response, absl::Span<PendingOp* const> ops,
    const StepPlace& place) {
  return ExecuteFused(response, ops, place.plane, place.rank, place.size,
                      place.buffer, place.timeline);
}

bool PerOpStepExecutor::CanRun(const proto::Response& /*response*/,
                               absl::Span<PendingOp* const> /*ops*/) const {
  return true;
}

std::vector<absl::Status> PerOpStepExecutor::Run(
    const proto::Response& response, absl::Span<PendingOp* const> ops,
    const StepPlace& place) {
  std::vector<absl::Status> out;
  for (PendingOp* op : ops) {
    if (op == nullptr) {
      out.emplace_back();
      continue;
    }
    const bool trace = place.timeline != nullptr && response.error_code() == 0;
    if (trace) {
      // "ALLREDUCE": the timeline's activity names, as Horovod's.
      place.timeline->Begin(op->name,
                            absl::AsciiStrToUpper(proto::OpTypeName(op->op)),
                            absl::Now());
    }
    out.push_back(Execute(response, *op, place.plane, place.rank, place.size,
                          &op->result));
    if (trace) place.timeline->End(op->name, absl::Now());
  }
  return out;
}

std::vector<std::unique_ptr<StepExecutor>> DefaultStepExecutors(
    CudaExecutor& cuda) {
  std::vector<std::unique_ptr<StepExecutor>> executors;
  executors.push_back(std::make_unique<CudaStepExecutor>(cuda));
  executors.push_back(std::make_unique<FusedStepExecutor>());
  executors.push_back(std::make_unique<PerOpStepExecutor>());
  return executors;
}

}  // namespace kolo::worker
