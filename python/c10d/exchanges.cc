// ProcessGroupKolo's scatter, reduce-scatters and all-to-alls
// (process_group_kolo.h), on kolo's reducescatter and alltoall. Tensors are
// flattened (kolo's rows are then elements) except in alltoall_base, whose
// splits count rows of the first dimension as torch's do.
//
// Thread-safety: see process_group_kolo.h.
#include <memory>
#include <stdexcept>
#include <utility>

#include "python/c10d/process_group_kolo.h"
#include "python/c10d/tensors.h"

namespace kolo::c10d_backend {
namespace {

using Finish = std::function<void(const std::vector<OpResult>&)>;

[[noreturn]] void Fail(const std::string& message) {
  throw std::runtime_error("kolo backend: " + message);
}

// Copies a flat staging buffer (if used) into `out`, checking the count.
Finish CopyOut(at::Tensor out, std::shared_ptr<Staging> staging,
               std::string what) {
  return [out, staging, what](const std::vector<OpResult>& r) mutable {
    int64_t n = 1;
    for (int64_t d : r[0].shape) n *= d;
    if (n != out.numel()) {
      Fail(what + ": the output has " + std::to_string(out.numel()) +
           " elements, the ranks sent " + std::to_string(n));
    }
    if (staging->tensor.defined()) {
      out.copy_(staging->tensor.narrow(0, 0, n).view(out.sizes()));
    }
  };
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  // An alltoall in which only the root sends: rank r gets the root's
  // inputs[r].
  return Collective("scatter", [&](Call& call) {
    CheckSingle(outputs, "scatter");
    GlobalRank(opts.rootRank, "scatter");
    bool root = opts.rootRank == getRank();
    at::Tensor send;
    std::vector<int64_t> splits(static_cast<size_t>(getSize()), 0);
    if (root) {
      if (inputs.size() != 1 ||
          inputs[0].size() != static_cast<size_t>(getSize())) {
        Fail("scatter: the root takes one list of " +
             std::to_string(getSize()) + " input tensors");
      }
      for (const at::Tensor& t : inputs[0]) CheckTensor(t, "scatter");
      send = Concat(inputs[0], &splits);
    } else {
      if (!inputs.empty() && !inputs[0].empty()) {
        Fail("scatter: only the root (rank " + std::to_string(opts.rootRank) +
             ") takes input tensors");
      }
      send = at::empty({0}, outputs[0].options());
    }
    at::Tensor out = outputs[0];
    auto staging = std::make_shared<Staging>();
    Name(call, CallSignature(out, false));
    Tensor k = KoloTensor(send, true);
    Allocator alloc = OutputAllocator(out, out.scalar_type(), staging);
    std::vector<absl::StatusOr<Handle>> h;
    Order(call);
    h.push_back(api_->alltoall_async(k, std::move(alloc), splits, call.name,
                                     process_set_));
    return Submit(c10d::OpType::SCATTER, "scatter", call, std::move(h), outputs,
                  CopyOut(out, staging, "scatter"), {send, out});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::reduce_scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  return Collective("reduce_scatter", [&](Call& call) {
    CheckSingle(outputs, "reduce_scatter");
    if (inputs.size() != 1 ||
        inputs[0].size() != static_cast<size_t>(getSize())) {
      Fail("reduce_scatter: takes one list of " + std::to_string(getSize()) +
           " input tensors");
    }
    for (const at::Tensor& t : inputs[0]) CheckTensor(t, "reduce_scatter");
    AllreduceOptions o =
        KoloReduce(opts.reduceOp, outputs[0].scalar_type(), "reduce_scatter");
    std::vector<int64_t> counts;
    at::Tensor send = Concat(inputs[0], &counts);
    at::Tensor out = outputs[0];
    at::Tensor buf = out.contiguous();
    Name(call, CallSignature(send, true));
    Tensor in_k = KoloTensor(send, true);
    Tensor out_k = KoloTensor(buf, true);
    std::vector<absl::StatusOr<Handle>> h;
    Order(call);
    h.push_back(api_->reducescatter_async(in_k, out_k, o, counts, call.name,
                                          process_set_));
    Finish finish = nullptr;
    if (!out.is_same(buf)) {
      finish = [out, buf](const std::vector<OpResult>&) mutable {
        out.copy_(buf);
      };
    }
    return Submit(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", call,
                  std::move(h), outputs, std::move(finish), {send, buf});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input,
    const c10d::ReduceScatterOptions& opts) {
  return Collective("_reduce_scatter_base", [&](Call& call) {
    CheckTensor(input, "_reduce_scatter_base");
    CheckTensor(output, "_reduce_scatter_base");
    if (input.numel() != output.numel() * getSize()) {
      Fail(
          "_reduce_scatter_base: the input must have size() times the "
          "output's elements (" +
          std::to_string(input.numel()) + " vs " +
          std::to_string(output.numel()) + " x " + std::to_string(getSize()) +
          ")");
    }
    AllreduceOptions o =
        KoloReduce(opts.reduceOp, output.scalar_type(), "_reduce_scatter_base");
    at::Tensor send = input.contiguous();
    at::Tensor buf = output.contiguous();
    Name(call, CallSignature(send, true));
    Tensor in_k = KoloTensor(send, true);
    Tensor out_k = KoloTensor(buf, true);
    std::vector<absl::StatusOr<Handle>> h;
    Order(call);
    h.push_back(
        api_->reducescatter_async(in_k, out_k, o, {}, call.name, process_set_));
    Finish finish = nullptr;
    if (!output.is_same(buf)) {
      finish = [output, buf](const std::vector<OpResult>&) mutable {
        output.copy_(buf);
      };
    }
    return Submit(c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base",
                  call, std::move(h), {output}, std::move(finish), {send, buf});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& /*opts*/) {
  return Collective("alltoall_base", [&](Call& call) {
    CheckTensor(input, "alltoall_base");
    CheckTensor(output, "alltoall_base");
    if (input.dim() == 0) Fail("alltoall_base: a scalar input");
    at::Tensor send = input.contiguous();
    auto staging = std::make_shared<Staging>();
    Name(call, CallSignature(send, false));
    Tensor k = KoloTensor(send, false);
    Allocator alloc = OutputAllocator(output, output.scalar_type(), staging);
    std::vector<absl::StatusOr<Handle>> h;
    Order(call);
    h.push_back(api_->alltoall_async(k, std::move(alloc), input_splits,
                                     call.name, process_set_));
    Finish copy = CopyOut(output, staging, "alltoall_base");
    std::vector<int64_t> expected = output_splits;
    Finish finish = [copy, expected](const std::vector<OpResult>& r) {
      if (!expected.empty() && r[0].splits != expected) {
        Fail(
            "alltoall_base: the rows received from each rank differ from "
            "output_split_sizes");
      }
      copy(r);
    };
    return Submit(c10d::OpType::ALLTOALL_BASE, "alltoall_base", call,
                  std::move(h), {output}, std::move(finish), {send, output});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::alltoall(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions& /*opts*/) {
  return Collective("alltoall", [&](Call& call) {
    size_t n = static_cast<size_t>(getSize());
    if (inputs.size() != n || outputs.size() != n) {
      Fail("alltoall: takes " + std::to_string(n) +
           " input and output tensors");
    }
    for (const at::Tensor& t : inputs) CheckTensor(t, "alltoall");
    for (const at::Tensor& t : outputs) CheckTensor(t, "alltoall");
    std::vector<int64_t> splits;
    at::Tensor send = Concat(inputs, &splits);
    auto staging = std::make_shared<Staging>();
    Name(call, CallSignature(send, false));
    Tensor k = KoloTensor(send, true);
    Allocator alloc =
        OutputAllocator(at::Tensor(), send.scalar_type(), staging);
    std::vector<absl::StatusOr<Handle>> h;
    Order(call);
    h.push_back(api_->alltoall_async(k, std::move(alloc), splits, call.name,
                                     process_set_));
    std::vector<at::Tensor> outs = outputs;
    Finish finish = [outs, staging](const std::vector<OpResult>& r) mutable {
      CopySlices(staging->tensor, Splits(r[0]), outs, "alltoall");
    };
    return Submit(c10d::OpType::ALLTOALL, "alltoall", call, std::move(h),
                  outputs, std::move(finish), {send});
  });
}

}  // namespace kolo::c10d_backend
