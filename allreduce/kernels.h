// Reduction kernels: every DataType x ReduceOp, element-wise over host
// buffers, written so that the compiler vectorises them (one typed loop per
// dtype x op over __restrict pointers, chosen once per call; no per-element
// dispatch). scripts/vectorization-report.sh shows which loops vectorise.
//
// Semantics (see include/kolo/types.h): integers reduce in the unsigned type of
// their width (sum/product wrap); min/max compare in the signed type for
// signed integers; bool: sum/max = OR, product/min = AND (inputs are 0/1
// bytes; any non-zero counts as true, results are 0/1); float16/bfloat16
// reduce through float32, rounding to nearest even. NaN: min and max
// propagate NaN (as torch.minimum/maximum do): if either operand is NaN the
// result is NaN; sum/product follow IEEE (inf + -inf = NaN, 0 * inf = NaN).
// min/max of -0 and +0 return the second operand. Results are a pure
// function of the inputs, so equal inputs give bitwise-equal outputs.
// Unknown enum values (outside DataType / ReduceOp) give kInvalidArgument.
// ReduceOp::kAverage reduces like kSum: the division by the number of ranks
// is a separate, final step (DivideBy), so that partial results stay exact.
//
// Thread-safety: pure functions on caller-owned memory.
#ifndef KOLO_ALLREDUCE_KERNELS_H_
#define KOLO_ALLREDUCE_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kolo/types.h"

namespace kolo {

// dst[i] = dst[i] op src[i], i < count. dst and src may be equal, not
// otherwise overlap. kInvalidArgument for bool average ("average is not
// defined for bool tensors; use sum (logical or) or min (logical and)").
absl::Status ReduceInto(DataType type, ReduceOp op, void* dst, const void* src,
                        size_t count);

// out[i] = a[i] op b[i]. out may be the same pointer as a and/or b (a and b
// may also be equal); buffers must not otherwise overlap.
absl::Status Reduce(DataType type, ReduceOp op, void* out, const void* a,
                    const void* b, size_t count);

// Final step of an average over n ranks: floats divide (in double for
// float64, in float otherwise, float16/bfloat16 rounded back to nearest
// even); integers divide truncating toward zero (in the signed type for
// signed integers: -7 / 2 = -3). kInvalidArgument for bool or n < 1.
absl::Status DivideBy(DataType type, void* data, size_t count, int64_t n);

// Pre/post scaling: data[i] *= factor, computed in double for float64 and
// integers (integers then truncate toward zero and wrap to their width), in
// float otherwise. A product that is NaN or infinite gives 0 for integers
// (never undefined behaviour). kInvalidArgument for bool.
absl::Status Scale(DataType type, void* data, size_t count, double factor);

// Fusion's pack and unpack (one pass each, no extra pass over the data):
// ScaleCopy: out[i] = in[i] * factor with Scale's arithmetic (a plain copy
// for factor 1). FinishCopy: out[i] = the result of DivideBy(n) (when
// n != 1) then Scale(postscale) (when != 1) applied to in[i], bitwise the
// same as those two passes. in == out is allowed; otherwise no overlap.
// kInvalidArgument for bool when a division or scaling is asked.
absl::Status ScaleCopy(DataType type, const void* in, void* out, size_t count,
                       double factor);
absl::Status FinishCopy(DataType type, const void* in, void* out, size_t count,
                        int64_t n, double postscale);

// Fills `count` elements with the identity of `op` (0 for sum/average, 1
// for product, the type's largest value for min and smallest for max; for
// bool: false for sum/max, true for product/min). Floats use +-inf for
// min/max. kInvalidArgument for bool average, like ReduceInto.
absl::Status FillIdentity(DataType type, ReduceOp op, void* data, size_t count);

// float16 / bfloat16 <-> float32, round to nearest even (NaN stays NaN).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float BFloat16ToFloat(uint16_t b);
uint16_t FloatToBFloat16(float f);

}  // namespace kolo

#endif  // KOLO_ALLREDUCE_KERNELS_H_
