// kolo-collectives-worker (collectives_worker.h): the data cases of the
// reductions, allreduce ("ar/...") and reducescatter ("rs/..."): every
// dtype and reduce op, scale factors, in place and not, shapes, and for
// reducescatter the default split and explicit counts.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/workers/collectives_worker.h"

namespace collectives_worker {
namespace {

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

}  // namespace

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

}  // namespace collectives_worker
