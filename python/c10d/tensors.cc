// Helpers of ProcessGroupKolo (tensors.h): conversions and checks.
//
// Thread-safety: see tensors.h.
#include "python/c10d/tensors.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <utility>

namespace kolo::c10d_backend {
namespace {

[[noreturn]] void Fail(const std::string& message) {
  throw std::runtime_error("kolo backend: " + message);
}

}  // namespace

bool KoloType(at::ScalarType t, DataType* out) {
  switch (t) {
    case at::kByte:
      *out = DataType::kUInt8;
      return true;
    case at::kChar:
      *out = DataType::kInt8;
      return true;
    case at::kShort:
      *out = DataType::kInt16;
      return true;
    case at::kInt:
      *out = DataType::kInt32;
      return true;
    case at::kLong:
      *out = DataType::kInt64;
      return true;
    case at::kHalf:
      *out = DataType::kFloat16;
      return true;
    case at::kBFloat16:
      *out = DataType::kBFloat16;
      return true;
    case at::kFloat:
      *out = DataType::kFloat32;
      return true;
    case at::kDouble:
      *out = DataType::kFloat64;
      return true;
    case at::kBool:
      *out = DataType::kBool;
      return true;
    default:
      return false;
  }
}

void CheckTensor(const at::Tensor& t, const std::string& op) {
  if (!t.defined()) Fail(op + ": an undefined tensor");
  if (!t.device().is_cpu()) {
    Fail(op + ": a tensor on " + t.device().str() +
         "; the kolo backend takes CPU tensors only for now (use the nccl "
         "backend, or kolo.torch, for CUDA tensors)");
  }
  if (t.layout() != at::kStrided) {
    Fail(op + ": a sparse tensor; the kolo backend takes dense tensors");
  }
  DataType unused;
  if (!KoloType(t.scalar_type(), &unused)) {
    Fail(op + ": dtype " + std::string(c10::toString(t.scalar_type())) +
         " is not one kolo reduces or moves (uint8, int8, int16, int32, "
         "int64, float16, bfloat16, float32, float64, bool)");
  }
}

void CheckSingle(const std::vector<at::Tensor>& tensors,
                 const std::string& op) {
  if (tensors.size() != 1) {
    Fail(op + ": takes one tensor per process (got " +
         std::to_string(tensors.size()) + ")");
  }
  CheckTensor(tensors[0], op);
}

Tensor KoloTensor(const at::Tensor& t, bool flat) {
  Tensor k;
  KoloType(t.scalar_type(), &k.dtype);
  if (flat || t.dim() == 0) {
    k.shape = {t.numel()};
  } else {
    k.shape = t.sizes().vec();
  }
  k.data = t.data_ptr();
  return k;
}

AllreduceOptions KoloReduce(const c10d::ReduceOp& op, at::ScalarType type,
                            const std::string& what) {
  AllreduceOptions o;
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      o.op = ReduceOp::kSum;
      return o;
    case c10d::ReduceOp::AVG:
      o.op = ReduceOp::kAverage;
      return o;
    case c10d::ReduceOp::PRODUCT:
      o.op = ReduceOp::kProduct;
      return o;
    case c10d::ReduceOp::MIN:
      o.op = ReduceOp::kMin;
      return o;
    case c10d::ReduceOp::MAX:
      o.op = ReduceOp::kMax;
      return o;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
      if (type == at::kBool) {  // AND is MIN, OR is MAX on bools
        o.op = op.op_ == c10d::ReduceOp::BAND ? ReduceOp::kMin : ReduceOp::kMax;
        return o;
      }
      Fail(what + ": ReduceOp." +
           (op.op_ == c10d::ReduceOp::BAND ? "BAND" : "BOR") +
           " on a non-bool tensor: kolo has no bitwise reductions (it takes "
           "them on bool tensors only, as MIN and MAX)");
    case c10d::ReduceOp::PREMUL_SUM: {
      auto* s =
          dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      if (s == nullptr) Fail(what + ": PREMUL_SUM without its factor");
      o.op = ReduceOp::kSum;
      o.prescale = s->tensor_factors.empty()
                       ? s->double_factor
                       : s->tensor_factors[0].item<double>();
      return o;
    }
    default:
      Fail(what + ": ReduceOp " + std::to_string(static_cast<int>(op.op_)) +
           " is not one kolo has (SUM, AVG, PRODUCT, MIN, MAX, PREMUL_SUM; "
           "BAND and BOR on bool tensors); BXOR is refused");
  }
}

Allocator OutputAllocator(at::Tensor out, at::ScalarType type,
                          std::shared_ptr<Staging> staging) {
  return [out = std::move(out), type, staging = std::move(staging)](
             absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (out.defined() && out.is_contiguous() && out.numel() == n) {
      return out.data_ptr();
    }
    staging->tensor =
        at::empty({n > 0 ? n : 1}, at::TensorOptions().dtype(type));
    return staging->tensor.data_ptr();
  };
}

std::vector<int64_t> Splits(const OpResult& result) { return result.splits; }

void CopySlices(const at::Tensor& flat, const std::vector<int64_t>& splits,
                std::vector<at::Tensor>& outputs, const std::string& what) {
  if (splits.size() != outputs.size()) {
    Fail(what + ": " + std::to_string(splits.size()) + " parts for " +
         std::to_string(outputs.size()) + " output tensors");
  }
  int64_t offset = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].numel() != splits[i]) {
      Fail(what + ": output tensor " + std::to_string(i) + " has " +
           std::to_string(outputs[i].numel()) + " elements, rank " +
           std::to_string(i) + " sent " + std::to_string(splits[i]));
    }
    outputs[i].copy_(
        flat.narrow(0, offset, splits[i]).view(outputs[i].sizes()));
    offset += splits[i];
  }
}

at::Tensor Concat(const std::vector<at::Tensor>& tensors,
                  std::vector<int64_t>* counts) {
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  counts->clear();
  for (const at::Tensor& t : tensors) {
    flat.push_back(t.reshape({-1}));
    counts->push_back(t.numel());
  }
  return at::cat(flat).contiguous();
}

}  // namespace kolo::c10d_backend
