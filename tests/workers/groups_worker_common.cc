// kolo-groups-worker (groups_worker.h): the test values (small integers,
// exact in every dtype whatever the reduction order), their expected
// reductions over a process set's contributing ranks, and the lines the
// worker prints.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/workers/groups_worker.h"

namespace groups_worker {
namespace {

bool IsInt(DataType t) {
  return t == DataType::kInt32 || t == DataType::kInt64;
}

// `xs` (the contributing ranks' elements) reduced by `op`; an average divides
// by `divisor` as kolo does (integers truncate toward zero, float32 in float).
double Reduce(DataType t, ReduceOp op, const std::vector<double>& xs,
              int divisor) {
  double acc = xs.at(0);
  for (size_t i = 1; i < xs.size(); ++i) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        acc += xs[i];
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, xs[i]);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, xs[i]);
        break;
      case ReduceOp::kProduct:
        acc *= xs[i];
        break;
    }
  }
  if (op != ReduceOp::kAverage) return acc;
  if (IsInt(t)) return static_cast<double>(static_cast<int64_t>(acc) / divisor);
  if (t == DataType::kFloat64) return acc / divisor;
  return static_cast<float>(acc) / static_cast<float>(divisor);
}

}  // namespace

size_t Size(DataType t) { return kolo::DataTypeSize(t); }
std::string Name(DataType t) { return std::string(kolo::DataTypeName(t)); }
std::string OpName(ReduceOp op) { return std::string(kolo::ReduceOpName(op)); }

// The values as elements of t; every test value here is exact in its dtype
// (one that is not is a bug of this worker: it stops).
Bytes EncodeAll(DataType t, const std::vector<double>& values) {
  std::string bad;
  Bytes out = kolo::testing::EncodeAll(t, values, &bad);
  if (!bad.empty()) {
    std::fprintf(stderr, "kolo-groups-worker: %s\n", bad.c_str());
    std::abort();
  }
  return out;
}

// Rank r's element j of a tensor with `salt`: small integers of both signs,
// or -1, 1, 2 for a product.
double Value(ReduceOp op, int r, int64_t j, int salt) {
  if (op == ReduceOp::kProduct) {
    const int64_t k = (j + r + salt) % 3;
    return k == 0 ? 2 : (k == 1 ? -1 : 1);
  }
  return static_cast<double>(((j + salt) % 7 - 3) * (r + 1) + (j % 3) - 1 +
                             salt % 2);
}

// The global ranks of a process set (0: every rank).
std::vector<int> SetRanks(ProcessSet set) {
  if (set == kolo::kGlobalProcessSet) {
    std::vector<int> all;
    for (int r = 0; r < g_size; ++r) all.push_back(r);
    return all;
  }
  absl::StatusOr<std::vector<int>> ranks = kolo::process_set_ranks(set);
  return ranks.ok() ? *ranks : std::vector<int>{};
}

int IndexIn(const std::vector<int>& ranks, int rank) {
  auto it = std::find(ranks.begin(), ranks.end(), rank);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

// Expected reduction of `count` elements over `ranks` (the set's members
// that contribute), dividing an average by `divisor`.
Bytes ReducedValues(DataType t, ReduceOp op, int64_t count,
                    const std::vector<int>& ranks, int salt, int divisor) {
  std::vector<double> all(static_cast<size_t>(count));
  for (int64_t j = 0; j < count; ++j) {
    std::vector<double> xs;
    for (int r : ranks) xs.push_back(Value(op, r, j, salt));
    all[static_cast<size_t>(j)] = Reduce(t, op, xs, divisor);
  }
  return EncodeAll(t, all);
}

Bytes MyValues(DataType t, ReduceOp op, int64_t count, int salt) {
  std::vector<double> mine(static_cast<size_t>(count));
  for (int64_t j = 0; j < count; ++j) {
    mine[static_cast<size_t>(j)] = Value(op, g_rank, j, salt);
  }
  return EncodeAll(t, mine);
}

void Report(const std::string& name, const std::string& why) {
  if (why.empty()) {
    std::printf("GRP_OK case=%s rank=%d\n", name.c_str(), g_rank);
  } else {
    ++g_fails;
    std::printf("GRP_FAIL case=%s rank=%d %s\n", name.c_str(), g_rank,
                why.c_str());
  }
}

void ReportError(const std::string& name, const absl::Status& s, bool next) {
  if (!next) ++g_fails;
  std::printf("GRP_ERR case=%s rank=%d code=%d next=%d\n", name.c_str(), g_rank,
              static_cast<int>(s.code()), next ? 1 : 0);
  std::printf("GRP_MSG case=%s rank=%d: %s\n", name.c_str(), g_rank,
              std::string(s.message()).c_str());
}

absl::Status Run(const absl::StatusOr<Handle>& h, OpResult* result) {
  if (!h.ok()) return h.status();
  return kolo::synchronize(*h, kWait, result);
}

// A good allreduce on `set` after an error (every member calls it): the job
// goes on.
bool GoodAfter(const std::string& name, ProcessSet set) {
  const std::vector<int> ranks = SetRanks(set);
  std::vector<int64_t> v = {g_rank + 1, 5};
  Tensor t{DataType::kInt64, {2}, v.data()};
  absl::Status s = Run(kolo::allreduce_async(t, t, {}, "good/" + name, set));
  int64_t sum = 0;
  for (int r : ranks) sum += r + 1;
  return s.ok() && v[0] == sum &&
         v[1] == 5 * static_cast<int64_t>(ranks.size());
}

}  // namespace groups_worker
