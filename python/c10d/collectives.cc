// ProcessGroupKolo's collectives (process_group_kolo.h): each takes the
// group's next call (Collective: a refusal voids its slot), checks its
// tensors, submits one kolo op (or one grouped op) under the call's name,
// and leaves the copies out to the progress thread.
//
// Inputs that are not contiguous are copied to contiguous buffers; outputs
// that are not (or whose size kolo learns only at negotiation) are written
// through staging buffers and copied back once the op completed.
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
using Submitted = std::vector<absl::StatusOr<Handle>>;

Submitted One(absl::StatusOr<Handle> h) {
  Submitted s;
  s.push_back(std::move(h));
  return s;
}

// Copies `buf` back into `t` when they are not the same tensor.
Finish CopyBack(at::Tensor t, at::Tensor buf) {
  if (t.is_same(buf)) return nullptr;
  return [t, buf](const std::vector<OpResult>&) mutable { t.copy_(buf); };
}

[[noreturn]] void Fail(const std::string& message) {
  throw std::runtime_error("kolo backend: " + message);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  return Collective("broadcast", [&](Call& call) {
    CheckSingle(tensors, "broadcast");
    int root = GlobalRank(opts.rootRank, "broadcast");
    at::Tensor buf = tensors[0].contiguous();
    Name(call, CallSignature(buf, true));
    Tensor k = KoloTensor(buf, false);
    Order(call);
    return Submit(c10d::OpType::BROADCAST, "broadcast", call,
                  One(api_->broadcast_async(k, root, call.name, process_set_)),
                  tensors, CopyBack(tensors[0], buf), {buf});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  return Collective("allreduce", [&](Call& call) {
    CheckSingle(tensors, "allreduce");
    AllreduceOptions o =
        KoloReduce(opts.reduceOp, tensors[0].scalar_type(), "allreduce");
    at::Tensor buf = tensors[0].contiguous();
    Tensor k = KoloTensor(buf, false);
    Name(call, CallSignature(buf, true));
    Order(call);
    return Submit(c10d::OpType::ALLREDUCE, "allreduce", call,
                  One(api_->allreduce_async(k, k, o, call.name, process_set_)),
                  tensors, CopyBack(tensors[0], buf), {buf});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::allreduce_coalesced(
    std::vector<at::Tensor>& tensors,
    const c10d::AllreduceCoalescedOptions& opts) {
  return Collective("allreduce_coalesced", [&](Call& call) {
    if (tensors.empty()) Fail("allreduce_coalesced: no tensors");
    std::vector<at::Tensor> bufs;
    std::vector<Tensor> ks;
    for (const at::Tensor& t : tensors) {
      CheckTensor(t, "allreduce_coalesced");
      bufs.push_back(t.contiguous());
      ks.push_back(KoloTensor(bufs.back(), false));
    }
    AllreduceOptions o = KoloReduce(opts.reduceOp, tensors[0].scalar_type(),
                                    "allreduce_coalesced");
    Name(call, CallSignature(tensors[0], false));
    Finish finish = [tensors, bufs](const std::vector<OpResult>&) mutable {
      for (size_t i = 0; i < tensors.size(); ++i) {
        if (!tensors[i].is_same(bufs[i])) tensors[i].copy_(bufs[i]);
      }
    };
    Order(call);
    return Submit(
        c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", call,
        One(api_->grouped_allreduce_async(ks, ks, o, call.name, process_set_)),
        tensors, std::move(finish), bufs);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::reduce(
    std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  // An allreduce whose result only the root keeps (the others reduce into
  // scratch memory): kolo has no rooted reduction.
  return Collective("reduce", [&](Call& call) {
    CheckSingle(tensors, "reduce");
    GlobalRank(opts.rootRank, "reduce");
    AllreduceOptions o =
        KoloReduce(opts.reduceOp, tensors[0].scalar_type(), "reduce");
    bool root = opts.rootRank == getRank();
    at::Tensor buf = tensors[0].contiguous();
    at::Tensor out = root ? buf : at::empty_like(buf);
    Name(call, CallSignature(buf, true));
    Tensor in_k = KoloTensor(buf, false);
    Tensor out_k = KoloTensor(out, false);
    Order(call);
    return Submit(
        c10d::OpType::REDUCE, "reduce", call,
        One(api_->allreduce_async(in_k, out_k, o, call.name, process_set_)),
        tensors, root ? CopyBack(tensors[0], buf) : nullptr, {buf, out});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::allgather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& /*opts*/) {
  return Collective("allgather", [&](Call& call) {
    CheckSingle(inputs, "allgather");
    if (outputs.size() != 1 ||
        outputs[0].size() != static_cast<size_t>(getSize())) {
      Fail("allgather: takes one list of " + std::to_string(getSize()) +
           " output tensors");
    }
    for (const at::Tensor& t : outputs[0]) CheckTensor(t, "allgather");
    return SubmitGathered(c10d::OpType::ALLGATHER, "allgather", call, inputs[0],
                          outputs[0]);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::SubmitGathered(
    c10d::OpType type, const char* what, Call& call, const at::Tensor& input,
    std::vector<at::Tensor> outs) {
  at::Tensor buf = input.contiguous();
  auto staging = std::make_shared<Staging>();
  Name(call, CallSignature(buf, false));
  Finish finish = nullptr;
  if (!outs.empty()) {
    finish = [outs, staging, what](const std::vector<OpResult>& r) mutable {
      CopySlices(staging->tensor, Splits(r[0]), outs, what);
    };
  }
  Tensor k = KoloTensor(buf, true);
  Allocator alloc = OutputAllocator(at::Tensor(), buf.scalar_type(), staging);
  Order(call);
  return Submit(
      type, what, call,
      One(api_->allgather_async(k, std::move(alloc), call.name, process_set_)),
      std::move(outs), std::move(finish), {buf});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::_allgather_base(
    at::Tensor& output, at::Tensor& input,
    const c10d::AllgatherOptions& /*opts*/) {
  return Collective("_allgather_base", [&](Call& call) {
    CheckTensor(input, "_allgather_base");
    CheckTensor(output, "_allgather_base");
    at::Tensor buf = input.contiguous();
    auto staging = std::make_shared<Staging>();
    Name(call, CallSignature(buf, false));
    Finish finish = [output, staging](const std::vector<OpResult>& r) mutable {
      if (!staging->tensor.defined()) return;  // written in place
      int64_t n = r[0].shape.empty() ? 0 : r[0].shape[0];
      if (n != output.numel()) {
        Fail("_allgather_base: the output has " +
             std::to_string(output.numel()) + " elements, the ranks sent " +
             std::to_string(n));
      }
      output.copy_(staging->tensor.narrow(0, 0, n).view(output.sizes()));
    };
    Tensor k = KoloTensor(buf, true);
    Allocator alloc = OutputAllocator(output, buf.scalar_type(), staging);
    Order(call);
    return Submit(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", call,
                  One(api_->allgather_async(k, std::move(alloc), call.name,
                                            process_set_)),
                  {output}, std::move(finish), {buf, output});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::gather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  // An allgather that only the root copies out of.
  return Collective("gather", [&](Call& call) {
    CheckSingle(inputs, "gather");
    GlobalRank(opts.rootRank, "gather");
    bool root = opts.rootRank == getRank();
    std::vector<at::Tensor> outs;
    if (root) {
      if (outputs.size() != 1 ||
          outputs[0].size() != static_cast<size_t>(getSize())) {
        Fail("gather: the root takes one list of " + std::to_string(getSize()) +
             " output tensors");
      }
      outs = outputs[0];
      for (const at::Tensor& t : outs) CheckTensor(t, "gather");
    } else if (!outputs.empty() && !outputs[0].empty()) {
      Fail("gather: only the root (rank " + std::to_string(opts.rootRank) +
           ") takes output tensors");
    }
    return SubmitGathered(c10d::OpType::GATHER, "gather", call, inputs[0],
                          std::move(outs));
  });
}

}  // namespace kolo::c10d_backend
