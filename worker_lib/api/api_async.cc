// kolo's negotiated API (include/kolo/kolo.h): the *_async submissions,
// poll/synchronize, and the blocking collectives as thin wrappers around
// them. Everything goes through the current job's OpRuntime
// (worker_lib/runtime/op_runtime.h).
//
// Thread-safety: every function may be called from any thread.
#include <functional>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kolo/kolo.h"
#include "proto/op_names.h"
#include "worker_lib/api/api_internal.h"
#include "worker_lib/op_request.h"

namespace kolo {
namespace {

// An op to fill in, from the current job's runtime (which recycles them),
// with the runtime to submit it to.
struct Prepared {
  std::shared_ptr<worker::OpRuntime> runtime;
  std::shared_ptr<worker::PendingOp> op;
};

// internal::OrderNextSubmission's, for the next submission on this thread.
struct NextOrder {
  std::string stream;  // empty: none
  uint32_t slot = 0;
};
thread_local NextOrder next_order;

// Takes this thread's next order (leaving none) into `op`.
void TakeOrder(worker::PendingOp* op) {
  if (next_order.stream.empty()) return;
  if (op != nullptr) {
    op->order_stream = next_order.stream;
    op->order_slot = next_order.slot;
  }
  next_order.stream.clear();
}

// kFailedPrecondition before init() or after shutdown().
absl::StatusOr<Prepared> Prepare(proto::OpType type, const Tensor& input,
                                 ProcessSet process_set) {
  auto ops = internal::CurrentOps(proto::OpTypeName(type));
  if (!ops.ok()) {
    TakeOrder(nullptr);
    return ops.status();
  }
  Prepared n{std::move(*ops), nullptr};
  n.op = n.runtime->NewOp();
  n.op->op = type;
  n.op->input = input;
  n.op->process_set = process_set;
  TakeOrder(n.op.get());
  return n;
}

absl::StatusOr<Handle> Submit(Prepared n, absl::string_view name) {
  n.op->name.assign(name.data(), name.size());
  return n.runtime->Submit(std::move(n.op));
}

void SetReduce(worker::PendingOp& op, const AllreduceOptions& options) {
  op.reduce.op = options.op;
  op.reduce.prescale = options.prescale;
  op.reduce.postscale = options.postscale;
}

// The members of a grouped op, or kInvalidArgument when there are as many
// outputs as inputs.
absl::StatusOr<Handle> SubmitGroup(
    proto::OpType type, absl::Span<const Tensor> inputs, size_t outputs,
    absl::string_view name, ProcessSet process_set,
    const std::function<void(size_t, worker::PendingOp&)>& fill) {
  const std::string op = absl::StrCat("grouped_", proto::OpTypeName(type));
  const NextOrder order = next_order;
  TakeOrder(nullptr);
  auto ops = internal::CurrentOps(op);
  if (!ops.ok()) return ops.status();
  if (inputs.size() != outputs) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, " '", name, "': ", inputs.size(), " inputs but ",
                     outputs, " outputs; give one output per input"));
  }
  std::vector<std::shared_ptr<worker::PendingOp>> members;
  for (size_t i = 0; i < inputs.size(); ++i) {
    members.push_back((*ops)->NewOp());
    worker::PendingOp& member = *members.back();
    member.op = type;
    member.input = inputs[i];
    member.process_set = process_set;
    if (i == 0) {  // one op of its stream's slot (negotiator_order.cc)
      member.order_stream = order.stream;
      member.order_slot = order.slot;
    }
    fill(i, member);
  }
  return (*ops)->SubmitGroup(std::move(members), name);
}

// Runs `submitted` to completion (the blocking wrappers).
absl::Status Wait(const absl::StatusOr<Handle>& submitted,
                  OpResult* result = nullptr) {
  if (!submitted.ok()) return submitted.status();
  return synchronize(*submitted, absl::InfiniteDuration(), result);
}

Tensor Vector(DataType type, int64_t count, const void* data) {
  return Tensor{type, {count}, const_cast<void*>(data), kCpu};
}

// An allocator handing out caller memory of exactly `elements` elements.
Allocator Exactly(void* memory, int64_t elements, const char* op) {
  return [memory, elements,
          op](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
    if (shape.empty() || shape[0] != elements) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": the negotiated output has ", shape.empty() ? 0 : shape[0],
          " elements, but the counts given add "
          "up to ",
          elements));
    }
    return memory;
  };
}

// kInvalidArgument if the negotiated per-rank sizes differ from the
// caller's.
absl::Status SameSplits(const char* op, const char* what,
                        absl::Span<const int64_t> given,
                        const std::vector<int64_t>& negotiated) {
  if (std::vector<int64_t>(given.begin(), given.end()) == negotiated) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", what, " [", absl::StrJoin(given, ","),
                   "] on rank ", rank(), " do not match what the ranks sent: [",
                   absl::StrJoin(negotiated, ","), "]"));
}

}  // namespace

absl::StatusOr<Handle> allreduce_async(const Tensor& input,
                                       const Tensor& output,
                                       const AllreduceOptions& options,
                                       absl::string_view name,
                                       ProcessSet process_set) {
  auto n = Prepare(proto::ALLREDUCE, input, process_set);
  if (!n.ok()) return n.status();
  n->op->output = output;
  SetReduce(*n->op, options);
  return Submit(*std::move(n), name);
}

absl::StatusOr<Handle> allgather_async(const Tensor& input, Allocator output,
                                       absl::string_view name,
                                       ProcessSet process_set) {
  auto n = Prepare(proto::ALLGATHER, input, process_set);
  if (!n.ok()) return n.status();
  n->op->allocator = std::move(output);
  return Submit(*std::move(n), name);
}

absl::StatusOr<Handle> broadcast_async(const Tensor& tensor, int root,
                                       absl::string_view name,
                                       ProcessSet process_set) {
  auto n = Prepare(proto::BROADCAST, tensor, process_set);
  if (!n.ok()) return n.status();
  n->op->output = tensor;
  n->op->root = root;
  return Submit(*std::move(n), name);
}

absl::StatusOr<Handle> alltoall_async(const Tensor& input, Allocator output,
                                      absl::Span<const int64_t> splits,
                                      absl::string_view name,
                                      ProcessSet process_set) {
  auto n = Prepare(proto::ALLTOALL, input, process_set);
  if (!n.ok()) return n.status();
  n->op->allocator = std::move(output);
  n->op->splits.assign(splits.begin(), splits.end());
  return Submit(*std::move(n), name);
}

absl::StatusOr<Handle> reducescatter_async(const Tensor& input,
                                           const Tensor& output,
                                           const AllreduceOptions& options,
                                           absl::Span<const int64_t> counts,
                                           absl::string_view name,
                                           ProcessSet process_set) {
  auto n = Prepare(proto::REDUCESCATTER, input, process_set);
  if (!n.ok()) return n.status();
  n->op->output = output;
  SetReduce(*n->op, options);
  n->op->splits.assign(counts.begin(), counts.end());
  return Submit(*std::move(n), name);
}

absl::StatusOr<Handle> barrier_async(absl::string_view name,
                                     ProcessSet process_set) {
  auto n = Prepare(proto::BARRIER, Tensor{}, process_set);
  if (!n.ok()) return n.status();
  return Submit(*std::move(n), name);
}

void internal::OrderNextSubmission(absl::string_view stream, uint32_t slot) {
  next_order.stream.assign(stream.data(), stream.size());
  next_order.slot = slot;
}

internal::SlicedWaits::SlicedWaits() : outer_(worker::ThreadWaitsSliced()) {
  worker::SetThreadWaitsSliced(true);
}
internal::SlicedWaits::~SlicedWaits() { worker::SetThreadWaitsSliced(outer_); }

absl::StatusOr<Handle> internal::VoidOrderedCall(absl::string_view stream,
                                                 uint32_t slot, ProcessSet set,
                                                 absl::string_view name,
                                                 absl::string_view why) {
  // Bounded: the reason is for messages.
  constexpr size_t kMaxWhy = 2048;
  auto n = Prepare(proto::BARRIER, Tensor{}, set);
  if (!n.ok()) return n.status();
  n->op->order_stream.assign(stream.data(), stream.size());
  n->op->order_slot = slot;
  why = why.substr(0, kMaxWhy);
  n->op->order_void = why.empty() ? std::string("refused") : std::string(why);
  return Submit(*std::move(n), absl::StrCat(name, " (void)"));
}

absl::StatusOr<Handle> internal::MembershipCheckAsync(bool leave) {
  auto n = Prepare(proto::MEMBERSHIP_CHECK, Tensor{}, kGlobalProcessSet);
  if (!n.ok()) return n.status();
  n->op->root = leave ? 1 : 0;
  return Submit(*std::move(n), "kolo.membership_check");
}

absl::StatusOr<Handle> grouped_allreduce_async(absl::Span<const Tensor> inputs,
                                               absl::Span<const Tensor> outputs,
                                               const AllreduceOptions& options,
                                               absl::string_view name,
                                               ProcessSet process_set) {
  return SubmitGroup(proto::ALLREDUCE, inputs, outputs.size(), name,
                     process_set, [&](size_t i, worker::PendingOp& op) {
                       op.output = outputs[i];
                       SetReduce(op, options);
                     });
}

absl::StatusOr<Handle> grouped_allgather_async(
    absl::Span<const Tensor> inputs, absl::Span<const Allocator> outputs,
    absl::string_view name, ProcessSet process_set) {
  return SubmitGroup(
      proto::ALLGATHER, inputs, outputs.size(), name, process_set,
      [&](size_t i, worker::PendingOp& op) { op.allocator = outputs[i]; });
}

absl::StatusOr<Handle> grouped_reducescatter_async(
    absl::Span<const Tensor> inputs, absl::Span<const Tensor> outputs,
    const AllreduceOptions& options, absl::string_view name,
    ProcessSet process_set) {
  return SubmitGroup(proto::REDUCESCATTER, inputs, outputs.size(), name,
                     process_set, [&](size_t i, worker::PendingOp& op) {
                       op.output = outputs[i];
                       SetReduce(op, options);
                     });
}

absl::StatusOr<int> join(absl::Duration timeout) {
  auto ops = internal::CurrentOps("join");
  if (!ops.ok()) return ops.status();
  return (*ops)->Join(timeout);
}

absl::StatusOr<ProcessSet> add_process_set(absl::Span<const int> ranks) {
  auto ops = internal::CurrentOps("add_process_set");
  if (!ops.ok()) return ops.status();
  return (*ops)->AddProcessSet(std::vector<int>(ranks.begin(), ranks.end()));
}

absl::Status remove_process_set(ProcessSet id) {
  auto ops = internal::CurrentOps("remove_process_set");
  if (!ops.ok()) return ops.status();
  return (*ops)->RemoveProcessSet(id);
}

absl::StatusOr<std::vector<int>> process_set_ranks(ProcessSet id) {
  auto ops = internal::CurrentOps("process_set_ranks");
  if (!ops.ok()) return ops.status();
  return (*ops)->ProcessSetRanks(id);
}

std::vector<ProcessSet> process_sets() {
  auto ops = internal::CurrentOps("process_sets");
  if (!ops.ok()) return {};
  return (*ops)->ProcessSetIds();
}

absl::Status start_timeline(const std::string& path, bool /*mark_cycles*/) {
  auto ops = internal::CurrentOps("start_timeline");
  if (!ops.ok()) return ops.status();
  return (*ops)->StartTimeline(path);
}

absl::Status stop_timeline() {
  auto ops = internal::CurrentOps("stop_timeline");
  if (!ops.ok()) return ops.status();
  return (*ops)->StopTimeline();
}

absl::Status set_fusion_threshold(int64_t bytes) {
  auto ops = internal::CurrentOps("set_fusion_threshold");
  if (!ops.ok()) return ops.status();
  return (*ops)->SetFusionThreshold(bytes);
}

absl::Status set_cache_capacity(int64_t entries) {
  auto ops = internal::CurrentOps("set_cache_capacity");
  if (!ops.ok()) return ops.status();
  return (*ops)->SetCacheCapacity(entries);
}

absl::StatusOr<bool> poll(Handle handle) {
  auto ops = internal::OpsForHandle("poll", handle);
  if (!ops.ok()) return ops.status();
  return (*ops)->Poll(handle);
}

absl::StatusOr<bool> try_synchronize(Handle handle, OpResult* result) {
  auto ops = internal::OpsForHandle("try_synchronize", handle);
  if (!ops.ok()) return ops.status();
  return (*ops)->TrySynchronize(handle, result);
}

absl::Status synchronize(Handle handle, absl::Duration timeout,
                         OpResult* result) {
  auto ops = internal::OpsForHandle("synchronize", handle);
  if (!ops.ok()) return ops.status();
  return (*ops)->Synchronize(handle, timeout, result);
}

std::vector<absl::Status> synchronize_all(absl::Span<const Handle> handles,
                                          absl::Duration timeout) {
  // Handles of one call come from one epoch (an epoch's end fails them
  // all, and the retry submits anew).
  auto ops = internal::OpsForHandle("synchronize_all",
                                    handles.empty() ? 0 : handles.front());
  if (!ops.ok()) return std::vector<absl::Status>(handles.size(), ops.status());
  return (*ops)->SynchronizeAll(handles, timeout);
}

absl::StatusOr<size_t> wait_any(absl::Span<const Handle> handles,
                                absl::Duration timeout) {
  auto ops =
      internal::OpsForHandle("wait_any", handles.empty() ? 0 : handles.front());
  if (!ops.ok()) return ops.status();
  return (*ops)->WaitAny(handles, timeout);
}

// ---- Blocking wrappers ------------------------------------------------------

absl::Status allreduce(const void* input, void* output, int64_t count,
                       DataType type, ReduceOp op, double prescale,
                       double postscale) {
  AllreduceOptions o;
  o.op = op;
  o.prescale = prescale;
  o.postscale = postscale;
  return Wait(allreduce_async(Vector(type, count, input),
                              Vector(type, count, output), o));
}

absl::Status allgather(const void* input, int64_t count, DataType type,
                       absl::Span<const int64_t> counts, void* output) {
  const int64_t total =
      std::accumulate(counts.begin(), counts.end(), int64_t{0});
  auto n =
      Prepare(proto::ALLGATHER, Vector(type, count, input), kGlobalProcessSet);
  if (!n.ok()) return n.status();
  n->op->allocator = Exactly(output, total, "allgather");
  n->op->expect.assign(counts.begin(), counts.end());  // checked on every rank
  OpResult result;
  absl::Status s = Wait(Submit(*std::move(n), ""), &result);
  if (!s.ok()) return s;
  return SameSplits("allgather", "counts", counts, result.splits);
}

absl::Status broadcast(void* buffer, int64_t count, DataType type, int root) {
  return Wait(broadcast_async(Vector(type, count, buffer), root));
}

absl::Status alltoall(const void* input, DataType type,
                      absl::Span<const int64_t> send_splits, void* output,
                      absl::Span<const int64_t> recv_splits) {
  const int64_t sent =
      std::accumulate(send_splits.begin(), send_splits.end(), int64_t{0});
  const int64_t received =
      std::accumulate(recv_splits.begin(), recv_splits.end(), int64_t{0});
  auto n =
      Prepare(proto::ALLTOALL, Vector(type, sent, input), kGlobalProcessSet);
  if (!n.ok()) return n.status();
  n->op->allocator = Exactly(output, received, "alltoall");
  n->op->splits.assign(send_splits.begin(), send_splits.end());
  n->op->expect.assign(recv_splits.begin(), recv_splits.end());
  OpResult result;
  absl::Status s = Wait(Submit(*std::move(n), ""), &result);
  if (!s.ok()) return s;
  return SameSplits("alltoall", "recv_splits", recv_splits, result.splits);
}

absl::Status reducescatter(const void* input, int64_t count, DataType type,
                           absl::Span<const int64_t> counts, void* output,
                           ReduceOp op) {
  AllreduceOptions o;
  o.op = op;
  const int r = rank();
  // A wrong number of counts is reported by the op itself (on every rank);
  // the output shape only needs a plausible value meanwhile.
  int64_t mine = r >= 0 && r < static_cast<int>(counts.size()) ? counts[r] : 0;
  return Wait(reducescatter_async(Vector(type, count, input),
                                  Vector(type, mine, output), o, counts));
}

absl::Status barrier() { return Wait(barrier_async()); }

}  // namespace kolo
