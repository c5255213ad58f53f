// Helpers of ProcessGroupKolo: torch tensors as kolo::Tensor, reduce ops as
// kolo's, the checks every op makes, and the allocators of outputs whose
// size kolo learns at negotiation.
//
// Thread-safety: pure functions, except that an allocator runs on kolo's
// background thread and writes only the staging slot it owns.
#ifndef KOLO_PYTHON_C10D_TENSORS_H_
#define KOLO_PYTHON_C10D_TENSORS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <vector>

#include "kolo/kolo.h"

namespace kolo::c10d_backend {

// kolo's dtype for torch's `t` in `*out`; false when kolo has none.
bool KoloType(at::ScalarType t, DataType* out);

// Throws (RuntimeError in Python) unless `t` is a dense CPU tensor of a
// dtype kolo has; names the op.
void CheckTensor(const at::Tensor& t, const std::string& op);
// Throws unless `tensors` holds exactly one tensor (one per process on CPU).
void CheckSingle(const std::vector<at::Tensor>& tensors, const std::string& op);

// `t` (contiguous) as a kolo tensor of its own shape, or flattened to one
// dimension (numel elements) with `flat`. A scalar's shape is {1}.
Tensor KoloTensor(const at::Tensor& t, bool flat);

// kolo's reduction for torch's op on dtype `type`; throws for ops kolo has
// not (BXOR; BAND/BOR on non-bool tensors).
AllreduceOptions KoloReduce(const c10d::ReduceOp& op, at::ScalarType type,
                            const std::string& what);

// Where an allocator puts its output when the caller's tensor does not fit.
struct Staging {
  at::Tensor tensor;  // undefined while the caller's tensor was used
};
// An allocator writing into `out` (contiguous, flat) when it has exactly the
// negotiated element count, else into staging->tensor (dtype `type`).
Allocator OutputAllocator(at::Tensor out, at::ScalarType type,
                          std::shared_ptr<Staging> staging);

// The elements each rank sent, from an allgather/alltoall result of a flat
// tensor (splits are rows, and rows are elements).
std::vector<int64_t> Splits(const OpResult& result);

// Copies consecutive slices of `flat` into `outputs` (each reshaped from its
// slice); throws naming `what` unless the sizes agree.
void CopySlices(const at::Tensor& flat, const std::vector<int64_t>& splits,
                std::vector<at::Tensor>& outputs, const std::string& what);

// The flat concatenation of `tensors` (contiguous) and their element counts.
at::Tensor Concat(const std::vector<at::Tensor>& tensors,
                  std::vector<int64_t>* counts);

}  // namespace kolo::c10d_backend

#endif  // KOLO_PYTHON_C10D_TENSORS_H_
