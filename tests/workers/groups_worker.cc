// kolo-groups-worker: grouped ops, join and process sets through the public
// API, with exact values, run under kolorun by
// tests/multiprocess_groups_test.cc, once per world size.
// Usage: kolo-groups-worker [--static-sets]
//
// Without a flag (the full run), in this order:
//   1. Grouped ops ("grp/..."): grouped allreduces (one per reduce op, mixed
//      dtypes and shapes, in place and not), a grouped allgather (a different
//      first dimension per rank), grouped reducescatters (default split) and
//      single allreduces, all in flight at once, odd ranks submitting them in
//      reverse order; then unnamed grouped ops (same order everywhere); then
//      the errors: a group whose inputs and outputs differ in number, an
//      empty group (both at once, locally), a member whose dtype differs on
//      the last rank (on every rank).
//   2. Process sets ("ps/...", world size >= 3): an add whose ranks differ
//      between ranks; {0,1}, {2,1}, {0,2} → ids 1, 2, 3; every collective on
//      every set this rank belongs to and on the global set, with the same
//      tensor names in every set, all in flight at once in a rank-dependent
//      order, plus unnamed ops per set; then local errors (a set this rank is
//      not in, an unknown set), negotiated errors (a duplicate set, the
//      global set, a rank out of range, a rank twice, removing an unknown
//      set or set 0, removing a set with an op pending, a dtype mismatch
//      inside a set), removal of set 3 and a new add (id 4). With two ranks:
//      the global set as an add fails, {1} works.
//   3. Join ("join/..."), twice: cycle 0 gives rank r r+1 batches, cycle 1
//      n-r; every batch allreduces int64 and float64 tensors with each reduce
//      op. After the first batch, the ranks that did not join yet run an
//      allgather, broadcast, alltoall and reducescatter (each must fail,
//      naming the joined rank), a barrier (must complete), grouped
//      allreduces with each op and an allreduce on every process set they
//      belong to (the joined member contributes the identity). join() must
//      return the rank that joins last; an allreduce after it must work on
//      every rank.
// With --static-sets (run with KOLO_DISABLE_GROUP_FUSION=1): init() gets the
// static sets {0,1} and {1,2}; step 1 runs, then "static/..." checks the
// sets (ids, ops on them, a duplicate add, a new add).
//
// Values are small integers, so every result is exact whatever the reduction
// order; average divides by the set size (integers truncate toward zero).
//
// Prints, per rank:
//   GRP_OK case=C rank=R                 a data case was right
//   GRP_FAIL case=C rank=R <why>         it was not (then exit code 4)
//   GRP_ERR case=C rank=R code=K next=0|1
//                                        an error case's status code, and
//                                        whether the good op after it worked
//   GRP_MSG case=C rank=R: <message>     that status's message
//   GRP_IDS rank=R ids=A,B,C             the ids add_process_set returned
//   GRP_JOIN rank=R cycle=C last=L       what join() returned
//   GRP_DONE rank=R size=N fails=F
// Every wait is bounded; nothing here can hang a test run.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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
using kolo::ProcessSet;
using kolo::ReduceOp;
using kolo::Tensor;

const absl::Duration kWait = absl::Seconds(30);

int g_rank = -1;
int g_size = 0;
int g_fails = 0;

// ---- Elements (int32, int64, float32, float64; exact values only) ----------

size_t Size(DataType t) { return kolo::DataTypeSize(t); }
std::string Name(DataType t) { return std::string(kolo::DataTypeName(t)); }
std::string OpName(ReduceOp op) { return std::string(kolo::ReduceOpName(op)); }

bool IsInt(DataType t) {
  return t == DataType::kInt32 || t == DataType::kInt64;
}

using kolo::testing::Bytes;
using kolo::testing::CompareShape;
using kolo::testing::Elements;

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

// ---- Values and reductions --------------------------------------------------

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

// ---- Reporting --------------------------------------------------------------

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

absl::Status Run(const absl::StatusOr<Handle>& h, OpResult* result = nullptr) {
  if (!h.ok()) return h.status();
  return kolo::synchronize(*h, kWait, result);
}

// A good allreduce on `set` after an error (every member calls it): the job
// goes on.
bool GoodAfter(const std::string& name,
               ProcessSet set = kolo::kGlobalProcessSet) {
  const std::vector<int> ranks = SetRanks(set);
  std::vector<int64_t> v = {g_rank + 1, 5};
  Tensor t{DataType::kInt64, {2}, v.data()};
  absl::Status s = Run(kolo::allreduce_async(t, t, {}, "good/" + name, set));
  int64_t sum = 0;
  for (int r : ranks) sum += r + 1;
  return s.ok() && v[0] == sum &&
         v[1] == 5 * static_cast<int64_t>(ranks.size());
}

// ---- Cases ------------------------------------------------------------------

// One submitted op: its buffers live in the lambdas' captures; `check`
// compares them after synchronize ("" when right).
struct Case {
  std::string report;  // the name printed
  std::function<absl::StatusOr<Handle>()> submit;
  std::function<std::string(const OpResult&)> check;
};

constexpr char kSentinel = 0x5a;

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

struct Member {
  DataType t;
  std::vector<int64_t> shape;
};

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

// A grouped allreduce of `members` (member 0 in place, the others not);
// an empty `name` leaves it unnamed. `training`: the members that contribute
// (empty: all; the others joined and contribute the identity).
Case GroupedAllreduce(const std::string& report, const std::string& name,
                      ReduceOp op, const std::vector<Member>& members, int salt,
                      ProcessSet set = kolo::kGlobalProcessSet,
                      std::vector<int> training = {}) {
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
               Member m, int salt, ProcessSet set = kolo::kGlobalProcessSet) {
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

// Rows of an allgather input on global rank r for member i.
using RowsFn = std::function<int64_t(int r, size_t i)>;

// Allgather values: rank r's row-major element j of member i.
double GatherValue(int r, size_t i, int64_t j) {
  return static_cast<double>(100 * r + 10 * static_cast<int64_t>(i) + j % 10 -
                             (j / 10) * 3);
}

// A grouped allgather (`grouped`) or a single one (members.size() == 1):
// members[i].shape are the trailing dimensions.
Case Allgather(const std::string& report, const std::string& name,
               const std::vector<Member>& members, RowsFn rows, bool grouped,
               ProcessSet set = kolo::kGlobalProcessSet) {
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
                          int salt, ProcessSet set = kolo::kGlobalProcessSet) {
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

// ---- 1. Grouped ops ---------------------------------------------------------

constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                             ReduceOp::kMax, ReduceOp::kProduct};

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

// ---- 2. Process sets --------------------------------------------------------

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

// ---- 3. Join ----------------------------------------------------------------

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

// ---- --static-sets ----------------------------------------------------------

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

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const bool static_sets = argc > 1 && std::string(argv[1]) == "--static-sets";
  kolo::InitOptions options;
  if (static_sets) options.process_sets = {{0, 1}, {2, 1}};
  if (absl::Status s = kolo::init(options); !s.ok()) {
    std::printf("GRP_FAIL case=init rank=-1 %s\n", s.ToString().c_str());
    return 4;
  }
  g_rank = kolo::rank();
  g_size = kolo::size();
  Grouped();
  if (static_sets) {
    StaticSets();
  } else {
    ProcessSets();
    std::vector<ProcessSet> sets = kolo::process_sets();
    sets.erase(sets.begin());  // not the global set
    Join(sets);
  }
  std::printf("GRP_DONE rank=%d size=%d fails=%d\n", g_rank, g_size, g_fails);
  std::fflush(stdout);
  if (absl::Status s = kolo::shutdown(); !s.ok()) {
    std::printf("GRP_FAIL case=shutdown rank=%d %s\n", g_rank,
                s.ToString().c_str());
    return 4;
  }
  return g_fails == 0 ? 0 : 4;
}
