// kolo-groups-worker (groups_worker.h), step 1: grouped ops ("grp/..."):
// grouped allreduces, allgathers and reducescatters with single allreduces,
// all in flight at once in a rank-dependent order; unnamed grouped ops; and
// the errors of a malformed group and of a member whose dtype differs.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/workers/groups_worker.h"

namespace groups_worker {

void Grouped() {
  const int n = g_size;
  std::vector<Case> cases;
  int salt = 0;
  for (ReduceOp op : kOps) {
    const std::string name = "grp/ar/" + OpName(op);
    cases.push_back(GroupedAllreduce(name, name, op,
                                     {{DataType::kInt32, {5}},
                                      {DataType::kFloat64, {2, 3}},
                                      {DataType::kFloat32, {}},
                                      {DataType::kInt64, {3, 1, 2}},
                                      {DataType::kFloat32, {7}}},
                                     salt++));
    const std::string single = "grp/single/" + OpName(op);
    cases.push_back(
        Allreduce(single, single, op, {DataType::kFloat32, {7}}, salt++));
  }
  cases.push_back(Allgather(
      "grp/ag", "grp/ag",
      {{DataType::kInt32, {2}},
       {DataType::kFloat64, {3}},
       {DataType::kInt64, {}},
       {DataType::kFloat32, {2, 2}}},
      [n](int r, size_t i) -> int64_t {
        switch (i) {
          case 0:
            return r + 1;
          case 1:
            return (r % 2) * 2;  // none on even ranks
          case 2:
            return n - r;
          default:
            return r == 0 ? 3 : 1;
        }
      },
      /*grouped=*/true));
  cases.push_back(GroupedReducescatter("grp/rs/sum", "grp/rs/sum",
                                       ReduceOp::kSum,
                                       {{DataType::kFloat32, {2 * n + 1, 2}},
                                        {DataType::kInt64, {n + 2}},
                                        {DataType::kInt32, {n - 1, 3}}},
                                       salt++));
  cases.push_back(GroupedReducescatter(
      "grp/rs/average", "grp/rs/average", ReduceOp::kAverage,
      {{DataType::kFloat64, {3 * n - 1}}, {DataType::kInt32, {n, 2}}}, salt++));
  cases.push_back(
      GroupedReducescatter("grp/rs/max", "grp/rs/max", ReduceOp::kMax,
                           {{DataType::kInt64, {n + 1, 2}}}, salt++));
  // Odd ranks submit everything in reverse.
  std::vector<size_t> order = Identity(cases.size());
  if (g_rank % 2 == 1) std::reverse(order.begin(), order.end());
  RunCases(cases, order);

  // Unnamed grouped ops (and an unnamed single op between them), in the same
  // order on every rank.
  std::vector<Case> unnamed;
  unnamed.push_back(GroupedAllreduce(
      "grp/unnamed/ar", "", ReduceOp::kSum,
      {{DataType::kInt32, {4}}, {DataType::kFloat64, {3}}}, salt++));
  unnamed.push_back(Allreduce("grp/unnamed/single", "", ReduceOp::kMax,
                              {DataType::kInt64, {3}}, salt++));
  unnamed.push_back(Allgather(
      "grp/unnamed/ag", "", {{DataType::kInt64, {2}}, {DataType::kInt32, {}}},
      [](int r, size_t i) -> int64_t { return i == 0 ? r + 1 : 2; }, true));
  unnamed.push_back(GroupedAllreduce("grp/unnamed/ar2", "", ReduceOp::kAverage,
                                     {{DataType::kFloat64, {5}}}, salt++));
  RunCases(unnamed, Identity(unnamed.size()));

  // Local errors: inputs and outputs of different lengths, no members.
  std::vector<int32_t> a(4, 1), b(4, 2);
  const Tensor ta{DataType::kInt32, {4}, a.data()};
  const Tensor tb{DataType::kInt32, {4}, b.data()};
  {
    std::vector<Tensor> in = {ta, tb}, out = {ta};
    absl::StatusOr<Handle> h =
        kolo::grouped_allreduce_async(in, out, {}, "grp/err/count/ar");
    ReportError("grp/err/count/ar", h.status(), GoodAfter("grp/err/count/ar"));
  }
  {
    std::vector<Tensor> in = {ta};
    std::vector<kolo::Allocator> out;
    absl::StatusOr<Handle> h =
        kolo::grouped_allgather_async(in, out, "grp/err/count/ag");
    ReportError("grp/err/count/ag", h.status(), GoodAfter("grp/err/count/ag"));
  }
  {
    std::vector<Tensor> in = {ta}, out = {ta, tb};
    absl::StatusOr<Handle> h =
        kolo::grouped_reducescatter_async(in, out, {}, "grp/err/count/rs");
    ReportError("grp/err/count/rs", h.status(), GoodAfter("grp/err/count/rs"));
  }
  {
    absl::StatusOr<Handle> h =
        kolo::grouped_allreduce_async({}, {}, {}, "grp/err/empty/ar");
    ReportError("grp/err/empty/ar", h.status(), GoodAfter("grp/err/empty/ar"));
  }
  {
    absl::StatusOr<Handle> h =
        kolo::grouped_allgather_async({}, {}, "grp/err/empty/ag");
    ReportError("grp/err/empty/ag", h.status(), GoodAfter("grp/err/empty/ag"));
  }
  {
    absl::StatusOr<Handle> h = kolo::grouped_allreduce_async({}, {});
    ReportError("grp/err/empty/unnamed", h.status(),
                GoodAfter("grp/err/empty/unnamed"));
  }
  // A member whose dtype differs on the last rank: every rank gets the
  // mismatch of member 1 as the group's status.
  {
    std::vector<double> d(4, 1.0), dout(4, 0.0);
    std::vector<float> f(4, 1.0f), fout(4, 0.0f);
    std::vector<int32_t> iout(4, 0);
    const bool last = g_rank == g_size - 1;
    const Tensor m1in = last ? Tensor{DataType::kFloat32, {4}, f.data()}
                             : Tensor{DataType::kFloat64, {4}, d.data()};
    const Tensor m1out = last ? Tensor{DataType::kFloat32, {4}, fout.data()}
                              : Tensor{DataType::kFloat64, {4}, dout.data()};
    std::vector<Tensor> in = {ta, m1in},
                        out = {Tensor{DataType::kInt32, {4}, iout.data()},
                               m1out};
    absl::Status s =
        Run(kolo::grouped_allreduce_async(in, out, {}, "grp/err/member-dtype"));
    ReportError("grp/err/member-dtype", s, GoodAfter("grp/err/member-dtype"));
  }
  // The same name as a group again, now agreed: it works.
  cases.clear();
  cases.push_back(GroupedAllreduce(
      "grp/err/member-dtype/again", "grp/err/member-dtype", ReduceOp::kSum,
      {{DataType::kInt32, {4}}, {DataType::kFloat64, {4}}}, salt++));
  RunCases(cases, Identity(1));
}

}  // namespace groups_worker
