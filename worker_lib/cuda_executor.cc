#include "worker_lib/cuda_executor.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "allreduce/nccl/nccl_ops.h"
#include "fusion/fusion_planner.h"
#include "proto/op_names.h"
#include "worker_lib/op_runtime_internal.h"
#include "worker_lib/plan_executor.h"

namespace kolo::worker {
namespace {

using op_runtime_internal::Log;

bool OnDevice(const Tensor& t) { return t.device != kCpu; }

std::vector<absl::Status> All(size_t n, const absl::Status& s) {
  return std::vector<absl::Status>(n, s);
}

// `s` prefixed with what this rank was running, for the caller's message.
absl::Status About(const absl::Status& s, const proto::Response& response,
                   absl::Span<PendingOp* const> ops) {
  if (s.ok()) return s;
  std::string first = ops.empty() || ops[0] == nullptr ? "?" : ops[0]->name;
  return absl::Status(
      s.code(),
      absl::StrCat(proto::OpTypeName(response.op()), " '", first, "'",
                   ops.size() > 1 ? absl::StrCat(" (and ", ops.size() - 1,
                                                 " fused tensors)")
                                  : std::string(),
                   " on CUDA: ", s.message()));
}

}  // namespace

bool HasCudaTensor(absl::Span<PendingOp* const> ops) {
  for (const PendingOp* op : ops) {
    if (op != nullptr && (OnDevice(op->input) || OnDevice(op->output))) {
      return true;
    }
  }
  return false;
}

CudaExecutor::CudaExecutor(CudaOptions options) : options_(std::move(options)) {
  if (!options_.open) options_.open = cuda::OpenDevice;
}

CudaExecutor::~CudaExecutor() {
  {
    MutexLock lock(&mu_);
    if (comm_ != nullptr) comm_->Abort(absl::AbortedError("epoch ended"));
    comm_.reset();
  }
  MutexLock lock(&mu_);
  watcher_.reset();  // joins its thread
  if (nccl_fusion_ != nullptr) nccl_fusion_device_->FreeDevice(nccl_fusion_);
  devices_.clear();  // stagers before their DeviceOps (member order)
}

void CudaExecutor::Abort(absl::Status why) {
  std::shared_ptr<nccl::Communicator> comm;
  std::shared_ptr<nccl::CompletionWatcher> watcher;
  {
    MutexLock lock(&mu_);
    if (!aborted_.ok()) return;
    aborted_ = why;
    for (auto& [ordinal, device] : devices_) device->ops->Abort(why);
    comm = comm_;
    watcher = watcher_;
  }
  if (watcher != nullptr) watcher->Abort(why);
  if (comm != nullptr) comm->Abort(why);
}

absl::StatusOr<CudaExecutor::Device*> CudaExecutor::DeviceFor(int ordinal) {
  {
    MutexLock lock(&mu_);
    if (!aborted_.ok()) return aborted_;
    auto it = devices_.find(ordinal);
    if (it != devices_.end()) return it->second.get();
  }
  absl::StatusOr<std::unique_ptr<cuda::DeviceOps>> ops = options_.open(ordinal);
  if (!ops.ok()) return ops.status();
  auto device = std::make_unique<Device>();
  device->ops = *std::move(ops);
  device->stager = std::make_unique<cuda::Stager>(device->ops.get());
  MutexLock lock(&mu_);
  if (!aborted_.ok()) device->ops->Abort(aborted_);
  Device* raw = device.get();
  devices_[ordinal] = std::move(device);
  return raw;
}

absl::Status CudaExecutor::WaitReady(Device& device,
                                     absl::Span<PendingOp* const> ops) {
  for (PendingOp* op : ops) {
    if (op == nullptr || !OnDevice(op->input) ||
        op->input.ready_event == nullptr) {
      continue;
    }
    if (absl::Status s = device.ops->WaitEvent(op->input.ready_event);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CudaExecutor::RecordDone(Device& device,
                                      absl::Span<PendingOp* const> ops) {
  for (PendingOp* op : ops) {
    if (op == nullptr) continue;
    void* event = op->input.done_event;
    if (event == nullptr && OnDevice(op->output)) event = op->output.done_event;
    if (event == nullptr) continue;
    if (absl::Status s = device.ops->RecordEvent(event); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::vector<absl::Status> CudaExecutor::Run(const proto::Response& response,
                                            absl::Span<PendingOp* const> ops,
                                            DataPlane& plane, int rank,
                                            int size, FusionBuffer& buffer,
                                            Timeline* timeline) {
  const bool fused = IsFused(response);
  if (response.error_code() != 0 && !fused) {
    // The negotiated error: nothing moves.
    std::vector<absl::Status> out;
    for (PendingOp* op : ops) {
      out.push_back(op == nullptr ? absl::OkStatus()
                                  : Execute(response, *op, plane, rank, size,
                                            &op->result));
    }
    return out;
  }
  int ordinal = kCpu;
  for (const PendingOp* op : ops) {
    if (op == nullptr) continue;
    if (OnDevice(op->input)) ordinal = op->input.device;
    if (ordinal == kCpu && OnDevice(op->output)) ordinal = op->output.device;
    if (ordinal != kCpu) break;
  }
  absl::StatusOr<Device*> device = DeviceFor(ordinal);
  if (!device.ok()) {
    // Announced valid (a usable device at submission): the device went
    // away. The collective cannot run here; the peers fail on the data
    // plane's deadline, and the coordinator names this rank.
    return All(ops.size(), About(device.status(), response, ops));
  }
  if (std::string why = NcclIneligible(response, ops); why.empty()) {
    if (!nccl_tried_) {
      nccl_tried_ = true;
      nccl::CommOptions o;
      o.epoch = options_.epoch;
      o.process_set = response.process_set();
      o.rank = rank;
      o.size = size;
      o.device = ordinal;
      o.timeout = options_.timeout;
      if (options_.force_staging) {
        o.local_problem = "KOLO_CUDA_STAGING=1";
      } else if (options_.nccl == nullptr) {
        o.local_problem = "kolo was built without NCCL";
      }
      std::shared_ptr<nccl::CompletionWatcher> watcher =
          std::make_shared<nccl::CompletionWatcher>();
      {
        MutexLock lock(&mu_);
        watcher_ = watcher;
        if (!aborted_.ok()) watcher->Abort(aborted_);
      }
      absl::StatusOr<std::unique_ptr<nccl::Communicator>> comm =
          nccl::Communicator::Create(options_.nccl.get(), watcher.get(),
                                     options_.exchange, o);
      if (comm.ok()) {
        Log()->info("CUDA tensors of process set 0 run on NCCL {} (device {})",
                    options_.nccl->Version(), ordinal);
        MutexLock lock(&mu_);
        comm_ = *std::move(comm);
        if (!aborted_.ok()) comm_->Abort(aborted_);
      } else if (absl::IsFailedPrecondition(comm.status())) {
        nccl_refused_ = comm.status();
        Log()->info("{}", std::string(nccl_refused_.message()));
      } else {
        // The exchange or NCCL failed: this op fails; NCCL stays off for the
        // epoch (a rank that failed here cannot tell whether the others
        // succeeded; a new epoch starts clean).
        nccl_refused_ = comm.status();
        return All(ops.size(), About(comm.status(), response, ops));
      }
    }
    std::shared_ptr<nccl::Communicator> comm;
    {
      MutexLock lock(&mu_);
      comm = comm_;
    }
    if (comm != nullptr) {
      last_backend_ = "nccl";
      return RunNccl(response, ops, **device, rank, size);
    }
    if (!absl::IsFailedPrecondition(nccl_refused_)) {
      // NCCL broke earlier in this epoch on some rank: no path is agreed.
      return All(ops.size(), About(nccl_refused_, response, ops));
    }
  }
  last_backend_ = "staging";
  return RunStaged(response, ops, plane, rank, size, buffer, timeline);
}

std::string CudaExecutor::NcclIneligible(
    const proto::Response& response, absl::Span<PendingOp* const> ops) const {
  if (response.process_set() != 0) {
    return "process sets other than 0 run CUDA tensors through host memory";
  }
  if (response.joined_size() > 0) return "a rank has joined";
  if (!nccl_refused_.ok() && absl::IsFailedPrecondition(nccl_refused_)) {
    return std::string(nccl_refused_.message());
  }
  for (const PendingOp* op : ops) {
    if (op == nullptr) return "a tensor of the response is not pending here";
    if (op->op == proto::ALLREDUCE || op->op == proto::REDUCESCATTER) {
      std::string why = nccl::NcclCanReduce(op->input.dtype, op->reduce);
      if (!why.empty()) return why;
    } else if (op->op != proto::ALLGATHER && op->op != proto::BROADCAST &&
               op->op != proto::ALLTOALL) {
      return "not a collective NCCL runs";
    }
  }
  return "";
}

}  // namespace kolo::worker
