// kolo-groups-worker (groups_worker.h): the cases, one op each of any
// collective (grouped or not, named or not, on any process set) with the
// exact result this rank must get, and running a list of them with every op
// in flight at once.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/workers/groups_worker.h"

namespace groups_worker {
namespace {

// Allgather values: rank r's row-major element j of member i.
double GatherValue(int r, size_t i, int64_t j) {
  return static_cast<double>(100 * r + 10 * static_cast<int64_t>(i) + j % 10 -
                             (j / 10) * 3);
}

}  // namespace

// An allocator into `out` that records the shape it was asked for.
kolo::Allocator AllocInto(std::shared_ptr<Bytes> out, DataType t) {
  return [out, t](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    out->assign(static_cast<size_t>(elements) * Size(t) + 1, kSentinel);
    out->pop_back();  // non-null data even for zero elements
    return out->data();
  };
}

// A grouped allreduce of `members` (member 0 in place, the others not);
// an empty `name` leaves it unnamed. `training`: the members that contribute
// (empty: all; the others joined and contribute the identity).
Case GroupedAllreduce(const std::string& report, const std::string& name,
                      ReduceOp op, const std::vector<Member>& members, int salt,
                      ProcessSet set, std::vector<int> training) {
  const std::vector<int> all = SetRanks(set);
  const int k = static_cast<int>(all.size());
  const std::vector<int> ranks = training.empty() ? all : training;
  auto ins = std::make_shared<std::vector<Bytes>>();
  auto outs = std::make_shared<std::vector<Bytes>>();
  auto wants = std::make_shared<std::vector<Bytes>>();
  auto originals = std::make_shared<std::vector<Bytes>>();
  for (size_t i = 0; i < members.size(); ++i) {
    const Member& m = members[i];
    const int64_t count = Elements(m.shape);
    const int s = salt + 3 * static_cast<int>(i);
    ins->push_back(MyValues(m.t, op, count, s));
    originals->push_back(ins->back());
    outs->push_back(Bytes(ins->back().size(), kSentinel));
    wants->push_back(ReducedValues(m.t, op, count, ranks, s, k));
  }
  kolo::AllreduceOptions o;
  o.op = op;
  Case c;
  c.report = report;
  c.submit = [=] {
    std::vector<Tensor> in, out;
    for (size_t i = 0; i < members.size(); ++i) {
      in.push_back(Tensor{members[i].t, members[i].shape, (*ins)[i].data()});
      out.push_back(Tensor{members[i].t, members[i].shape,
                           i == 0 ? (*ins)[i].data() : (*outs)[i].data()});
    }
    return kolo::grouped_allreduce_async(in, out, o, name, set);
  };
  c.check = [=](const OpResult& r) -> std::string {
    if (r.members.size() != members.size()) {
      return absl::StrCat("OpResult.members has ", r.members.size(),
                          " entries, want ", members.size());
    }
    for (size_t i = 0; i < members.size(); ++i) {
      const std::string m =
          absl::StrCat("member ", i, " (", Name(members[i].t), " ",
                       kolo::testing::ShapeText(members[i].shape), ")");
      std::string why =
          CompareShape(m + " shape", r.members[i].shape, members[i].shape);
      if (why.empty()) {
        why = kolo::testing::CompareElements(members[i].t, m + " output",
                                             i == 0 ? (*ins)[i] : (*outs)[i],
                                             (*wants)[i]);
      }
      if (why.empty() && i != 0) {
        why = kolo::testing::CompareElements(members[i].t, m + " input",
                                             (*ins)[i], (*originals)[i]);
      }
      if (!why.empty()) return why;
    }
    return "";
  };
  return c;
}

// A single allreduce (out of place).
Case Allreduce(const std::string& report, const std::string& name, ReduceOp op,
               Member m, int salt, ProcessSet set) {
  const std::vector<int> ranks = SetRanks(set);
  const int64_t count = Elements(m.shape);
  auto in = std::make_shared<Bytes>(MyValues(m.t, op, count, salt));
  auto out = std::make_shared<Bytes>(in->size(), kSentinel);
  auto want = std::make_shared<Bytes>(ReducedValues(
      m.t, op, count, ranks, salt, static_cast<int>(ranks.size())));
  kolo::AllreduceOptions o;
  o.op = op;
  Case c;
  c.report = report;
  c.submit = [=] {
    return kolo::allreduce_async(Tensor{m.t, m.shape, in->data()},
                                 Tensor{m.t, m.shape, out->data()}, o, name,
                                 set);
  };
  c.check = [=](const OpResult& r) {
    std::string why = CompareShape("OpResult.shape", r.shape, m.shape);
    if (why.empty())
      why = kolo::testing::CompareElements(m.t, "output", *out, *want);
    return why;
  };
  return c;
}

// A grouped allgather (`grouped`) or a single one (members.size() == 1):
// members[i].shape are the trailing dimensions.
Case Allgather(const std::string& report, const std::string& name,
               const std::vector<Member>& members, RowsFn rows, bool grouped,
               ProcessSet set) {
  const std::vector<int> ranks = SetRanks(set);
  auto ins = std::make_shared<std::vector<Bytes>>();
  auto outs = std::make_shared<std::vector<std::shared_ptr<Bytes>>>();
  auto wants = std::make_shared<std::vector<Bytes>>();
  std::vector<std::vector<int64_t>> in_shapes, out_shapes, splits;
  for (size_t i = 0; i < members.size(); ++i) {
    const Member& m = members[i];
    const int64_t row = Elements(m.shape);
    std::vector<double> mine, all;
    std::vector<int64_t> split;
    int64_t total = 0;
    for (int r : ranks) {
      const int64_t n = rows(r, i);
      split.push_back(n);
      total += n;
      for (int64_t j = 0; j < n * row; ++j) {
        all.push_back(GatherValue(r, i, j));
        if (r == g_rank) mine.push_back(GatherValue(r, i, j));
      }
    }
    std::vector<int64_t> in_shape = {rows(g_rank, i)}, out_shape = {total};
    in_shape.insert(in_shape.end(), m.shape.begin(), m.shape.end());
    out_shape.insert(out_shape.end(), m.shape.begin(), m.shape.end());
    in_shapes.push_back(in_shape);
    out_shapes.push_back(out_shape);
    splits.push_back(split);
    ins->push_back(EncodeAll(m.t, mine));
    ins->back().push_back(0);  // non-null data even for zero rows
    ins->back().pop_back();
    outs->push_back(std::make_shared<Bytes>());
    wants->push_back(EncodeAll(m.t, all));
  }
  Case c;
  c.report = report;
  c.submit = [=]() -> absl::StatusOr<Handle> {
    std::vector<Tensor> in;
    std::vector<kolo::Allocator> alloc;
    for (size_t i = 0; i < members.size(); ++i) {
      in.push_back(Tensor{members[i].t, in_shapes[i], (*ins)[i].data()});
      alloc.push_back(AllocInto((*outs)[i], members[i].t));
    }
    if (grouped) return kolo::grouped_allgather_async(in, alloc, name, set);
    return kolo::allgather_async(in[0], alloc[0], name, set);
  };
  c.check = [=](const OpResult& r) -> std::string {
    std::vector<const OpResult*> results;
    if (grouped) {
      if (r.members.size() != members.size()) {
        return absl::StrCat("OpResult.members has ", r.members.size(),
                            " entries, want ", members.size());
      }
      for (const OpResult& m : r.members) results.push_back(&m);
    } else {
      results.push_back(&r);
    }
    for (size_t i = 0; i < members.size(); ++i) {
      const std::string m = absl::StrCat("member ", i);
      std::string why =
          CompareShape(m + " shape", results[i]->shape, out_shapes[i]);
      if (why.empty()) {
        why = CompareShape(m + " splits", results[i]->splits, splits[i]);
      }
      if (why.empty()) {
        why = kolo::testing::CompareElements(members[i].t, m + " output",
                                             *(*outs)[i], (*wants)[i]);
      }
      if (!why.empty()) return why;
    }
    return "";
  };
  return c;
}

// A grouped reducescatter with the default split of each member's first
// dimension (members[i].shape is the full input shape).
Case GroupedReducescatter(const std::string& report, const std::string& name,
                          ReduceOp op, const std::vector<Member>& members,
                          int salt, ProcessSet set) {
  const std::vector<int> ranks = SetRanks(set);
  const int k = static_cast<int>(ranks.size());
  const int me = IndexIn(ranks, g_rank);
  auto ins = std::make_shared<std::vector<Bytes>>();
  auto outs = std::make_shared<std::vector<Bytes>>();
  auto wants = std::make_shared<std::vector<Bytes>>();
  std::vector<std::vector<int64_t>> out_shapes;
  for (size_t i = 0; i < members.size(); ++i) {
    const Member& m = members[i];
    const int s = salt + 5 * static_cast<int>(i);
    const int64_t d0 = m.shape.at(0);
    const int64_t row = Elements(m.shape) / std::max<int64_t>(d0, 1);
    int64_t first = 0;
    for (int p = 0; p < me; ++p) first += d0 / k + (p < d0 % k ? 1 : 0);
    const int64_t mine = d0 / k + (me < d0 % k ? 1 : 0);
    std::vector<int64_t> out_shape = m.shape;
    out_shape[0] = mine;
    out_shapes.push_back(out_shape);
    ins->push_back(MyValues(m.t, op, Elements(m.shape), s));
    const Bytes all = ReducedValues(m.t, op, Elements(m.shape), ranks, s, k);
    const size_t e = Size(m.t);
    wants->push_back(Bytes(all.begin() + first * row * e,
                           all.begin() + (first + mine) * row * e));
    outs->push_back(Bytes(wants->back().size() + 1, kSentinel));
    outs->back().pop_back();
  }
  kolo::AllreduceOptions o;
  o.op = op;
  Case c;
  c.report = report;
  c.submit = [=] {
    std::vector<Tensor> in, out;
    for (size_t i = 0; i < members.size(); ++i) {
      in.push_back(Tensor{members[i].t, members[i].shape, (*ins)[i].data()});
      out.push_back(Tensor{members[i].t, out_shapes[i], (*outs)[i].data()});
    }
    return kolo::grouped_reducescatter_async(in, out, o, name, set);
  };
  c.check = [=](const OpResult& r) -> std::string {
    if (r.members.size() != members.size()) {
      return absl::StrCat("OpResult.members has ", r.members.size(),
                          " entries, want ", members.size());
    }
    for (size_t i = 0; i < members.size(); ++i) {
      const std::string m = absl::StrCat("member ", i);
      std::string why =
          CompareShape(m + " shape", r.members[i].shape, out_shapes[i]);
      if (why.empty()) {
        why = kolo::testing::CompareElements(members[i].t, m + " output",
                                             (*outs)[i], (*wants)[i]);
      }
      if (!why.empty()) return why;
    }
    return "";
  };
  return c;
}

// A broadcast of float32 [5] from global rank `root` on `set`.
Case Broadcast(const std::string& report, const std::string& name, int root,
               int salt, ProcessSet set) {
  auto buf = std::make_shared<Bytes>(
      MyValues(DataType::kFloat32, ReduceOp::kSum, 5, salt));
  std::vector<double> want;
  for (int64_t j = 0; j < 5; ++j) {
    want.push_back(Value(ReduceOp::kSum, root, j, salt));
  }
  auto wanted = std::make_shared<Bytes>(EncodeAll(DataType::kFloat32, want));
  Case c;
  c.report = report;
  c.submit = [=] {
    return kolo::broadcast_async(Tensor{DataType::kFloat32, {5}, buf->data()},
                                 root, name, set);
  };
  c.check = [=](const OpResult&) {
    return kolo::testing::CompareElements(DataType::kFloat32, "tensor", *buf,
                                          *wanted);
  };
  return c;
}

// An int32 [rows, 2] alltoall on `set` with one split per member: member p
// sends (p + q) % 2 + 1 rows to member q; element (t, col) of what p sends q
// is 1000 p' + 100 q' + 10 t + col (p', q': global ranks).
Case Alltoall(const std::string& report, const std::string& name,
              ProcessSet set) {
  const std::vector<int> ranks = SetRanks(set);
  const int k = static_cast<int>(ranks.size());
  const int me = IndexIn(ranks, g_rank);
  auto split_of = [](int p, int q) { return int64_t{(p + q) % 2 + 1}; };
  auto value = [&](int p, int q, int64_t t, int col) {
    return static_cast<double>(1000 * ranks[p] + 100 * ranks[q] + 10 * t + col);
  };
  std::vector<int64_t> splits, recv;
  std::vector<double> mine, want;
  for (int q = 0; q < k; ++q) {
    splits.push_back(split_of(me, q));
    for (int64_t t = 0; t < split_of(me, q); ++t) {
      for (int col = 0; col < 2; ++col) mine.push_back(value(me, q, t, col));
    }
  }
  int64_t total = 0;
  for (int p = 0; p < k; ++p) {
    recv.push_back(split_of(p, me));
    total += split_of(p, me);
    for (int64_t t = 0; t < split_of(p, me); ++t) {
      for (int col = 0; col < 2; ++col) want.push_back(value(p, me, t, col));
    }
  }
  int64_t sent = 0;
  for (int64_t s : splits) sent += s;
  auto in = std::make_shared<Bytes>(EncodeAll(DataType::kInt32, mine));
  auto wanted = std::make_shared<Bytes>(EncodeAll(DataType::kInt32, want));
  auto out = std::make_shared<Bytes>();
  const std::vector<int64_t> out_shape = {total, 2};
  Case c;
  c.report = report;
  c.submit = [=] {
    return kolo::alltoall_async(Tensor{DataType::kInt32, {sent, 2}, in->data()},
                                AllocInto(out, DataType::kInt32), splits, name,
                                set);
  };
  c.check = [=](const OpResult& r) {
    std::string why = CompareShape("OpResult.shape", r.shape, out_shape);
    if (why.empty()) why = CompareShape("OpResult.splits", r.splits, recv);
    if (why.empty())
      why = kolo::testing::CompareElements(DataType::kInt32, "output", *out,
                                           *wanted);
    return why;
  };
  return c;
}

// An int64 [sum counts, 3] sum-reducescatter on `set` with counts p + 1 for
// member p.
Case Reducescatter(const std::string& report, const std::string& name, int salt,
                   ProcessSet set) {
  const std::vector<int> ranks = SetRanks(set);
  const int k = static_cast<int>(ranks.size());
  const int me = IndexIn(ranks, g_rank);
  std::vector<int64_t> counts;
  int64_t d0 = 0, first = 0;
  for (int p = 0; p < k; ++p) {
    counts.push_back(p + 1);
    if (p < me) first += p + 1;
    d0 += p + 1;
  }
  const DataType t = DataType::kInt64;
  auto in = std::make_shared<Bytes>(MyValues(t, ReduceOp::kSum, d0 * 3, salt));
  const Bytes all = ReducedValues(t, ReduceOp::kSum, d0 * 3, ranks, salt, k);
  auto want = std::make_shared<Bytes>(all.begin() + first * 3 * 8,
                                      all.begin() + (first + me + 1) * 3 * 8);
  auto out = std::make_shared<Bytes>(want->size(), kSentinel);
  const std::vector<int64_t> out_shape = {me + 1, 3};
  Case c;
  c.report = report;
  c.submit = [=] {
    return kolo::reducescatter_async(Tensor{t, {d0, 3}, in->data()},
                                     Tensor{t, out_shape, out->data()}, {},
                                     counts, name, set);
  };
  c.check = [=](const OpResult& r) {
    std::string why = CompareShape("OpResult.shape", r.shape, out_shape);
    if (why.empty())
      why = kolo::testing::CompareElements(t, "output", *out, *want);
    return why;
  };
  return c;
}

Case Barrier(const std::string& report, const std::string& name,
             ProcessSet set) {
  Case c;
  c.report = report;
  c.submit = [=] { return kolo::barrier_async(name, set); };
  c.check = [](const OpResult&) { return std::string(); };
  return c;
}

// Submits `cases` in `order`, then synchronizes each in list order and
// reports it.
void RunCases(const std::vector<Case>& cases, std::vector<size_t> order) {
  std::vector<absl::StatusOr<Handle>> handles(cases.size(), Handle{0});
  for (size_t i : order) handles[i] = cases[i].submit();
  for (size_t i = 0; i < cases.size(); ++i) {
    OpResult result;
    absl::Status s = Run(handles[i], &result);
    Report(cases[i].report, s.ok() ? cases[i].check(result)
                                   : absl::StrCat("status ", s.ToString()));
  }
}

std::vector<size_t> Identity(size_t n) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  return order;
}

}  // namespace groups_worker
