// kolo-groups-worker (groups_worker.h), step 2: process sets ("ps/...",
// "ps2/..." with two ranks): overlapping sets added and removed, every
// collective on each set at once, the errors of sets used or changed wrongly;
// and with --static-sets ("static/..."), the sets init() was given.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/workers/groups_worker.h"

namespace groups_worker {
namespace {

std::string Ids(const std::vector<ProcessSet>& ids) {
  return absl::StrJoin(ids, ",");
}

// Every collective on every set this rank belongs to and on the global set,
// with the same names in every set.
void SetCollectives(const std::vector<ProcessSet>& sets) {
  std::vector<Case> cases;
  for (ProcessSet s : sets) {
    const std::vector<int> ranks = SetRanks(s);
    if (IndexIn(ranks, g_rank) < 0) continue;
    const std::string p = absl::StrCat("ps/set", s, "/");
    cases.push_back(Allreduce(p + "x", "ps/x", ReduceOp::kSum,
                              {DataType::kInt64, {6}}, s, s));
    cases.push_back(Allreduce(p + "avg", "ps/avg", ReduceOp::kAverage,
                              {DataType::kFloat64, {4}}, 10 + s, s));
    cases.push_back(Allreduce(p + "avg-int", "ps/avg-int", ReduceOp::kAverage,
                              {DataType::kInt32, {7}}, 20 + s, s));
    cases.push_back(Allgather(
        p + "ag", "ps/ag", {{DataType::kInt32, {2}}},
        [](int r, size_t) -> int64_t { return r + 1; }, false, s));
    cases.push_back(Broadcast(p + "bc", "ps/bc", ranks.back(), 30 + s, s));
    cases.push_back(Alltoall(p + "a2a", "ps/a2a", s));
    cases.push_back(Reducescatter(p + "rs", "ps/rs", 40 + s, s));
    cases.push_back(GroupedAllreduce(
        p + "grp", "ps/grp", ReduceOp::kMin,
        {{DataType::kInt32, {3}}, {DataType::kFloat64, {2, 2}}}, 50 + s, s));
    cases.push_back(Allgather(
        p + "grp-ag", "ps/grp-ag",
        {{DataType::kInt64, {}}, {DataType::kFloat32, {3}}},
        [](int r, size_t i) -> int64_t { return (r + i) % 3; }, true, s));
    cases.push_back(GroupedReducescatter(
        p + "grp-rs", "ps/grp-rs", ReduceOp::kSum,
        {{DataType::kInt64, {5, 2}}, {DataType::kFloat32, {3}}}, 60 + s, s));
    cases.push_back(Barrier(p + "barrier", "ps/barrier", s));
  }
  // A rank-dependent order: rotated by rank, reversed on odd ranks.
  std::vector<size_t> order = Identity(cases.size());
  if (!order.empty()) {
    std::rotate(order.begin(),
                order.begin() + (3 * g_rank) % static_cast<int>(order.size()),
                order.end());
  }
  if (g_rank % 2 == 1) std::reverse(order.begin(), order.end());
  RunCases(cases, order);

  // Unnamed ops: the same order within each set on every rank, the sets
  // visited in a rank-dependent order (names count per set).
  std::vector<Case> unnamed;
  std::vector<ProcessSet> visit = sets;
  std::rotate(visit.begin(), visit.begin() + g_rank % visit.size(),
              visit.end());
  if (g_rank % 2 == 1) std::reverse(visit.begin(), visit.end());
  for (ProcessSet s : visit) {
    if (IndexIn(SetRanks(s), g_rank) < 0) continue;
    const std::string p = absl::StrCat("ps/set", s, "/unnamed/");
    unnamed.push_back(Allreduce(p + "single", "", ReduceOp::kSum,
                                {DataType::kInt32, {3}}, 70 + s, s));
    unnamed.push_back(GroupedAllreduce(
        p + "grp", "", ReduceOp::kMax,
        {{DataType::kInt64, {2}}, {DataType::kFloat32, {3}}}, 80 + s, s));
    unnamed.push_back(Allreduce(p + "single2", "", ReduceOp::kProduct,
                                {DataType::kFloat64, {4}}, 90 + s, s));
  }
  RunCases(unnamed, Identity(unnamed.size()));
}

// An add / remove that must fail on every rank.
void SetOpError(const std::string& name, const absl::Status& s) {
  ReportError(name, s, GoodAfter(name));
}

}  // namespace

void ProcessSets() {
  const int n = g_size;
  if (n < 3) {
    // Two ranks: every rank is the global set; a one-rank set works.
    absl::StatusOr<ProcessSet> global = kolo::add_process_set({1, 0});
    SetOpError("ps2/err/global", global.status());
    absl::StatusOr<ProcessSet> one = kolo::add_process_set({1});
    Report("ps2/add-one", !one.ok()   ? one.status().ToString()
                          : *one != 1 ? absl::StrCat("id ", *one, ", want 1")
                                      : "");
    if (one.ok() && g_rank == 1) {
      std::vector<Case> cases = {Allreduce("ps2/set1/x", "ps/x", ReduceOp::kSum,
                                           {DataType::kInt64, {6}}, 1, *one)};
      RunCases(cases, {0});
    }
    if (one.ok()) {
      absl::Status removed = kolo::remove_process_set(*one);
      Report("ps2/remove", removed.ok() ? "" : removed.ToString());
    }
    return;
  }
  // Ranks that differ between ranks: an error everywhere, no id used.
  {
    const std::vector<int> ranks =
        g_rank == 0 ? std::vector<int>{0, 1} : std::vector<int>{0, 2};
    SetOpError("ps/err/add-differ", kolo::add_process_set(ranks).status());
  }
  // Three overlapping sets.
  std::vector<ProcessSet> ids;
  std::string why;
  for (const std::vector<int>& ranks :
       {std::vector<int>{0, 1}, std::vector<int>{2, 1},
        std::vector<int>{0, 2}}) {
    absl::StatusOr<ProcessSet> id = kolo::add_process_set(ranks);
    if (!id.ok()) {
      why = absl::StrCat("add_process_set(", absl::StrJoin(ranks, ","),
                         "): ", id.status().ToString());
      ids.push_back(-1);
    } else {
      ids.push_back(*id);
    }
  }
  std::printf("GRP_IDS rank=%d ids=%s\n", g_rank, Ids(ids).c_str());
  if (why.empty() && ids != std::vector<ProcessSet>{1, 2, 3}) {
    why = absl::StrCat("ids ", Ids(ids), ", want 1,2,3");
  }
  Report("ps/ids", why);
  if (!why.empty()) return;
  {
    std::string w;
    const std::vector<std::vector<int>> want = {{0, 1}, {1, 2}, {0, 2}};
    for (int i = 0; i < 3 && w.empty(); ++i) {
      absl::StatusOr<std::vector<int>> r = kolo::process_set_ranks(ids[i]);
      if (!r.ok()) {
        w = r.status().ToString();
      } else if (*r != want[i]) {
        w = absl::StrCat("process_set_ranks(", ids[i],
                         ") = ", absl::StrJoin(*r, ","), ", want ",
                         absl::StrJoin(want[i], ","));
      }
    }
    absl::StatusOr<std::vector<int>> all = kolo::process_set_ranks(0);
    if (w.empty() && (!all.ok() || all->size() != static_cast<size_t>(n))) {
      w = "process_set_ranks(0) is not every rank";
    }
    if (w.empty() &&
        kolo::process_sets() != std::vector<ProcessSet>{0, 1, 2, 3}) {
      w = absl::StrCat("process_sets() = ", Ids(kolo::process_sets()),
                       ", want 0,1,2,3");
    }
    Report("ps/ranks", w);
  }

  // Everything at once on every set.
  SetCollectives({0, 1, 2, 3});

  // Local errors: a set this rank is not in, an unknown set.
  {
    const ProcessSet other = g_rank == 0 ? 2 : (g_rank == 1 ? 3 : 1);
    std::vector<int64_t> v(2, 1);
    Tensor t{DataType::kInt64, {2}, v.data()};
    SetOpError(
        "ps/err/not-member",
        kolo::allreduce_async(t, t, {}, "ps/not-member", other).status());
    SetOpError("ps/err/not-member-grouped",
               kolo::grouped_allreduce_async({t}, {t}, {}, "ps/nm-grp", other)
                   .status());
    SetOpError("ps/err/unknown",
               kolo::allreduce_async(t, t, {}, "ps/unknown", 99).status());
    SetOpError("ps/err/unknown-grouped",
               kolo::grouped_allreduce_async({t}, {t}, {}, "ps/unknown-grp", 99)
                   .status());
    SetOpError("ps/err/unknown-ranks", kolo::process_set_ranks(99).status());
  }
  // Negotiated errors.
  SetOpError("ps/err/duplicate", kolo::add_process_set({1, 0}).status());
  {
    std::vector<int> all;
    for (int r = n - 1; r >= 0; --r) all.push_back(r);
    SetOpError("ps/err/global", kolo::add_process_set(all).status());
  }
  SetOpError("ps/err/out-of-range", kolo::add_process_set({0, n}).status());
  SetOpError("ps/err/rank-twice", kolo::add_process_set({1, 1}).status());
  SetOpError("ps/err/remove-unknown", kolo::remove_process_set(99));
  SetOpError("ps/err/remove-global", kolo::remove_process_set(0));
  // A dtype mismatch inside set 2 ({1,2}): its members only.
  if (g_rank == 1 || g_rank == 2) {
    std::vector<double> d(3, 1.0);
    std::vector<float> f(3, 1.0f);
    Tensor t = g_rank == 2 ? Tensor{DataType::kFloat32, {3}, f.data()}
                           : Tensor{DataType::kFloat64, {3}, d.data()};
    absl::Status s = Run(kolo::allreduce_async(t, t, {}, "ps/mismatch", 2));
    ReportError("ps/err/mismatch", s, GoodAfter("ps/err/mismatch", 2));
  }
  // Removing set 1 ({0,1}) while rank 0 has an op pending on it: an error
  // on every rank; then rank 1 submits the op too and it completes.
  {
    std::vector<Case> pending = {Allreduce("ps/pending", "ps/pending",
                                           ReduceOp::kSum,
                                           {DataType::kInt64, {4}}, 7, 1)};
    absl::StatusOr<Handle> h = Handle{0};
    if (g_rank == 0) h = pending[0].submit();
    SetOpError("ps/err/remove-pending", kolo::remove_process_set(1));
    if (g_rank == 1) h = pending[0].submit();
    if (g_rank <= 1) {
      OpResult result;
      absl::Status s = Run(h, &result);
      Report("ps/pending", s.ok() ? pending[0].check(result) : s.ToString());
    }
  }
  // Remove set 3 ({0,2}); using it fails; a new add gets id 4.
  {
    absl::Status removed = kolo::remove_process_set(3);
    std::string w = removed.ok() ? "" : removed.ToString();
    if (w.empty() && kolo::process_sets() != std::vector<ProcessSet>{0, 1, 2}) {
      w = absl::StrCat("process_sets() = ", Ids(kolo::process_sets()),
                       ", want 0,1,2");
    }
    Report("ps/remove", w);
    std::vector<int64_t> v(2, 1);
    Tensor t{DataType::kInt64, {2}, v.data()};
    SetOpError("ps/err/removed",
               kolo::allreduce_async(t, t, {}, "ps/removed", 3).status());
    SetOpError("ps/err/removed-ranks", kolo::process_set_ranks(3).status());
    SetOpError("ps/err/remove-twice", kolo::remove_process_set(3));
    absl::StatusOr<ProcessSet> again = kolo::add_process_set({2, 0});
    Report("ps/readd", !again.ok()   ? again.status().ToString()
                       : *again != 4 ? absl::StrCat("id ", *again, ", want 4")
                                     : "");
    if (again.ok() && (g_rank == 0 || g_rank == 2)) {
      std::vector<Case> cases = {Allreduce("ps/set4/x", "ps/x", ReduceOp::kSum,
                                           {DataType::kInt64, {6}}, 4, *again)};
      RunCases(cases, {0});
    }
  }
}

void StaticSets() {
  std::string w;
  if (kolo::process_sets() != std::vector<ProcessSet>{0, 1, 2}) {
    w = absl::StrCat("process_sets() = ", Ids(kolo::process_sets()),
                     ", want 0,1,2");
  }
  const std::vector<std::vector<int>> want = {{0, 1}, {1, 2}};
  for (int i = 0; i < 2 && w.empty(); ++i) {
    absl::StatusOr<std::vector<int>> r = kolo::process_set_ranks(i + 1);
    if (!r.ok() || *r != want[i]) {
      w = absl::StrCat("process_set_ranks(", i + 1, ") wrong: ",
                       r.ok() ? absl::StrJoin(*r, ",") : r.status().ToString());
    }
  }
  Report("static/ids", w);
  if (!w.empty()) return;
  SetCollectives({0, 1, 2});
  SetOpError("static/err/duplicate", kolo::add_process_set({0, 1}).status());
  absl::StatusOr<ProcessSet> id = kolo::add_process_set({0, 2});
  Report("static/add", !id.ok()   ? id.status().ToString()
                       : *id != 3 ? absl::StrCat("id ", *id, ", want 3")
                                  : "");
  if (id.ok() && g_rank != 1) {
    std::vector<Case> cases = {Allreduce("static/set3/x", "ps/x",
                                         ReduceOp::kSum,
                                         {DataType::kInt64, {6}}, 3, *id)};
    RunCases(cases, {0});
  }
}

}  // namespace groups_worker
