#include "worker_lib/exec/cuda_executor.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "allreduce/nccl/nccl_ops.h"
#include "common/net.h"
#include "fusion/fusion_planner.h"
#include "proto/op_names.h"
#include "worker_lib/exec/plan_executor.h"
#include "worker_lib/runtime_log.h"

namespace kolo::worker {
namespace {

bool OnDevice(const Tensor& t) { return t.device != kCpu; }

std::vector<absl::Status> EveryStatus(size_t n, const absl::Status& s) {
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
  if (options_.host_name.empty()) options_.host_name = net::KernelHostName();
}

CudaExecutor::~CudaExecutor() {
  std::map<int32_t, NcclSet> sets;
  {
    MutexLock lock(&mu_);
    sets.swap(nccl_sets_);
  }
  for (auto& [set, state] : sets) {
    if (state.comm != nullptr) {
      state.comm->Abort(absl::AbortedError("epoch ended"));
    }
    state.comm.reset();  // before the watchers (no Run is in progress)
  }
  sets.clear();  // joins the watchers' threads
  MutexLock lock(&mu_);
  if (nccl_fusion_ != nullptr) nccl_fusion_device_->FreeDevice(nccl_fusion_);
  devices_.clear();  // stagers before their DeviceOps (member order)
}

void CudaExecutor::Abort(absl::Status why) {
  std::vector<std::shared_ptr<nccl::Communicator>> comms;
  std::vector<std::shared_ptr<nccl::CompletionWatcher>> watchers;
  {
    MutexLock lock(&mu_);
    if (!aborted_.ok()) return;
    aborted_ = why;
    for (auto& [ordinal, device] : devices_) device->ops->Abort(why);
    for (const auto& [set, state] : nccl_sets_) {
      if (state.watcher != nullptr) watchers.push_back(state.watcher);
      if (state.comm != nullptr) comms.push_back(state.comm);
    }
  }
  for (const auto& watcher : watchers) watcher->Abort(why);
  for (const auto& comm : comms) comm->Abort(why);
}

std::shared_ptr<nccl::Communicator> CudaExecutor::communicator(int32_t set) {
  MutexLock lock(&mu_);
  auto it = nccl_sets_.find(set);
  return it == nccl_sets_.end() ? nullptr : it->second.comm;
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
    return EveryStatus(ops.size(), About(device.status(), response, ops));
  }
  if (std::string why = NcclIneligible(response, ops); why.empty()) {
    const int32_t set = response.process_set();
    EnsureCommunicator(set, **device, rank, size);
    std::shared_ptr<nccl::Communicator> comm;
    absl::Status refused;
    {
      MutexLock lock(&mu_);
      const NcclSet& state = nccl_sets_[set];
      comm = state.comm;
      refused = state.refused;
    }
    if (comm != nullptr) {
      last_backend_ = "nccl";
      return RunNccl(response, ops, **device, rank, size);
    }
    if (!absl::IsFailedPrecondition(refused)) {
      // The exchange or NCCL failed on this rank, now or earlier in this
      // epoch: it cannot tell whether the others succeeded, so no path is
      // agreed and the set's CUDA ops fail until a new epoch starts clean.
      return EveryStatus(ops.size(), About(refused, response, ops));
    }
  }
  last_backend_ = "staging";
  return RunStaged(response, ops, plane, rank, size, buffer, timeline);
}

void CudaExecutor::EnsureCommunicator(int32_t set, Device& device, int rank,
                                      int size) {
  {
    MutexLock lock(&mu_);
    if (nccl_sets_[set].tried) return;
  }
  nccl::CommOptions o;
  o.epoch = options_.epoch;
  o.process_set = set;
  o.rank = rank;
  o.size = size;
  o.device = device.ops->device();
  o.timeout = options_.timeout;
  if (options_.force_staging) {
    o.local_problem = "KOLO_CUDA_STAGING=1";
  } else if (options_.nccl == nullptr) {
    o.local_problem = "kolo was built without NCCL";
  }
  if (absl::StatusOr<std::string> bus = device.ops->PciBusId(); bus.ok()) {
    o.device_identity = nccl::DeviceIdentity(options_.host_name, *bus);
  } else {
    RuntimeLog()->warn(
        "{}; process set {} cannot tell whether other ranks share CUDA "
        "device {}",
        std::string(bus.status().message()), set, o.device);
  }
  auto watcher = std::make_shared<nccl::CompletionWatcher>();
  {
    MutexLock lock(&mu_);
    NcclSet& state = nccl_sets_[set];
    state.tried = true;
    state.watcher = watcher;
    if (!aborted_.ok()) watcher->Abort(aborted_);
  }
  absl::StatusOr<std::unique_ptr<nccl::Communicator>> comm =
      nccl::Communicator::Create(options_.nccl.get(), watcher.get(),
                                 options_.exchange, o);
  if (comm.ok()) {
    RuntimeLog()->info(
        "CUDA tensors of process set {} run on NCCL {} (rank {} of {}, "
        "device {})",
        set, options_.nccl->Version(), rank, size, o.device);
  } else if (absl::IsFailedPrecondition(comm.status())) {
    RuntimeLog()->info("{}", std::string(comm.status().message()));
  }
  MutexLock lock(&mu_);
  NcclSet& state = nccl_sets_[set];
  if (comm.ok()) {
    state.comm = *std::move(comm);
    if (!aborted_.ok()) state.comm->Abort(aborted_);
  } else {
    state.refused = comm.status();
  }
}

std::string CudaExecutor::NcclIneligible(const proto::Response& response,
                                         absl::Span<PendingOp* const> ops) {
  if (response.joined_size() > 0) return "a rank has joined";
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
