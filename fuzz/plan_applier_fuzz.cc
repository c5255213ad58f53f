// Fuzz target: the worker's plan applier — what OpRuntime::RunPlan does with
// a proto::Plan from the coordinator (worker_lib/runtime/op_runtime.cc): the
// cache mirror's NameByBit and Apply (worker_lib/session/cache_mirror.h), then
// each Response run against this rank's pending ops by Execute
// (worker_lib/exec/plan_executor.h) or ExecuteFused
// (worker_lib/exec/fused_executor.h) on a one-rank data plane, so that no peer
// is needed.
//
// Input (fuzz/byte_reader.h): the pending ops — a count (1..4), then per op
// its type, dtype, reduce op, rank of shape and dims (small) — then plans,
// each a U16-length-prefixed serialized proto::Plan, until the input ends.
// Ops are submitted as a caller would (MakeRequest); input data is filled
// with a pattern; the allocator gives what the shape asks for, up to 1 MiB.
// RunPlan resolves names and bits the same way, so a crash here is one
// there.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "allreduce/data_plane.h"
#include "allreduce/transport.h"
#include "common/check.h"
#include "common/log.h"
#include "fuzz/byte_reader.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/kolo.pb.h"
#include "worker_lib/exec/fused_executor.h"
#include "worker_lib/exec/plan_executor.h"
#include "worker_lib/op_request.h"
#include "worker_lib/session/cache_mirror.h"

namespace {

using kolo::worker::PendingOp;

// A transport of one rank: collectives of one rank never send or receive.
class SoloTransport : public kolo::Transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void BeginOperation(uint64_t) override {}
  absl::StatusOr<kolo::OpId> StartSend(int peer, const void*, size_t) override {
    return absl::InternalError(absl::StrCat("send to rank ", peer, " of 1"));
  }
  absl::StatusOr<kolo::OpId> StartRecv(int peer, void*, size_t) override {
    return absl::InternalError(absl::StrCat("recv from rank ", peer, " of 1"));
  }
  absl::Status Wait(kolo::OpId) override {
    return absl::InternalError("no op to wait for");
  }
  void Abort(absl::Status) override {}
};

constexpr int64_t kMaxAlloc = 1 << 20;

struct Op {
  PendingOp op;
  std::vector<char> input, output, allocated;
};

std::unique_ptr<Op> MakeOp(kolo::fuzz::ByteReader& in, int i) {
  static constexpr kolo::proto::OpType kTypes[] = {
      kolo::proto::ALLREDUCE,     kolo::proto::ALLGATHER,
      kolo::proto::BROADCAST,     kolo::proto::ALLTOALL,
      kolo::proto::REDUCESCATTER, kolo::proto::BARRIER};
  auto o = std::make_unique<Op>();
  PendingOp& op = o->op;
  op.handle = i + 1;
  op.name = absl::StrCat("t", i);
  op.op = kTypes[in.Pick(0, 5)];
  op.input.dtype =
      static_cast<kolo::DataType>(in.Pick(0, kolo::kNumDataTypes - 1));
  op.reduce.op =
      static_cast<kolo::ReduceOp>(in.Pick(0, kolo::kNumReduceOps - 1));
  const int dims = in.Pick(0, 2);
  for (int d = 0; d < dims; ++d) op.input.shape.push_back(in.Pick(0, 7));
  const int64_t bytes = op.input.num_bytes();
  o->input.resize(static_cast<size_t>(bytes));
  for (size_t b = 0; b < o->input.size(); ++b) {
    o->input[b] = static_cast<char>(b * 7 + 1);
  }
  op.input.data = o->input.data();
  if (op.op == kolo::proto::ALLREDUCE) {
    op.output = op.input;
    o->output.resize(static_cast<size_t>(bytes));
    op.output.data = o->output.data();
  } else if (op.op == kolo::proto::BROADCAST) {
    op.output = op.input;
  } else if (op.op == kolo::proto::REDUCESCATTER) {
    op.output = op.input;  // one rank: it gets every row
    o->output.resize(static_cast<size_t>(bytes));
    op.output.data = o->output.data();
  }
  const size_t element = kolo::DataTypeSize(op.input.dtype);
  Op* self = o.get();
  op.allocator = [self, element](
                     absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
    int64_t n = 1;
    for (int64_t d : shape) {
      if (d < 0 || (d > 0 && n > kMaxAlloc / d)) {
        return absl::ResourceExhaustedError("too large");
      }
      n *= d;
    }
    if (n > kMaxAlloc / static_cast<int64_t>(element)) {
      return absl::ResourceExhaustedError("too large");
    }
    self->allocated.assign(static_cast<size_t>(n) * element + 1, 0);
    return static_cast<void*>(self->allocated.data());
  };
  op.request = kolo::worker::MakeRequest(op, 0, 1);
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)kolo::SetLogLevel("off");
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kolo::fuzz::ByteReader in(data, size);
  std::vector<std::unique_ptr<Op>> ops;
  absl::flat_hash_map<std::string, Op*> by_name;
  const int n = in.Pick(1, 4);
  for (int i = 0; i < n; ++i) {
    ops.push_back(MakeOp(in, i));
    by_name[ops.back()->op.name] = ops.back().get();
  }
  kolo::DataPlane plane(std::make_unique<SoloTransport>(),
                        kolo::AlgorithmOptions{});
  kolo::worker::CacheMirror cache;
  kolo::worker::FusionBuffer buffer;
  int plans = 0;
  while (in.remaining() > 0 && ++plans <= 8) {
    kolo::proto::Plan plan;
    if (!plan.ParseFromString(in.Blob())) continue;
    // As RunPlan: names of by-bit responses, then the cache changes.
    cache.NameByBit(plan);
    cache.Apply(
        plan, [&](const std::string& name) -> const kolo::proto::Request* {
          auto it = by_name.find(name);
          return it == by_name.end() ? nullptr : &it->second->op.request;
        });
    for (const kolo::proto::Response& r : plan.responses()) {
      if (r.process_set() != 0) continue;  // another set's: not a member
      std::vector<PendingOp*> step;
      for (const std::string& name : r.names()) {
        auto it = by_name.find(name);
        step.push_back(it == by_name.end() ? nullptr : &it->second->op);
      }
      if (kolo::worker::IsFused(r)) {
        (void)kolo::worker::ExecuteFused(r, step, plane, 0, 1, buffer, nullptr);
        continue;
      }
      for (PendingOp* op : step) {
        if (op == nullptr) continue;
        kolo::OpResult result;
        (void)kolo::worker::Execute(r, *op, plane, 0, 1, &result);
      }
    }
  }
  return 0;
}
