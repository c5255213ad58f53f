// PlanRunner (plan_runner.h): a plan's steps on the data plane.
#include "worker_lib/exec/plan_runner.h"

#include <algorithm>
#include <utility>

#include "worker_lib/fault_hook.h"

namespace kolo::worker {
namespace {

// The sequence number a response's first collective is stamped with: the
// same on every rank that runs it (see op_runtime.h, "Process sets").
uint64_t StampOf(uint64_t plan_seq, size_t response) {
  return (plan_seq << 32) | (static_cast<uint64_t>(response) << 8);
}

}  // namespace

PlanRunner::PlanRunner(DataPlane* data, std::unique_ptr<CudaExecutor> cuda,
                       Place place)
    : data_(data),
      place_(place),
      cuda_(std::move(cuda)),
      executors_(DefaultStepExecutors(*cuda_)) {}

StepResults PlanRunner::Run(uint64_t plan_seq, std::vector<PlanStep>& steps,
                            Timeline* timeline) {
  // Fault injection (fault_hook.h): one relaxed load when no fault is armed.
  const bool faults_armed = faults::Armed();
  absl::Time run_start;
  if (faults_armed) {
    faults::BeforePlan({place_.epoch, place_.rank, place_.size, data_});
    run_start = absl::Now();
  }
  StepResults results;
  for (size_t k = 0; k < steps.size(); ++k) {
    std::vector<absl::Status>& out = results.emplace_back();
    if (steps[k].member) {
      out = ExecuteStep(steps[k], StampOf(plan_seq, k), timeline);
    }
  }
  if (faults_armed) ReportFaults(steps, results, absl::Now() - run_start);
  DropRemovedPlanes(steps, results);
  return results;
}

DataPlane& PlanRunner::PlaneFor(int32_t set, const std::vector<int>& members) {
  if (set == 0) return *data_;
  std::unique_ptr<DataPlane>& plane = set_planes_[set];
  if (plane == nullptr) plane = data_->Subset(members);
  return *plane;
}

std::vector<absl::Status> PlanRunner::ExecuteStep(PlanStep& step,
                                                  uint64_t stamp,
                                                  Timeline* plan_timeline) {
  DataPlane& plane = PlaneFor(step.response->process_set(), step.members);
  plane.Stamp(stamp);
  // Stand-ins of a joined rank (handle 0) have no timeline rows.
  const bool stand_ins = std::any_of(
      step.ops.begin(), step.ops.end(),
      [](const auto& op) { return op != nullptr && op->handle == 0; });
  Timeline* const timeline = stand_ins ? nullptr : plan_timeline;
  if (timeline != nullptr) {
    const absl::Time now = absl::Now();
    for (auto& op : step.ops) {
      if (op != nullptr) timeline->End(op->name, now);  // QUEUE
    }
  }
  step_ops_.clear();
  for (auto& op : step.ops) step_ops_.push_back(op.get());
  const StepPlace place{plane, step.rank, step.size, fusion_buffer_, timeline};
  for (const std::unique_ptr<StepExecutor>& executor : executors_) {
    if (executor->CanRun(*step.response, step_ops_)) {
      return executor->Run(*step.response, step_ops_, place);
    }
  }
  return {};  // unreachable: the last executor runs anything
}

void PlanRunner::ReportFaults(const std::vector<PlanStep>& steps,
                              const StepResults& results, absl::Duration took) {
  int completed = 0, failed = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    for (size_t i = 0; i < steps[k].ops.size() && i < results[k].size(); ++i) {
      if (steps[k].ops[i] == nullptr) continue;
      if (results[k][i].ok()) {
        ++completed;
      } else {
        ++failed;
      }
    }
  }
  faults::AfterPlan({place_.epoch, place_.rank, place_.size, data_}, completed,
                    failed, took);
}

void PlanRunner::DropRemovedPlanes(const std::vector<PlanStep>& steps,
                                   const StepResults& results) {
  // A removed process set's data plane goes.
  for (size_t k = 0; k < steps.size(); ++k) {
    for (size_t i = 0; i < steps[k].ops.size(); ++i) {
      const PendingOp* op = steps[k].ops[i].get();
      if (op != nullptr && op->op == proto::PROCESS_SET_REMOVE &&
          results[k][i].ok()) {
        set_planes_.erase(op->root);
      }
    }
  }
}

}  // namespace kolo::worker
