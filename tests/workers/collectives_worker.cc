// kolo-collectives-worker: every collective and option through the
// negotiated asynchronous API, with exact values, run under kolorun by
// tests/multiprocess_collectives_test.cc (issue 6 point 1), once per world
// size. Usage: kolo-collectives-worker DIR (DIR: an empty directory shared by
// the ranks, for the barrier's marker files).
//
// What runs, in this order:
//   1. The data cases (allreduce "ar/...", allgather "ag/...", broadcast
//      "bc/...", alltoall "a2a/...", reducescatter "rs/..."), twice: pass
//      "all" submits every case at once (in a different order on odd ranks,
//      so that they fuse and negotiate out of order) and then synchronizes
//      each; pass "one" submits and synchronizes them one at a time. Every
//      output is compared bit for bit with a value computed here, as are
//      OpResult.shape and OpResult.splits, and out-of-place inputs must be
//      left untouched.
//   2. Barriers: before each, every rank writes a marker file into DIR (the
//      last rank after a pause); after it, every rank must see all markers.
//   3. The error cases: each must fail on every rank with a code and message
//      the test checks, and a good allreduce right after it must work.
//
// Values are small integers (halves after a postscale of 0.5), so every
// partial result is exact whatever the reduction order, in every dtype. The
// expectation follows the documented arithmetic (allreduce/kernels.h):
// prescale each input (in double for integers and float64, truncating
// integers toward zero; in float otherwise), reduce, divide an average by
// the world size (truncating for integers, float for float32 / float16 /
// bfloat16, double for float64), then postscale the same way as prescale.
// The float16 / bfloat16 encodings come from tests/testing/elements.h (exact
// values only), not from the kernels.
//
// Prints, per rank:
//   COLL_OK case=C pass=P rank=R            a data case or barrier was right
//   COLL_FAIL case=C pass=P rank=R <why>    it was not (then exit code 4)
//   COLL_ERR case=C rank=R code=K next=0|1  an error case's status code, and
//                                           whether the good op after it
//                                           worked
//   COLL_MSG C: <message>                   that status's message
//   COLL_DONE rank=R size=N cases=D errors=E fails=F
// Every wait is bounded; nothing here can hang a test run.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "kolo/kolo.h"
#include "tests/testing/elements.h"

namespace {

using kolo::DataType;
using kolo::Handle;
using kolo::OpResult;
using kolo::ReduceOp;
using kolo::Tensor;

const absl::Duration kWait = absl::Seconds(30);

int g_rank = -1;
int g_size = 0;
int g_fails = 0;

// ---- Elements (tests/testing/elements.h) ------------------------------------

using kolo::testing::Bytes;
using kolo::testing::CompareShape;
using kolo::testing::DecodeElement;
using kolo::testing::Elements;
using kolo::testing::EncodeAll;
using kolo::testing::EncodeElement;

size_t Size(DataType t) { return kolo::DataTypeSize(t); }
std::string Name(DataType t) { return std::string(kolo::DataTypeName(t)); }

// ---- Values and expectations ------------------------------------------------

enum class Values {
  kMixed,    // a * (rank + 1) + c, a in -3..3, c in -1..2
  kProduct,  // -1, 1, 2 or 3 (and 0 on rank 0 now and then)
  kInexact,  // 0..9 on rank 0, 0 elsewhere: averages are not exact
};

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

struct Reduction {
  Reduction(DataType type, ReduceOp reduce = ReduceOp::kSum,
            double prescale = 1, double postscale = 1,
            Values kind = Values::kMixed)
      : t(type), op(reduce), pre(prescale), post(postscale), values(kind) {}
  DataType t;
  ReduceOp op;
  double pre, post;
  Values values;
};

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

std::string OpName(ReduceOp op) { return std::string(kolo::ReduceOpName(op)); }

std::string ScaleName(double pre, double post) {
  std::string s;
  if (pre != 1) absl::StrAppend(&s, "/pre", pre);
  if (post != 1) absl::StrAppend(&s, "/post", post);
  return s;
}

// ---- Data cases -------------------------------------------------------------

// One submitted collective: its buffers live in `state` (captured by the
// lambdas), `check` compares them after synchronize ("" when right).
struct Case {
  std::string name;
  std::function<absl::StatusOr<Handle>()> submit;
  std::function<std::string(const OpResult&)> check;
  std::string bad;  // a problem building the case (an inexact test value)
};

constexpr char kSentinel = 0x5a;

kolo::Allocator AllocInto(std::shared_ptr<Bytes> out, DataType t,
                          std::shared_ptr<std::vector<int64_t>> asked) {
  return [out, t,
          asked](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
    asked->assign(shape.begin(), shape.end());
    out->assign(static_cast<size_t>(Elements(*asked)) * Size(t), kSentinel);
    return out->data();
  };
}

struct ArSpec {
  ArSpec(Reduction reduction, bool in_place, std::vector<int64_t> dims = {37},
         std::string suffix = "")
      : red(reduction),
        inplace(in_place),
        shape(std::move(dims)),
        tag(std::move(suffix)) {}
  Reduction red;
  bool inplace;
  std::vector<int64_t> shape;
  std::string tag;  // appended to the name
};

Case AllreduceCase(const ArSpec& s) {
  Case c;
  c.name = absl::StrCat("ar/", Name(s.red.t), "/", OpName(s.red.op),
                        ScaleName(s.red.pre, s.red.post), "/",
                        s.inplace ? "inplace" : "copy", s.tag);
  auto in = std::make_shared<Bytes>(), want = std::make_shared<Bytes>();
  ReductionData(s.red, Elements(s.shape), in.get(), want.get(), &c.bad);
  auto original = std::make_shared<Bytes>(*in);
  auto out = std::make_shared<Bytes>(in->size(), kSentinel);
  const DataType t = s.red.t;
  const std::vector<int64_t> shape = s.shape;
  const bool inplace = s.inplace;
  kolo::AllreduceOptions o;
  o.op = s.red.op;
  o.prescale = s.red.pre;
  o.postscale = s.red.post;
  const std::string name = c.name;
  c.submit = [=] {
    void* dst = inplace ? in->data() : out->data();
    return kolo::allreduce_async(Tensor{t, shape, in->data()},
                                 Tensor{t, shape, dst}, o, name);
  };
  c.check = [=](const OpResult& r) {
    std::string why = CompareShape("OpResult.shape", r.shape, shape);
    if (why.empty())
      why = kolo::testing::CompareElements(t, "output", inplace ? *in : *out,
                                           *want);
    if (why.empty() && !inplace)
      why = kolo::testing::CompareElements(t, "input", *in, *original);
    return why;
  };
  return c;
}

std::vector<Case> AllreduceCases() {
  std::vector<ArSpec> specs;
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                          ReduceOp::kMax, ReduceOp::kProduct};
  auto values = [](ReduceOp op) {
    return op == ReduceOp::kProduct ? Values::kProduct : Values::kMixed;
  };
  for (DataType t : {DataType::kInt32, DataType::kInt64, DataType::kFloat32,
                     DataType::kFloat64}) {
    for (ReduceOp op : ops) {
      for (bool inplace : {true, false}) {
        specs.push_back({{t, op, 1, 1, values(op)}, inplace});
      }
    }
  }
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    for (ReduceOp op : ops) specs.push_back({{t, op, 1, 1, values(op)}, true});
    specs.push_back({{t, ReduceOp::kSum}, false});
  }
  // Scale factors: a prescale of -1 turns max into -min, so it must come
  // before the reduction; integers truncate toward zero after each scaling.
  specs.push_back({{DataType::kFloat32, ReduceOp::kSum, 2, 0.5}, false});
  specs.push_back({{DataType::kFloat64, ReduceOp::kSum, 2, 0.5}, true});
  specs.push_back({{DataType::kFloat32, ReduceOp::kAverage, 3, 0.25}, true});
  specs.push_back({{DataType::kFloat64, ReduceOp::kAverage, 3, 0.25}, false});
  specs.push_back({{DataType::kFloat32, ReduceOp::kMax, -1, 1}, false});
  specs.push_back({{DataType::kFloat64, ReduceOp::kMin, 1, -2}, true});
  specs.push_back({{DataType::kInt32, ReduceOp::kSum, 3, 0.5}, false});
  specs.push_back({{DataType::kInt64, ReduceOp::kAverage, 2, 0.5}, true});
  specs.push_back({{DataType::kFloat16, ReduceOp::kSum, 2, 0.5}, true});
  specs.push_back({{DataType::kBFloat16, ReduceOp::kAverage, 1, 2}, false});
  // Shapes and a float32 average that float division must round.
  specs.push_back(
      {{DataType::kFloat32, ReduceOp::kAverage, 1, 1, Values::kInexact},
       false,
       {37},
       "/inexact"});
  specs.push_back(
      {{DataType::kFloat32, ReduceOp::kSum}, false, {262147}, "/large"});
  specs.push_back(
      {{DataType::kFloat64, ReduceOp::kMin}, false, {3, 5, 2}, "/3d"});
  specs.push_back({{DataType::kInt64, ReduceOp::kSum}, true, {}, "/scalar"});
  specs.push_back({{DataType::kFloat32, ReduceOp::kSum}, false, {0}, "/empty"});
  std::vector<Case> cases;
  for (const ArSpec& s : specs) cases.push_back(AllreduceCase(s));
  return cases;
}

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

// Reducescatter of d0 rows of `trailing`; empty `counts`: the default split.
Case ReducescatterCase(const std::string& tag, const Reduction& red, int64_t d0,
                       const std::vector<int64_t>& trailing,
                       const std::vector<int64_t>& counts) {
  Case c;
  c.name = absl::StrCat("rs/", Name(red.t), "/", OpName(red.op),
                        ScaleName(red.pre, red.post), "/", tag);
  const int n = g_size;
  std::vector<int64_t> parts = counts;
  if (parts.empty()) {
    for (int r = 0; r < n; ++r) parts.push_back(d0 / n + (r < d0 % n ? 1 : 0));
  }
  int64_t first = 0;
  for (int r = 0; r < g_rank; ++r) first += parts[r];
  const int64_t row = Elements(trailing);
  std::vector<int64_t> shape = {d0}, out_shape = {parts[g_rank]};
  shape.insert(shape.end(), trailing.begin(), trailing.end());
  out_shape.insert(out_shape.end(), trailing.begin(), trailing.end());
  auto in = std::make_shared<Bytes>(), all = std::make_shared<Bytes>();
  ReductionData(red, d0 * row, in.get(), all.get(), &c.bad);
  const DataType t = red.t;
  const size_t e = Size(t);
  auto want =
      std::make_shared<Bytes>(all->begin() + first * row * e,
                              all->begin() + (first + parts[g_rank]) * row * e);
  auto original = std::make_shared<Bytes>(*in);
  auto out = std::make_shared<Bytes>(want->size(), kSentinel);
  kolo::AllreduceOptions o;
  o.op = red.op;
  o.prescale = red.pre;
  o.postscale = red.post;
  const std::string name = c.name;
  c.submit = [=] {
    return kolo::reducescatter_async(Tensor{t, shape, in->data()},
                                     Tensor{t, out_shape, out->data()}, o,
                                     counts, name);
  };
  c.check = [=](const OpResult& r) {
    std::string why = CompareShape("OpResult.shape", r.shape, out_shape);
    if (why.empty())
      why = kolo::testing::CompareElements(t, "output", *out, *want);
    if (why.empty())
      why = kolo::testing::CompareElements(t, "input", *in, *original);
    return why;
  };
  return c;
}

std::vector<Case> ReducescatterCases() {
  const int n = g_size;
  std::vector<int64_t> skip1, descending, twos;
  for (int r = 0; r < n; ++r) {
    skip1.push_back(r == 1 ? 0 : r + 1);
    descending.push_back(n - r);
    twos.push_back(2);
  }
  auto sum = [](const std::vector<int64_t>& v) {
    int64_t s = 0;
    for (int64_t x : v) s += x;
    return s;
  };
  const Reduction i64sum{DataType::kInt64, ReduceOp::kSum};
  const Reduction f32avg{DataType::kFloat32, ReduceOp::kAverage};
  const Reduction i32avg{DataType::kInt32, ReduceOp::kAverage};
  const Reduction f64sum{DataType::kFloat64, ReduceOp::kSum};
  const Reduction f32sum{DataType::kFloat32, ReduceOp::kSum};
  const Reduction i64avg{DataType::kInt64, ReduceOp::kAverage};
  const Reduction f64scaled{DataType::kFloat64, ReduceOp::kSum, 2, 0.5};
  const Reduction f16sum{DataType::kFloat16, ReduceOp::kSum};
  const Reduction bf16avg{DataType::kBFloat16, ReduceOp::kAverage};
  const Reduction i32min{DataType::kInt32, ReduceOp::kMin};
  const Reduction f32prod{DataType::kFloat32, ReduceOp::kProduct, 1, 1,
                          Values::kProduct};
  return {
      ReducescatterCase("default", i64sum, 2 * n + 1, {3}, {}),
      ReducescatterCase("default", f32avg, 3 * n - 1, {2}, {}),
      ReducescatterCase("default", i32avg, 2 * n + 1, {}, {}),
      ReducescatterCase("default-fewer-rows", f64sum, n - 1, {2}, {}),
      ReducescatterCase("counts", f32sum, sum(skip1), {3}, skip1),
      ReducescatterCase("counts", i64avg, sum(descending), {}, descending),
      ReducescatterCase("counts", f64scaled, 2 * n, {2}, twos),
      ReducescatterCase("default", f16sum, 2 * n + 1, {2}, {}),
      ReducescatterCase("default", bf16avg, n + 2, {2}, {}),
      ReducescatterCase("default", i32min, 2 * n + 1, {3}, {}),
      ReducescatterCase("counts", f32prod, sum(descending), {2}, descending),
      ReducescatterCase("large", f32sum, 40000 + n, {3}, {}),
  };
}

std::vector<Case> DataCases() {
  std::vector<Case> cases;
  for (auto make : {AllreduceCases, AllgatherCases, BroadcastCases,
                    AlltoallCases, ReducescatterCases}) {
    for (Case& c : make()) cases.push_back(std::move(c));
  }
  return cases;
}

void Report(const Case& c, const char* pass, const absl::Status& s,
            const OpResult& result) {
  std::string why = c.bad;
  if (why.empty() && !s.ok()) why = absl::StrCat("status ", s.ToString());
  if (why.empty()) why = c.check(result);
  if (why.empty()) {
    std::printf("COLL_OK case=%s pass=%s rank=%d\n", c.name.c_str(), pass,
                g_rank);
  } else {
    ++g_fails;
    std::printf("COLL_FAIL case=%s pass=%s rank=%d %s\n", c.name.c_str(), pass,
                g_rank, why.c_str());
  }
}

// Pass "all": everything in flight at once, odd ranks submitting in reverse.
int RunAllAtOnce() {
  std::vector<Case> cases = DataCases();
  std::vector<size_t> order(cases.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (g_rank % 2 == 1) std::reverse(order.begin(), order.end());
  std::vector<absl::StatusOr<Handle>> handles(cases.size(), Handle{0});
  for (size_t i : order) handles[i] = cases[i].submit();
  for (size_t i = 0; i < cases.size(); ++i) {
    OpResult result;
    absl::Status s = handles[i].status();
    if (s.ok()) s = kolo::synchronize(*handles[i], kWait, &result);
    Report(cases[i], "all", s, result);
  }
  return static_cast<int>(cases.size());
}

// Pass "one": one op in flight at a time (the names repeat pass "all").
void RunOneByOne() {
  for (Case& c : DataCases()) {
    OpResult result;
    absl::StatusOr<Handle> h = c.submit();
    absl::Status s = h.status();
    if (s.ok()) s = kolo::synchronize(*h, kWait, &result);
    Report(c, "one", s, result);
  }
}

// ---- Barrier ----------------------------------------------------------------

void Barriers(const std::string& dir) {
  for (int round = 0; round < 3; ++round) {
    const std::string name = absl::StrCat("barrier/", round);
    if (g_rank == g_size - 1) absl::SleepFor(absl::Milliseconds(150));
    const std::string mine =
        absl::StrCat(dir, "/round", round, ".rank", g_rank);
    if (FILE* f = std::fopen(mine.c_str(), "w")) std::fclose(f);
    std::string why;
    absl::StatusOr<Handle> h = kolo::barrier_async(name);
    absl::Status s = h.status();
    OpResult result;
    if (s.ok()) s = kolo::synchronize(*h, kWait, &result);
    if (!s.ok()) why = absl::StrCat("status ", s.ToString());
    for (int r = 0; r < g_size && why.empty(); ++r) {
      const std::string theirs = absl::StrCat(dir, "/round", round, ".rank", r);
      if (access(theirs.c_str(), F_OK) != 0) {
        why = absl::StrCat("rank ", r, "'s marker ", theirs,
                           " is missing after the barrier");
      }
    }
    if (why.empty()) {
      std::printf("COLL_OK case=%s pass=one rank=%d\n", name.c_str(), g_rank);
    } else {
      ++g_fails;
      std::printf("COLL_FAIL case=%s pass=one rank=%d %s\n", name.c_str(),
                  g_rank, why.c_str());
    }
  }
}

// ---- Error cases ------------------------------------------------------------

absl::Status Run(const absl::StatusOr<Handle>& h) {
  if (!h.ok()) return h.status();
  return kolo::synchronize(*h, kWait);
}

// A good allreduce after an error: the job goes on.
bool GoodAfter(const std::string& name) {
  std::vector<int64_t> v = {g_rank + 1, 5};
  Tensor t{DataType::kInt64, {2}, v.data()};
  absl::Status s = Run(kolo::allreduce_async(t, t, {}, "good/" + name));
  const int64_t n = g_size;
  return s.ok() && v[0] == n * (n + 1) / 2 && v[1] == 5 * n;
}

struct ErrorCase {
  std::string name;
  std::function<absl::Status(const std::string&)> run;
};

std::vector<ErrorCase> ErrorCases() {
  const int n = g_size, rank = g_rank;
  const bool last = rank == n - 1;  // the rank that disagrees
  // Buffers large enough for every case below.
  auto f = std::make_shared<std::vector<float>>(64, 1.0f);
  auto fo = std::make_shared<std::vector<float>>(64, 0.0f);
  auto d = std::make_shared<std::vector<double>>(64, 1.0);
  auto i32 = std::make_shared<std::vector<int32_t>>(64, 1);
  auto b = std::make_shared<std::vector<uint8_t>>(64, 1);
  auto scratch = std::make_shared<std::vector<char>>();
  auto alloc =
      [scratch](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
    int64_t elements = 1;
    for (int64_t dim : shape) elements *= dim;
    scratch->assign(static_cast<size_t>(elements * 8), 0);
    return scratch->data();
  };
  auto ft = [f](std::vector<int64_t> shape) {
    return Tensor{DataType::kFloat32, std::move(shape), f->data()};
  };
  auto fout = [fo](std::vector<int64_t> shape) {
    return Tensor{DataType::kFloat32, std::move(shape), fo->data()};
  };
  std::vector<int64_t> ones(n, 1), wrong_recv(n, 1);
  wrong_recv[0] = 2;  // n + 1 elements in all
  std::vector<int64_t> moved(n, 1);
  if (n >= 2) {  // same total, another distribution
    moved[0] = 2;
    moved[1] = 0;
  }
  const int64_t d0 = 2 * n + 1;
  auto rows_of = [n](int64_t rows, int r) {
    return rows / n + (r < rows % n ? 1 : 0);
  };
  return {
      // Allgather of a scalar, on every rank and on the last rank only.
      {"ag/scalar-all",
       [=](const std::string& nm) {
         return Run(kolo::allgather_async(ft({}), alloc, nm));
       }},
      {"ag/scalar-last",
       [=](const std::string& nm) {
         return Run(kolo::allgather_async(
             ft(last ? std::vector<int64_t>{} : std::vector<int64_t>{2, 3}),
             alloc, nm));
       }},
      {"ag/dtype",
       [=](const std::string& nm) {
         Tensor t =
             last ? Tensor{DataType::kFloat64, {2, 3}, d->data()} : ft({2, 3});
         return Run(kolo::allgather_async(t, alloc, nm));
       }},
      // Alltoall without splits of n + 1 rows; bad splits.
      {"a2a/indivisible",
       [=](const std::string& nm) {
         return Run(kolo::alltoall_async(ft({n + 1, 2}), alloc, {}, nm));
       }},
      {"a2a/indivisible-last",
       [=](const std::string& nm) {
         return Run(
             kolo::alltoall_async(ft({last ? n + 1 : n, 2}), alloc, {}, nm));
       }},
      {"a2a/splits-entries",
       [=](const std::string& nm) {
         std::vector<int64_t> splits(last ? n - 1 : n, 1);
         return Run(kolo::alltoall_async(
             ft({static_cast<int64_t>(splits.size()), 2}), alloc, splits, nm));
       }},
      // The blocking alltoall, whose recv_splits the peers' send_splits
      // contradict on the last rank: more rows in all, or the same number
      // from other ranks.
      {"a2a/recv-splits-total",
       [=](const std::string&) {
         return kolo::alltoall(f->data(), DataType::kFloat32, ones, fo->data(),
                               last ? wrong_recv : ones);
       }},
      {"a2a/recv-splits-moved",
       [=](const std::string&) {
         return kolo::alltoall(f->data(), DataType::kFloat32, ones, fo->data(),
                               last ? moved : ones);
       }},
      // The blocking allgather, whose counts on the last rank say that rank
      // 0 sends two elements; it sends one.
      {"ag/counts-peer",
       [=](const std::string&) {
         return kolo::allgather(f->data(), 1, DataType::kFloat32,
                                last ? wrong_recv : ones, fo->data());
       }},
      // Broadcast: a different root on every rank, a root out of range.
      {"bc/roots-differ",
       [=](const std::string& nm) {
         return Run(kolo::broadcast_async(ft({6}), rank, nm));
       }},
      {"bc/root-out-of-range",
       [=](const std::string& nm) {
         return Run(kolo::broadcast_async(ft({6}), n, nm));
       }},
      {"bc/root-negative-last",
       [=](const std::string& nm) {
         return Run(kolo::broadcast_async(ft({6}), last ? -1 : 0, nm));
       }},
      {"bc/shape",
       [=](const std::string& nm) {
         return Run(kolo::broadcast_async(ft({last ? 7 : 6}), 0, nm));
       }},
      // Reducescatter: shapes differ (row length, then rows), a wrong output
      // shape, counts that do not add up, average of bools.
      {"rs/shape",
       [=](const std::string& nm) {
         const int64_t cols = last ? 2 : 3;
         return Run(kolo::reducescatter_async(
             ft({d0, cols}), fout({rows_of(d0, rank), cols}), {}, {}, nm));
       }},
      {"rs/shape-rows",
       [=](const std::string& nm) {
         const int64_t rows = last ? d0 - 1 : d0;
         return Run(kolo::reducescatter_async(
             ft({rows, 3}), fout({rows_of(rows, rank), 3}), {}, {}, nm));
       }},
      {"rs/output-shape",
       [=](const std::string& nm) {
         const int64_t mine = rows_of(d0, rank) + (last ? 1 : 0);
         return Run(kolo::reducescatter_async(ft({d0, 3}), fout({mine, 3}), {},
                                              {}, nm));
       }},
      {"rs/counts-sum",
       [=](const std::string& nm) {
         return Run(
             kolo::reducescatter_async(ft({n + 1}), fout({1}), {}, ones, nm));
       }},
      {"rs/average-bool",
       [=](const std::string& nm) {
         kolo::AllreduceOptions o;
         o.op = ReduceOp::kAverage;
         return Run(kolo::reducescatter_async(
             Tensor{DataType::kBool, {n}, b->data()},
             Tensor{DataType::kBool, {1}, b->data() + 32}, o, {}, nm));
       }},
      // Allreduce: a wrong output shape, a prescale that is not finite.
      {"ar/output-shape",
       [=](const std::string& nm) {
         return Run(
             kolo::allreduce_async(ft({6}), fout({last ? 5 : 6}), {}, nm));
       }},
      {"ar/prescale-nan",
       [=](const std::string& nm) {
         kolo::AllreduceOptions o;
         o.prescale = NAN;
         return Run(kolo::allreduce_async(ft({6}), fout({6}), o, nm));
       }},
  };
}

int RunErrorCases() {
  std::vector<ErrorCase> cases = ErrorCases();
  for (ErrorCase& c : cases) {
    absl::Status s = c.run(c.name);
    const bool next = GoodAfter(c.name);
    if (!next) ++g_fails;
    std::printf("COLL_ERR case=%s rank=%d code=%d next=%d\n", c.name.c_str(),
                g_rank, static_cast<int>(s.code()), next ? 1 : 0);
    std::printf("COLL_MSG %s: %s\n", c.name.c_str(),
                std::string(s.message()).c_str());
  }
  return static_cast<int>(cases.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kolo-collectives-worker DIR\n");
    return 2;
  }
  if (absl::Status s = kolo::init(); !s.ok()) {
    std::printf("COLL_FAIL case=init pass=one rank=-1 %s\n",
                s.ToString().c_str());
    return 4;
  }
  g_rank = kolo::rank();
  g_size = kolo::size();
  const int data = RunAllAtOnce();
  RunOneByOne();
  Barriers(argv[1]);
  const int errors = RunErrorCases();
  std::printf("COLL_DONE rank=%d size=%d cases=%d errors=%d fails=%d\n", g_rank,
              g_size, data, errors, g_fails);
  std::fflush(stdout);
  if (absl::Status s = kolo::shutdown(); !s.ok()) {
    std::printf("COLL_FAIL case=shutdown pass=one rank=%d %s\n", g_rank,
                s.ToString().c_str());
    return 4;
  }
  return g_fails == 0 ? 0 : 4;
}
