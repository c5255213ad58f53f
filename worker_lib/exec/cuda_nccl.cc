// CudaExecutor::RunNccl: a response on the set's NCCL communicator
// (cuda_executor.h, backend 1). The collective is enqueued on kolo's stream
// and the CompletionWatcher's thread sees it finish (the stream's marker
// event) or fail (ncclCommGetAsyncError), bounded by the data-plane
// timeout.
//
// A fused allreduce is packed into the persistent device fusion buffer
// (device-to-device copies at the offsets fusion::AlignUp gives, as the
// host path), reduced in place by one ncclAllReduce, and unpacked. A fused
// allgather runs its members one after another in the response's order
// (the same on every rank).
#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "allreduce/nccl/nccl_ops.h"
#include "fusion/fusion_planner.h"
#include "worker_lib/exec/cuda_executor.h"
#include "worker_lib/exec/fused_executor.h"
#include "worker_lib/exec/plan_executor.h"

namespace kolo::worker {
namespace {

absl::Status Protocol(const PendingOp& op, absl::string_view what) {
  return absl::InternalError(absl::StrCat(
      "the plan for ", op.name, " ", what,
      "; the coordinator and this worker disagree on the protocol"));
}

// Output memory from the op's allocator (device memory of the op's
// device); on failure the problem, and the collective runs into `scratch`
// (device memory the caller frees) so that the other ranks go on.
void* DeviceOutput(PendingOp& op, const std::vector<int64_t>& shape,
                   int64_t bytes, cuda::DeviceOps& device, void** scratch,
                   absl::Status& problem) {
  if (std::optional<void*> out =
          FromAllocator(op, shape, bytes, "device", problem)) {
    return *out;
  }
  absl::StatusOr<void*> s = device.AllocDevice(static_cast<size_t>(bytes));
  if (!s.ok()) {
    problem = s.status();
    return nullptr;
  }
  *scratch = *s;
  return *s;
}

// What one NCCL run enqueues with: the set's communicator, the device and
// its stream, and the device scratch of failed allocators (freed after).
struct NcclStep {
  nccl::Communicator& comm;
  cuda::DeviceOps& dev;
  void* stream;
  DataType dtype;
  int64_t element;
  int rank;
  int size;
  std::vector<void*>& scratch;
};

// Every tensor on the host or on the communicator's device.
absl::Status CheckDevices(absl::Span<PendingOp* const> ops, int device) {
  for (const PendingOp* op : ops) {
    for (const Tensor* t : {&op->input, &op->output}) {
      if (t->device != kCpu && t->device != device) {
        return absl::InvalidArgumentError(absl::StrCat(
            op->name, " is on CUDA device ", t->device,
            " but this rank's NCCL communicator uses device ", device,
            " (the device of its first CUDA tensor); kolo uses one CUDA "
            "device per rank"));
      }
    }
  }
  return absl::OkStatus();
}

// Where each member of a fused allreduce starts in the fusion buffer
// (fusion::AlignUp, as the host path); returns the bytes they span.
size_t FusedOffsets(absl::Span<PendingOp* const> ops,
                    std::vector<size_t>& offsets) {
  size_t end = 0;
  for (const PendingOp* op : ops) {
    const size_t at = offsets.empty() ? 0 : fusion::AlignUp(end);
    offsets.push_back(at);
    end = at + static_cast<size_t>(op->input.num_bytes());
  }
  return end;
}

// Packs the members into `buf`, reduces it in place, unpacks.
absl::Status EnqueueFusedAllreduce(absl::Span<PendingOp* const> ops,
                                   const std::vector<size_t>& offsets,
                                   size_t end, char* buf,
                                   const NcclStep& step) {
  absl::Status enqueued;
  const size_t n = ops.size();
  for (size_t i = 0; i < n && enqueued.ok(); ++i) {
    enqueued = step.dev.Copy(buf + offsets[i], ops[i]->input.data,
                             static_cast<size_t>(ops[i]->input.num_bytes()),
                             cuda::CopyKind::kDeviceToDevice);
    ops[i]->result.shape = ops[i]->output.shape;
  }
  if (enqueued.ok()) {
    enqueued =
        nccl::Allreduce(step.comm, step.stream, step.dtype, ops[0]->reduce, buf,
                        buf, static_cast<int64_t>(end) / step.element);
  }
  for (size_t i = 0; i < n && enqueued.ok(); ++i) {
    enqueued = step.dev.Copy(ops[i]->output.data, buf + offsets[i],
                             static_cast<size_t>(ops[i]->output.num_bytes()),
                             cuda::CopyKind::kDeviceToDevice);
  }
  return enqueued;
}

// Allgather (member i of the response) or alltoall: the rows from each
// rank, checked against what this rank announced, then the v-collective.
// A protocol problem is `result` (the others still run); an output that
// cannot be had is returned: this rank cannot take part, the peers time out.
absl::Status EnqueueGatherv(const proto::Response& response, PendingOp& op,
                            size_t i, const NcclStep& step,
                            absl::Status& result) {
  const bool gather = op.op == proto::ALLGATHER;
  const Tensor& in = op.input;
  const int64_t row = RowElements(in.shape);
  const int size = step.size;
  // Rows from each rank: allgather's sizes of member i, or the alltoall
  // matrix's column of this rank.
  if (response.sizes_size() <
      (gather ? static_cast<int>(i + 1) * size : size * size)) {
    result = Protocol(op, "carries too few sizes");
    return absl::OkStatus();
  }
  std::vector<int64_t> rows, bytes;
  int64_t total = 0;
  bool bad = false;
  for (int r = 0; r < size; ++r) {
    const int64_t k = gather ? response.sizes(static_cast<int>(i) * size + r)
                             : response.sizes(r * size + step.rank);
    const int64_t row_bytes = std::max<int64_t>(row * step.element, 1);
    if (k < 0 ||
        k > (std::numeric_limits<int64_t>::max() / row_bytes) - total) {
      bad = true;
      break;
    }
    rows.push_back(k);
    bytes.push_back(k * row * step.element);
    total += k;
  }
  if (bad || (gather && rows[step.rank] * row != in.num_elements()) ||
      (!gather && (op.splits.size() != static_cast<size_t>(size) ||
                   rows[step.rank] != op.splits[step.rank]))) {
    result = Protocol(op, "gives this rank other rows than it announced");
    return absl::OkStatus();
  }
  op.result.shape = in.shape;
  op.result.shape[0] = total;
  op.result.splits = rows;
  void* extra = nullptr;
  void* out = DeviceOutput(op, op.result.shape, total * row * step.element,
                           step.dev, &extra, result);
  if (extra != nullptr) step.scratch.push_back(extra);
  if (out == nullptr && total * row > 0) return result;
  if (gather) {
    return nccl::Allgatherv(step.comm, step.stream, in.data, bytes, out);
  }
  std::vector<int64_t> send;
  for (int64_t s : op.splits) send.push_back(s * row * step.element);
  return nccl::Alltoallv(step.comm, step.stream, in.data, send, out, bytes);
}

// One op of an unfused response (member i); `result` as EnqueueGatherv's.
absl::Status EnqueueOne(const proto::Response& response, PendingOp& op,
                        size_t i, const NcclStep& step, absl::Status& result) {
  const Tensor& in = op.input;
  switch (op.op) {
    case proto::ALLREDUCE:
      op.result.shape = op.output.shape;
      return nccl::Allreduce(step.comm, step.stream, step.dtype, op.reduce,
                             in.data, op.output.data, in.num_elements());
    case proto::BROADCAST:
      op.result.shape = in.shape;
      return nccl::Broadcast(step.comm, step.stream, in.data, in.num_bytes(),
                             op.set_root);
    case proto::REDUCESCATTER: {
      const int64_t row = RowElements(in.shape);
      std::vector<int64_t> counts;
      for (int64_t rows : op.splits) counts.push_back(rows * row);
      op.result.shape = op.output.shape;
      op.result.splits = op.splits;
      return nccl::Reducescatter(step.comm, step.stream, step.dtype, op.reduce,
                                 in.data, counts, op.output.data);
    }
    case proto::ALLGATHER:
    case proto::ALLTOALL:
      return EnqueueGatherv(response, op, i, step, result);
    default:
      result = Protocol(op, "is not a collective NCCL runs");
      return absl::OkStatus();
  }
}

}  // namespace

absl::Status CudaExecutor::ReserveNcclFusion(cuda::DeviceOps& dev,
                                             size_t bytes) {
  if (bytes <= nccl_fusion_bytes_ && nccl_fusion_ != nullptr &&
      nccl_fusion_device_ == &dev) {
    return absl::OkStatus();
  }
  // Grown, or moved to this set's device (the buffer is shared by the
  // sets' communicators; a rank uses one device, so it moves rarely).
  if (nccl_fusion_ != nullptr) nccl_fusion_device_->FreeDevice(nccl_fusion_);
  nccl_fusion_ = nullptr;
  const size_t want = std::max(bytes, 2 * nccl_fusion_bytes_);
  absl::StatusOr<void*> p = dev.AllocDevice(want);
  if (!p.ok()) return p.status();
  nccl_fusion_ = *p;
  nccl_fusion_bytes_ = want;
  nccl_fusion_device_ = &dev;
  return absl::OkStatus();
}

std::vector<absl::Status> CudaExecutor::RunNccl(
    const proto::Response& response, absl::Span<PendingOp* const> ops,
    Device& device, int rank, int size) {
  const size_t n = ops.size();
  std::shared_ptr<nccl::Communicator> comm_ref;
  std::shared_ptr<nccl::CompletionWatcher> watcher;
  {
    MutexLock lock(&mu_);
    const NcclSet& state = nccl_sets_[response.process_set()];
    comm_ref = state.comm;
    watcher = state.watcher;
  }
  nccl::Communicator& comm = *comm_ref;
  cuda::DeviceOps& dev = *device.ops;
  const absl::Time deadline = absl::Now() + options_.timeout;
  if (absl::Status s = CheckDevices(ops, comm.options().device); !s.ok()) {
    return std::vector<absl::Status>(n, s);
  }
  if (absl::Status s = WaitReady(device, ops); !s.ok()) {
    return std::vector<absl::Status>(n, s);
  }
  std::vector<absl::Status> results(n);
  std::vector<void*> scratch;  // device scratch for failed allocators
  absl::Status enqueued;
  const PendingOp& first = *ops[0];
  const DataType dtype = first.input.dtype;
  const NcclStep step{comm,
                      dev,
                      dev.stream(),
                      dtype,
                      static_cast<int64_t>(DataTypeSize(dtype)),
                      rank,
                      size,
                      scratch};
  if (first.op == proto::ALLREDUCE && n > 1) {
    std::vector<size_t> offsets;
    const size_t end = FusedOffsets(ops, offsets);
    if (absl::Status s = ReserveNcclFusion(dev, end); !s.ok()) {
      return std::vector<absl::Status>(n, s);
    }
    enqueued = EnqueueFusedAllreduce(ops, offsets, end,
                                     static_cast<char*>(nccl_fusion_), step);
  } else {
    for (size_t i = 0; i < n && enqueued.ok(); ++i) {
      enqueued = EnqueueOne(response, *ops[i], i, step, results[i]);
    }
  }
  if (enqueued.ok()) enqueued = RecordDone(device, ops);
  if (enqueued.ok()) enqueued = dev.Mark();
  if (enqueued.ok()) {
    enqueued = watcher->Await(
        [&comm, &dev]() -> absl::StatusOr<bool> {
          absl::Status async = comm.AsyncError();
          if (!async.ok() && !absl::IsUnavailable(async)) return async;
          return dev.Reached();
        },
        deadline,
        absl::StrCat("NCCL ", first.name, " on rank ", rank, " (device ",
                     comm.options().device, ")"));
  }
  if (!enqueued.ok()) {
    // The stream may still use the buffers (and scratch); a failed
    // communicator is aborted, which ends its kernels, before they go.
    comm.Abort(enqueued);
    (void)dev.Synchronize(absl::Now() + options_.timeout);
  }
  for (void* p : scratch) dev.FreeDevice(p);
  for (absl::Status& s : results) {
    if (s.ok()) s = enqueued;
  }
  return results;
}

}  // namespace kolo::worker
