// kolo-groups-worker's shared parts (tests/workers/groups_worker.cc says what
// the program runs and prints): this rank and the world size, the test values
// and their expected reductions, the reporting lines, and the cases (one op
// of any collective, grouped or not, on any process set, submitted and then
// checked exactly). The steps live one file per feature:
// groups_worker_grouped.cc (1. grouped ops), groups_worker_sets.cc (2.
// process sets, and --static-sets), groups_worker_join.cc (3. join); the
// cases in groups_worker_cases.cc, the values and reporting in
// groups_worker_common.cc.
//
// Thread-safety: the program's main thread only. g_rank and g_size are set
// once after init(); g_fails counts the failed checks.
#ifndef KOLO_TESTS_WORKERS_GROUPS_WORKER_H_
#define KOLO_TESTS_WORKERS_GROUPS_WORKER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kolo/kolo.h"
#include "tests/testing/elements.h"

namespace groups_worker {

using kolo::DataType;
using kolo::Handle;
using kolo::OpResult;
using kolo::ProcessSet;
using kolo::ReduceOp;
using kolo::Tensor;

using kolo::testing::Bytes;
using kolo::testing::CompareShape;
using kolo::testing::Elements;

inline constexpr absl::Duration kWait = absl::Seconds(30);

inline int g_rank = -1;
inline int g_size = 0;
inline int g_fails = 0;

// Every reduce op, in the order the steps use them.
inline constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage,
                                    ReduceOp::kMin, ReduceOp::kMax,
                                    ReduceOp::kProduct};

// ---- Elements, values, reporting (groups_worker_common.cc) ------------------

size_t Size(DataType t);
std::string Name(DataType t);
std::string OpName(ReduceOp op);

// The values as elements of t; every test value here is exact in its dtype
// (one that is not is a bug of this worker: it stops).
Bytes EncodeAll(DataType t, const std::vector<double>& values);

// Rank r's element j of a tensor with `salt`: small integers of both signs,
// or -1, 1, 2 for a product.
double Value(ReduceOp op, int r, int64_t j, int salt);

// Expected reduction of `count` elements over `ranks` (the set's members
// that contribute), dividing an average by `divisor`.
Bytes ReducedValues(DataType t, ReduceOp op, int64_t count,
                    const std::vector<int>& ranks, int salt, int divisor);
// This rank's `count` elements with `salt`.
Bytes MyValues(DataType t, ReduceOp op, int64_t count, int salt);

// The global ranks of a process set (0: every rank).
std::vector<int> SetRanks(ProcessSet set);
// The index of `rank` in `ranks`, or -1.
int IndexIn(const std::vector<int>& ranks, int rank);

// GRP_OK, or GRP_FAIL with `why` (counted in g_fails).
void Report(const std::string& name, const std::string& why);
// GRP_ERR and GRP_MSG for an error case; `next`: the good op after it
// worked (if not, counted in g_fails).
void ReportError(const std::string& name, const absl::Status& s, bool next);
// Synchronizes `h` within kWait (its status if it was not submitted).
absl::Status Run(const absl::StatusOr<Handle>& h, OpResult* result = nullptr);
// A good allreduce on `set` after an error (every member calls it): the job
// goes on.
bool GoodAfter(const std::string& name,
               ProcessSet set = kolo::kGlobalProcessSet);

// ---- Cases (groups_worker_cases.cc) -----------------------------------------

// One submitted op: its buffers live in the lambdas' captures; `check`
// compares them after synchronize ("" when right).
struct Case {
  std::string report;  // the name printed
  std::function<absl::StatusOr<Handle>()> submit;
  std::function<std::string(const OpResult&)> check;
};

inline constexpr char kSentinel = 0x5a;

// An allocator into `out` that records the shape it was asked for.
kolo::Allocator AllocInto(std::shared_ptr<Bytes> out, DataType t);

struct Member {
  DataType t;
  std::vector<int64_t> shape;
};

// A grouped allreduce of `members` (member 0 in place, the others not);
// an empty `name` leaves it unnamed. `training`: the members that contribute
// (empty: all; the others joined and contribute the identity).
Case GroupedAllreduce(const std::string& report, const std::string& name,
                      ReduceOp op, const std::vector<Member>& members, int salt,
                      ProcessSet set = kolo::kGlobalProcessSet,
                      std::vector<int> training = {});

// A single allreduce (out of place).
Case Allreduce(const std::string& report, const std::string& name, ReduceOp op,
               Member m, int salt, ProcessSet set = kolo::kGlobalProcessSet);

// Rows of an allgather input on global rank r for member i.
using RowsFn = std::function<int64_t(int r, size_t i)>;

// A grouped allgather (`grouped`) or a single one (members.size() == 1):
// members[i].shape are the trailing dimensions.
Case Allgather(const std::string& report, const std::string& name,
               const std::vector<Member>& members, RowsFn rows, bool grouped,
               ProcessSet set = kolo::kGlobalProcessSet);

// A grouped reducescatter with the default split of each member's first
// dimension (members[i].shape is the full input shape).
Case GroupedReducescatter(const std::string& report, const std::string& name,
                          ReduceOp op, const std::vector<Member>& members,
                          int salt, ProcessSet set = kolo::kGlobalProcessSet);

// A broadcast of float32 [5] from global rank `root` on `set`.
Case Broadcast(const std::string& report, const std::string& name, int root,
               int salt, ProcessSet set);

// An int32 [rows, 2] alltoall on `set` with one split per member: member p
// sends (p + q) % 2 + 1 rows to member q; element (t, col) of what p sends q
// is 1000 p' + 100 q' + 10 t + col (p', q': global ranks).
Case Alltoall(const std::string& report, const std::string& name,
              ProcessSet set);

// An int64 [sum counts, 3] sum-reducescatter on `set` with counts p + 1 for
// member p.
Case Reducescatter(const std::string& report, const std::string& name, int salt,
                   ProcessSet set);

Case Barrier(const std::string& report, const std::string& name,
             ProcessSet set);

// Submits `cases` in `order`, then synchronizes each in list order and
// reports it.
void RunCases(const std::vector<Case>& cases, std::vector<size_t> order);

// 0, 1, ..., n - 1.
std::vector<size_t> Identity(size_t n);

// ---- The steps
// ----------------------------------------------------------------

// 1. Grouped ops (groups_worker_grouped.cc).
void Grouped();
// 2. Process sets (groups_worker_sets.cc).
void ProcessSets();
// --static-sets: the sets init() was given (groups_worker_sets.cc).
void StaticSets();
// 3. Join, twice, with allreduces on `sets` while a rank has joined
// (groups_worker_join.cc).
void Join(const std::vector<ProcessSet>& sets);

}  // namespace groups_worker

#endif  // KOLO_TESTS_WORKERS_GROUPS_WORKER_H_
