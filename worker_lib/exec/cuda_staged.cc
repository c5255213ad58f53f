// CudaExecutor::RunStaged: CUDA tensors through pinned host memory on
// kolo's data plane (cuda_executor.h, backend 2). Each op gets a host
// mirror — a copy of the PendingOp whose tensors point at pinned host
// memory — and the host executors run the mirrors, so that the results are
// bitwise what the same host tensors give.
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "worker_lib/exec/cuda_executor.h"
#include "worker_lib/exec/plan_executor.h"

namespace kolo::worker {
namespace {

bool OnDeviceTensor(const Tensor& t) { return t.device != kCpu; }

// An output a mirror's allocator handed out: host scratch now, the
// caller's device memory after the copy.
struct LateOutput {
  void* host = nullptr;
  void* device = nullptr;
  size_t bytes = 0;
};

// The device of the group: its first device input, else its first device
// output.
int StagedOrdinal(absl::Span<PendingOp* const> ops) {
  int ordinal = kCpu;
  for (const PendingOp* op : ops) {
    if (op != nullptr && OnDeviceTensor(op->input)) ordinal = op->input.device;
    if (ordinal == kCpu && op != nullptr && OnDeviceTensor(op->output)) {
      ordinal = op->output.device;
    }
  }
  return ordinal;
}

// 1. Inputs to the host (one copy for the group): each mirror's input
// points at pinned host memory.
absl::Status StageInputs(absl::Span<PendingOp* const> ops,
                         std::vector<PendingOp>& mirrors,
                         cuda::Stager& stager) {
  const size_t n = ops.size();
  std::vector<const void*> in_dev;
  std::vector<size_t> in_bytes;
  std::vector<size_t> in_of;  // op index of each staged input
  for (size_t i = 0; i < n; ++i) {
    if (ops[i] == nullptr) continue;
    mirrors[i] = *ops[i];
    const Tensor& t = ops[i]->input;
    if (OnDeviceTensor(t) && t.num_bytes() > 0) {
      in_dev.push_back(t.data);
      in_bytes.push_back(static_cast<size_t>(t.num_bytes()));
      in_of.push_back(i);
    }
  }
  std::vector<void*> in_host;
  if (!in_dev.empty()) {
    absl::StatusOr<std::vector<void*>> h = stager.In(in_dev, in_bytes);
    if (!h.ok()) return h.status();
    in_host = *std::move(h);
  }
  for (size_t k = 0; k < in_of.size(); ++k) {
    mirrors[in_of[k]].input.data = in_host[k];
  }
  for (size_t i = 0; i < n; ++i) {
    if (ops[i] != nullptr) mirrors[i].input.device = kCpu;
  }
  return absl::OkStatus();
}

// 2. Outputs: known sizes packed in one pinned buffer (returns the op index
// of each); late ones (allgather, alltoall) in scratch through a wrapped
// allocator that records them in `late`, which must outlive the run.
absl::StatusOr<std::vector<size_t>> StageOutputs(
    absl::Span<PendingOp* const> ops, std::vector<PendingOp>& mirrors,
    cuda::Stager& stager, std::vector<LateOutput>& late) {
  const size_t n = ops.size();
  std::vector<size_t> out_bytes, out_of;
  for (size_t i = 0; i < n; ++i) {
    const PendingOp* op = ops[i];
    if (op == nullptr || !OnDeviceTensor(op->output)) continue;
    if (op->op == proto::ALLREDUCE || op->op == proto::REDUCESCATTER) {
      out_bytes.push_back(static_cast<size_t>(op->output.num_bytes()));
      out_of.push_back(i);
    }
  }
  std::vector<void*> out_host;
  if (!out_of.empty()) {
    absl::StatusOr<std::vector<void*>> h = stager.OutHost(out_bytes);
    if (!h.ok()) return h.status();
    out_host = *std::move(h);
  }
  for (size_t k = 0; k < out_of.size(); ++k) {
    mirrors[out_of[k]].output.data = out_host[k];
  }
  for (size_t i = 0; i < n; ++i) {
    PendingOp* op = ops[i];
    if (op == nullptr) continue;
    PendingOp& m = mirrors[i];
    m.output.device = kCpu;
    if (op->op == proto::BROADCAST) m.output = m.input;
    if ((op->op == proto::ALLGATHER || op->op == proto::ALLTOALL) &&
        OnDeviceTensor(op->input) && op->allocator) {
      const size_t element = DataTypeSize(op->input.dtype);
      m.allocator =
          [op, element, &stager,
           &late](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
        absl::StatusOr<void*> dev = op->allocator(shape);
        if (!dev.ok()) return dev.status();
        size_t bytes = element;
        for (int64_t d : shape) bytes *= static_cast<size_t>(d);
        absl::StatusOr<void*> host = stager.Scratch(bytes);
        if (!host.ok()) return host.status();
        late.push_back({*host, *dev, bytes});
        return *host;
      };
    }
  }
  return out_of;
}

// 3. The host executors, on the mirrors; their results go to the ops.
std::vector<absl::Status> RunMirrors(const proto::Response& response,
                                     absl::Span<PendingOp* const> ops,
                                     std::vector<PendingOp>& mirrors,
                                     DataPlane& plane, int rank, int size,
                                     FusionBuffer& buffer, Timeline* timeline) {
  const size_t n = ops.size();
  std::vector<absl::Status> results;
  if (IsFused(response)) {
    std::vector<PendingOp*> ptrs;
    for (size_t i = 0; i < n; ++i) {
      ptrs.push_back(ops[i] == nullptr ? nullptr : &mirrors[i]);
    }
    results = ExecuteFused(response, ptrs, plane, rank, size, buffer, timeline);
  } else {
    for (size_t i = 0; i < n; ++i) {
      if (ops[i] == nullptr) {
        results.emplace_back();
        continue;
      }
      results.push_back(
          Execute(response, mirrors[i], plane, rank, size, &mirrors[i].result));
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (ops[i] != nullptr) ops[i]->result = std::move(mirrors[i].result);
  }
  return results;
}

// 4. Results back to the device: the packed outputs in one copy, late ones
// each, a broadcast's buffer in place.
absl::Status CopyBack(absl::Span<PendingOp* const> ops,
                      const std::vector<PendingOp>& mirrors,
                      const std::vector<size_t>& out_of,
                      const std::vector<LateOutput>& late, cuda::Stager& stager,
                      cuda::DeviceOps& dev) {
  absl::Status back;
  std::vector<void*> out_dev;
  for (size_t i : out_of) out_dev.push_back(ops[i]->output.data);
  if (!out_dev.empty()) back = stager.Out(out_dev);
  for (const LateOutput& o : late) {
    if (!back.ok()) break;
    back = dev.Copy(o.device, o.host, o.bytes, cuda::CopyKind::kHostToDevice);
  }
  for (size_t i = 0; i < ops.size() && back.ok(); ++i) {
    PendingOp* op = ops[i];
    if (op == nullptr || op->op != proto::BROADCAST ||
        !OnDeviceTensor(op->input)) {
      continue;
    }
    back = dev.Copy(op->input.data, mirrors[i].input.data,
                    static_cast<size_t>(op->input.num_bytes()),
                    cuda::CopyKind::kHostToDevice);
  }
  return back;
}

}  // namespace

std::vector<absl::Status> CudaExecutor::RunStaged(
    const proto::Response& response, absl::Span<PendingOp* const> ops,
    DataPlane& plane, int rank, int size, FusionBuffer& buffer,
    Timeline* timeline) {
  const size_t n = ops.size();
  absl::StatusOr<Device*> got = DeviceFor(StagedOrdinal(ops));
  if (!got.ok()) return std::vector<absl::Status>(n, got.status());
  Device& device = **got;
  cuda::Stager& stager = *device.stager;
  stager.Reset();
  const absl::Time deadline = absl::Now() + options_.timeout;
  auto fail_all = [&](const absl::Status& s) {
    return std::vector<absl::Status>(n, s);
  };
  if (absl::Status s = WaitReady(device, ops); !s.ok()) return fail_all(s);
  std::vector<PendingOp> mirrors(n);
  if (absl::Status s = StageInputs(ops, mirrors, stager); !s.ok()) {
    return fail_all(s);
  }
  std::vector<LateOutput> late;
  absl::StatusOr<std::vector<size_t>> out_of =
      StageOutputs(ops, mirrors, stager, late);
  if (!out_of.ok()) return fail_all(out_of.status());
  // The inputs must be on the host before the data plane reads them.
  if (absl::Status s = device.ops->Synchronize(deadline); !s.ok()) {
    return fail_all(s);
  }
  std::vector<absl::Status> results =
      RunMirrors(response, ops, mirrors, plane, rank, size, buffer, timeline);
  absl::Status back =
      CopyBack(ops, mirrors, *out_of, late, stager, *device.ops);
  if (back.ok()) back = RecordDone(device, ops);
  if (back.ok()) back = device.ops->Synchronize(deadline);
  if (!back.ok()) {
    for (absl::Status& s : results) {
      if (s.ok()) s = back;
    }
  }
  return results;
}

}  // namespace kolo::worker
