// kolo-groups-worker (groups_worker.h), step 3: join ("join/..."), twice,
// with uneven batches: while a rank has joined, the others' collectives other
// than allreduce and barrier fail naming it, and their allreduces (single,
// grouped, on process sets) get the identity from it; join() returns the
// rank that joined last.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tests/workers/groups_worker.h"

namespace groups_worker {
namespace {

// Batch b of a join cycle: int64 and float64 allreduces with every op, over
// the ranks in `training` (the others joined: the identity), the average
// dividing by the world size.
void JoinBatch(int cycle, int b, const std::vector<int>& training) {
  std::vector<Case> cases;
  for (DataType t : {DataType::kInt64, DataType::kFloat64}) {
    for (ReduceOp op : kOps) {
      const std::string name =
          absl::StrCat("join/c", cycle, "/", Name(t), "/", OpName(op), "/b", b);
      const int salt = 7 * b + cycle;
      const std::vector<int64_t> shape = {6};
      auto in = std::make_shared<Bytes>(MyValues(t, op, 6, salt));
      auto want = std::make_shared<Bytes>(
          ReducedValues(t, op, 6, training, salt, g_size));
      kolo::AllreduceOptions o;
      o.op = op;
      Case c;
      c.report = name;
      c.submit = [=] {
        return kolo::allreduce_async(Tensor{t, shape, in->data()},
                                     Tensor{t, shape, in->data()}, o, name);
      };
      c.check = [=](const OpResult&) {
        return kolo::testing::CompareElements(t, "output", *in, *want);
      };
      cases.push_back(std::move(c));
    }
  }
  std::vector<size_t> order = Identity(cases.size());
  if (g_rank % 2 == 1) std::reverse(order.begin(), order.end());
  RunCases(cases, order);
}

// What the ranks still training run while `joined` has joined: the other
// collectives fail naming it, a barrier completes, allreduces on the
// process sets get the identity from it.
void WhileJoined(int cycle, int joined, const std::vector<ProcessSet>& sets) {
  const std::string p = absl::StrCat("join/c", cycle, "/");
  const int n = g_size;
  std::vector<float> f(2 * n, 1.0f), fo(2 * n, 0.0f);
  auto scratch = std::make_shared<Bytes>();
  const Tensor rows{DataType::kFloat32, {n, 2}, f.data()};
  std::vector<int64_t> ones(static_cast<size_t>(n), 1);
  {
    absl::Status s = Run(kolo::allgather_async(
        rows, AllocInto(scratch, DataType::kFloat32), p + "allgather"));
    ReportError(p + "allgather", s, true);
  }
  {
    absl::Status s = Run(
        kolo::broadcast_async(rows, joined == 0 ? n - 1 : 0, p + "broadcast"));
    ReportError(p + "broadcast", s, true);
  }
  {
    absl::Status s = Run(kolo::alltoall_async(
        rows, AllocInto(scratch, DataType::kFloat32), ones, p + "alltoall"));
    ReportError(p + "alltoall", s, true);
  }
  {
    absl::Status s = Run(kolo::reducescatter_async(
        rows, Tensor{DataType::kFloat32, {1, 2}, fo.data()}, {}, ones,
        p + "reducescatter"));
    ReportError(p + "reducescatter", s, true);
  }
  {
    absl::Status s = Run(kolo::barrier_async(p + "barrier"));
    Report(p + "barrier", s.ok() ? "" : s.ToString());
  }
  // A grouped allreduce on the global set: the identity too.
  {
    std::vector<int> training;
    for (int r = 0; r < n; ++r) {
      if (r != joined) training.push_back(r);
    }
    std::vector<Case> grouped;
    for (ReduceOp op : kOps) {
      const std::string name = absl::StrCat(p, "grouped/", OpName(op));
      grouped.push_back(GroupedAllreduce(
          name, name, op,
          {{DataType::kInt64, {3}}, {DataType::kFloat64, {2, 2}}}, 200 + cycle,
          kolo::kGlobalProcessSet, training));
    }
    std::vector<size_t> order = Identity(grouped.size());
    if (g_rank % 2 == 1) std::reverse(order.begin(), order.end());
    RunCases(grouped, order);
  }
  // Allreduces on the sets this rank is in (a joined member: the identity).
  std::vector<Case> cases;
  for (ProcessSet s : sets) {
    std::vector<int> ranks = SetRanks(s);
    if (IndexIn(ranks, g_rank) < 0) continue;
    std::vector<int> training;
    for (int r : ranks) {
      if (r != joined) training.push_back(r);
    }
    const auto divisor = static_cast<int>(ranks.size());
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                        ReduceOp::kProduct}) {
      for (DataType t : {DataType::kInt64, DataType::kFloat64}) {
        const std::string name =
            absl::StrCat(p, "set/", Name(t), "/", OpName(op));
        const std::string report =
            absl::StrCat(p, "set", s, "/", Name(t), "/", OpName(op));
        const int salt = 100 + s;
        auto in = std::make_shared<Bytes>(MyValues(t, op, 5, salt));
        auto want = std::make_shared<Bytes>(
            ReducedValues(t, op, 5, training, salt, divisor));
        kolo::AllreduceOptions o;
        o.op = op;
        Case c;
        c.report = report;
        c.submit = [=] {
          return kolo::allreduce_async(Tensor{t, {5}, in->data()},
                                       Tensor{t, {5}, in->data()}, o, name, s);
        };
        c.check = [=](const OpResult&) {
          return kolo::testing::CompareElements(t, "output", *in, *want);
        };
        cases.push_back(std::move(c));
      }
    }
  }
  std::vector<size_t> order = Identity(cases.size());
  if (g_rank % 2 == 0) std::reverse(order.begin(), order.end());
  RunCases(cases, order);
}

}  // namespace

void Join(const std::vector<ProcessSet>& sets) {
  const int n = g_size;
  for (int cycle = 0; cycle < 2; ++cycle) {
    // Cycle 0: rank r has r + 1 batches; cycle 1: n - r. The rank with one
    // batch joins first; the one with n joins last.
    auto batches = [&](int r) { return cycle == 0 ? r + 1 : n - r; };
    const int first = cycle == 0 ? 0 : n - 1;
    const int last = cycle == 0 ? n - 1 : 0;
    for (int b = 0; b < batches(g_rank); ++b) {
      std::vector<int> training;
      for (int r = 0; r < n; ++r) {
        if (batches(r) > b) training.push_back(r);
      }
      JoinBatch(cycle, b, training);
      if (b == 0 && g_rank != first) WhileJoined(cycle, first, sets);
    }
    absl::StatusOr<int> joined = kolo::join(kWait);
    std::printf("GRP_JOIN rank=%d cycle=%d last=%d\n", g_rank, cycle,
                joined.ok() ? *joined : -1);
    const std::string p = absl::StrCat("join/c", cycle, "/");
    Report(p + "join",
           !joined.ok() ? joined.status().ToString()
           : *joined != last
               ? absl::StrCat("join() returned ", *joined, ", want ", last)
               : "");
    // Every rank trains again: a normal allreduce.
    std::vector<Case> after = {Allreduce(p + "after", p + "after",
                                         ReduceOp::kSum,
                                         {DataType::kInt64, {5}}, cycle)};
    RunCases(after, {0});
  }
}

}  // namespace groups_worker
