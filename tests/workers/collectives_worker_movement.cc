// kolo-collectives-worker (collectives_worker.h): the data cases of the
// collectives that move data, allgather ("ag/..."), broadcast ("bc/...")
// and alltoall ("a2a/..."): uneven and empty contributions, every root,
// explicit splits and the even split, large tensors.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/workers/collectives_worker.h"

namespace collectives_worker {
namespace {

// Allgather: rank r contributes rows(r) rows of `trailing`.
Case AllgatherCase(const std::string& tag, DataType t,
                   const std::function<int64_t(int)>& rows,
                   const std::vector<int64_t>& trailing) {
  Case c;
  c.name = absl::StrCat("ag/", Name(t), "/", tag);
  const int64_t row = Elements(trailing);
  std::vector<double> mine, all;
  std::vector<int64_t> splits;
  for (int r = 0; r < g_size; ++r) {
    splits.push_back(rows(r));
    for (int64_t k = 0; k < rows(r) * row; ++k) {
      const double v = 7 * r + (k % 23) - 5;
      all.push_back(v);
      if (r == g_rank) mine.push_back(v);
    }
  }
  std::vector<int64_t> shape = {rows(g_rank)}, want_shape = {0};
  shape.insert(shape.end(), trailing.begin(), trailing.end());
  for (int64_t s : splits) want_shape[0] += s;
  want_shape.insert(want_shape.end(), trailing.begin(), trailing.end());
  auto in = std::make_shared<Bytes>(EncodeAll(t, mine, &c.bad));
  auto original = std::make_shared<Bytes>(*in);
  auto want = std::make_shared<Bytes>(EncodeAll(t, all, &c.bad));
  auto out = std::make_shared<Bytes>();
  auto asked = std::make_shared<std::vector<int64_t>>();
  const std::string name = c.name;
  c.submit = [=] {
    return kolo::allgather_async(Tensor{t, shape, in->data()},
                                 AllocInto(out, t, asked), name);
  };
  c.check = [=](const OpResult& r) {
    std::string why = CompareShape("allocated shape", *asked, want_shape);
    if (why.empty()) why = CompareShape("OpResult.shape", r.shape, want_shape);
    if (why.empty()) why = CompareShape("OpResult.splits", r.splits, splits);
    if (why.empty())
      why = kolo::testing::CompareElements(t, "output", *out, *want);
    if (why.empty())
      why = kolo::testing::CompareElements(t, "input", *in, *original);
    return why;
  };
  return c;
}

// Broadcast of `shape` from `root`; the others start from sentinel bytes.
Case BroadcastCase(const std::string& tag, DataType t,
                   const std::vector<int64_t>& shape, int root) {
  Case c;
  c.name = absl::StrCat("bc/", Name(t), "/", tag);
  std::vector<double> values;
  for (int64_t j = 0; j < Elements(shape); ++j) {
    values.push_back(3 * root + (j % 50) - 20);
  }
  auto want = std::make_shared<Bytes>(EncodeAll(t, values, &c.bad));
  auto buf = std::make_shared<Bytes>(
      g_rank == root ? *want : Bytes(want->size(), kSentinel));
  const std::string name = c.name;
  c.submit = [=] {
    return kolo::broadcast_async(Tensor{t, shape, buf->data()}, root, name);
  };
  c.check = [=](const OpResult& r) {
    std::string why = CompareShape("OpResult.shape", r.shape, shape);
    if (why.empty())
      why = kolo::testing::CompareElements(t, "tensor", *buf, *want);
    return why;
  };
  return c;
}

// Alltoall: rank r sends rows(r, s) rows of `trailing` to rank s; with
// `explicit_splits` false, no splits are passed (rows must not depend on s).
Case AlltoallCase(const std::string& tag, DataType t,
                  const std::function<int64_t(int, int)>& rows,
                  const std::vector<int64_t>& trailing, bool explicit_splits) {
  Case c;
  c.name = absl::StrCat("a2a/", Name(t), "/", tag);
  const int64_t row = Elements(trailing);
  auto value = [](int from, int to, int64_t k) {
    return static_cast<double>(16 * from + 4 * to + k % 4);
  };
  std::vector<double> mine, got;
  std::vector<int64_t> splits, received;
  int64_t sent_rows = 0, received_rows = 0;
  for (int s = 0; s < g_size; ++s) {
    splits.push_back(rows(g_rank, s));
    sent_rows += rows(g_rank, s);
    for (int64_t k = 0; k < rows(g_rank, s) * row; ++k) {
      mine.push_back(value(g_rank, s, k));
    }
  }
  for (int s = 0; s < g_size; ++s) {
    received.push_back(rows(s, g_rank));
    received_rows += rows(s, g_rank);
    for (int64_t k = 0; k < rows(s, g_rank) * row; ++k) {
      got.push_back(value(s, g_rank, k));
    }
  }
  std::vector<int64_t> shape = {sent_rows}, want_shape = {received_rows};
  shape.insert(shape.end(), trailing.begin(), trailing.end());
  want_shape.insert(want_shape.end(), trailing.begin(), trailing.end());
  auto in = std::make_shared<Bytes>(EncodeAll(t, mine, &c.bad));
  auto original = std::make_shared<Bytes>(*in);
  auto want = std::make_shared<Bytes>(EncodeAll(t, got, &c.bad));
  auto out = std::make_shared<Bytes>();
  auto asked = std::make_shared<std::vector<int64_t>>();
  const std::string name = c.name;
  const std::vector<int64_t> passed =
      explicit_splits ? splits : std::vector<int64_t>{};
  c.submit = [=] {
    return kolo::alltoall_async(Tensor{t, shape, in->data()},
                                AllocInto(out, t, asked), passed, name);
  };
  c.check = [=](const OpResult& r) {
    std::string why = CompareShape("allocated shape", *asked, want_shape);
    if (why.empty()) why = CompareShape("OpResult.shape", r.shape, want_shape);
    if (why.empty()) why = CompareShape("OpResult.splits", r.splits, received);
    if (why.empty())
      why = kolo::testing::CompareElements(t, "output", *out, *want);
    if (why.empty())
      why = kolo::testing::CompareElements(t, "input", *in, *original);
    return why;
  };
  return c;
}

}  // namespace

std::vector<Case> AllgatherCases() {
  const int n = g_size;
  return {
      AllgatherCase("rows-r+1", DataType::kInt32, [](int r) { return r + 1; },
                    {3}),
      AllgatherCase("rank0-empty", DataType::kInt64, [](int r) { return r; },
                    {3}),
      AllgatherCase("odd-ranks-empty", DataType::kFloat32,
                    [](int r) { return r % 2 ? 0 : 2 * r + 1; }, {3}),
      AllgatherCase("1d", DataType::kFloat64, [](int r) { return r + 2; }, {}),
      AllgatherCase("3d", DataType::kFloat16,
                    [](int r) { return (2 * r) % 3 + 1; }, {2, 2}),
      AllgatherCase("rows-n-r", DataType::kBFloat16,
                    [n](int r) { return n - r; }, {3}),
      AllgatherCase("all-empty", DataType::kInt32, [](int) { return 0; }, {3}),
      AllgatherCase("large", DataType::kFloat32,
                    [](int r) { return 1000 * (r + 1) + r; }, {7}),
  };
}

std::vector<Case> BroadcastCases() {
  const int n = g_size;
  const DataType cycle[] = {DataType::kInt32, DataType::kFloat64,
                            DataType::kFloat16, DataType::kInt64,
                            DataType::kFloat32};
  std::vector<Case> cases;
  for (int root = 0; root < n; ++root) {
    cases.push_back(BroadcastCase(absl::StrCat("root", root), cycle[root % 5],
                                  {5, 7}, root));
  }
  cases.push_back(BroadcastCase("root-last", DataType::kBFloat16, {3}, n - 1));
  cases.push_back(BroadcastCase("large", DataType::kFloat32, {65539}, 1 % n));
  cases.push_back(BroadcastCase("empty", DataType::kInt64, {0}, 0));
  cases.push_back(BroadcastCase("scalar", DataType::kFloat64, {}, n - 1));
  return cases;
}

std::vector<Case> AlltoallCases() {
  return {
      AlltoallCase(
          "splits", DataType::kInt32,
          [](int r, int s) { return (r + 2 * s) % 3; }, {2}, true),
      AlltoallCase(
          "splits-1d", DataType::kFloat32,
          [](int r, int s) { return (r * s + 1) % 4; }, {}, true),
      AlltoallCase(
          "none-to-self", DataType::kFloat16,
          [](int r, int s) { return s == r ? 0 : r + 1; }, {3}, true),
      AlltoallCase(
          "one-sender", DataType::kInt64,
          [](int r, int s) { return r == 0 ? s + 1 : 0; }, {2}, true),
      AlltoallCase(
          "even", DataType::kFloat64, [](int, int) { return 2; }, {3}, false),
      AlltoallCase(
          "even-1d", DataType::kBFloat16, [](int, int) { return 1; }, {},
          false),
      AlltoallCase(
          "even-empty", DataType::kInt32, [](int, int) { return 0; }, {2},
          false),
      AlltoallCase(
          "large", DataType::kFloat32,
          [](int r, int s) { return 5000 + 7 * r + s; }, {4}, true),
  };
}

}  // namespace collectives_worker
