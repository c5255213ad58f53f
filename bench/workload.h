// Workload: kolo-bench's input data and expected results.
//
// Element i of stream s holds a small integer that depends only on
// (i + s) mod kPeriod (kPeriod = 21), chosen per reduce op so that every
// partial result is exact in every dtype: sum/average/min/max use
// k % 7 - 3 (k % 7 for uint8), product uses -1 or 1 (2 or 1 for uint8), bool
// uses k % 3 != 0. A reduction over ranks 0..n-1 (rank r reads stream r) is
// therefore periodic too, so filling and checking buffers of any size costs
// a memcpy/memcmp, not a per-element computation. Expected values are
// computed here in int64 (wrapping like the kernels' unsigned arithmetic),
// independently of the reduction kernels; only float average is compared
// with a tolerance of a few ulps of the dtype, as division rounds.
//
// Thread-safety: a Periodic is immutable after construction; free functions
// are pure.
#ifndef KOLO_BENCH_WORKLOAD_H_
#define KOLO_BENCH_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kolo/types.h"

namespace kolo::bench {

inline constexpr int kPeriod = 21;

// One period of encoded elements, repeated to fill or check buffers.
class Periodic {
 public:
  // values[k] for k in [0, kPeriod), encoded as `type`. `tolerance` > 0 makes
  // Check compare decoded values with that relative tolerance.
  Periodic(DataType type, const std::vector<double>& values,
           double tolerance = 0);

  // dst[i] = values[(first + i) % kPeriod] for i in [0, count).
  void Fill(int64_t first, int64_t count, void* dst) const;
  // OK if got[i] == values[(first + i) % kPeriod] for every i (bitwise, or
  // within the tolerance); else kDataLoss naming `what`, the first bad
  // element, its value and the expected one.
  absl::Status Check(int64_t first, int64_t count, const void* got,
                     const std::string& what) const;

 private:
  DataType type_;
  size_t elem_;
  double tolerance_;
  std::vector<double> values_;
  std::vector<char> tile_;  // 2 x kTile elements starting at k = 0
};

// The input stream `s` for reduce op `op` (any op for the data-movement
// collectives: use kSum).
Periodic InputStream(DataType type, ReduceOp op, int64_t s);
// The reduction with `op` over streams 0..n-1 (rank r's input is stream r).
Periodic ExpectedReduction(DataType type, ReduceOp op, int n);
// The float32 average over streams 0..n-1 of ReduceOp::kSum inputs as
// --mode step checks it, exactly (no tolerance): the float sum of the ranks'
// small integers (exact) divided by static_cast<float>(n), the computation
// kolo's average and Horovod's both do. REQUIRES: n >= 1.
Periodic ExactFloat32Average(int n);
// A value that no stream holds, to poison outputs before the last iteration.
void Poison(void* data, size_t bytes);

// Decodes one element of `type` to double (for messages and tolerant checks).
double Decode(DataType type, const void* element);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_WORKLOAD_H_
