// kolo-collectives-worker (collectives_worker.h): the test values and the
// results kolo must give for them, following the documented arithmetic
// (allreduce/kernels.h): prescale each input, reduce, divide an average by
// the world size, postscale; and the allocator of the data cases.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/workers/collectives_worker.h"

namespace collectives_worker {

size_t Size(DataType t) { return kolo::DataTypeSize(t); }
std::string Name(DataType t) { return std::string(kolo::DataTypeName(t)); }
std::string OpName(ReduceOp op) { return std::string(kolo::ReduceOpName(op)); }

namespace {

double Value(Values kind, int r, int64_t j) {
  switch (kind) {
    case Values::kMixed:
      return static_cast<double>(((j % 7) - 3) * (r + 1) + (j % 4) - 1);
    case Values::kProduct:
      if (j % 13 == 12 && r == 0) return 0;
      if ((j + r) % 3 == 0) return 2;
      if ((j + r) % 3 == 1) return (j / 2 + r) % 2 ? -1 : 1;
      return r % 2 ? 3 : 1;
    case Values::kInexact:
      return r == 0 ? static_cast<double>(j % 10) : 0;
  }
  return 0;
}

bool IsInt(DataType t) {
  return t != DataType::kFloat16 && t != DataType::kBFloat16 &&
         t != DataType::kFloat32 && t != DataType::kFloat64;
}

// x * factor as kolo scales (kernels.h Scale): double then truncation for
// integers, double for float64, float otherwise.
double Scaled(DataType t, double x, double factor) {
  if (factor == 1.0) return x;
  if (IsInt(t)) return std::trunc(x * factor);
  if (t == DataType::kFloat64) return x * factor;
  return static_cast<float>(x) * static_cast<float>(factor);
}

// The average's division (kernels.h DivideBy).
double Divided(DataType t, double sum, int n) {
  if (IsInt(t)) return static_cast<double>(static_cast<int64_t>(sum) / n);
  if (t == DataType::kFloat64) return sum / n;
  return static_cast<float>(sum) / static_cast<float>(n);
}

// Element j of the reduction over every rank.
double Expected(const Reduction& s, int n, int64_t j) {
  double acc = 0;
  for (int r = 0; r < n; ++r) {
    const double x = Scaled(s.t, Value(s.values, r, j), s.pre);
    if (r == 0) {
      acc = x;
      continue;
    }
    switch (s.op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        acc += x;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, x);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, x);
        break;
      case ReduceOp::kProduct:
        acc *= x;
        break;
    }
  }
  if (s.op == ReduceOp::kAverage) acc = Divided(s.t, acc, n);
  return Scaled(s.t, acc, s.post);
}

}  // namespace

// This rank's inputs and every element of the reduced result.
void ReductionData(const Reduction& s, int64_t count, Bytes* in, Bytes* want,
                   std::string* bad) {
  std::vector<double> mine(count), all(count);
  for (int64_t j = 0; j < count; ++j) {
    mine[j] = Value(s.values, g_rank, j);
    all[j] = Expected(s, g_size, j);
  }
  *in = EncodeAll(s.t, mine, bad);
  *want = EncodeAll(s.t, all, bad);
}

std::string ScaleName(double pre, double post) {
  std::string s;
  if (pre != 1) absl::StrAppend(&s, "/pre", pre);
  if (post != 1) absl::StrAppend(&s, "/post", post);
  return s;
}

kolo::Allocator AllocInto(std::shared_ptr<Bytes> out, DataType t,
                          std::shared_ptr<std::vector<int64_t>> asked) {
  return [out, t,
          asked](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
    asked->assign(shape.begin(), shape.end());
    out->assign(static_cast<size_t>(Elements(*asked)) * Size(t), kSentinel);
    return out->data();
  };
}

}  // namespace collectives_worker
