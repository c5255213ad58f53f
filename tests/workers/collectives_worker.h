// kolo-collectives-worker's shared parts (tests/workers/collectives_worker.cc
// says what the program runs and prints): this rank and the world size, the
// test values and the results expected of them, and one data case (an op
// submitted, then checked bit for bit). The cases live one file per kind of
// collective: collectives_worker_reductions.cc (allreduce, reducescatter),
// collectives_worker_movement.cc (allgather, broadcast, alltoall),
// collectives_worker_errors.cc (the error cases); the values in
// collectives_worker_values.cc.
//
// Thread-safety: the program's main thread only. g_rank and g_size are set
// once after init(); g_fails counts the failed checks.
#ifndef KOLO_TESTS_WORKERS_COLLECTIVES_WORKER_H_
#define KOLO_TESTS_WORKERS_COLLECTIVES_WORKER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kolo/kolo.h"
#include "tests/testing/elements.h"

namespace collectives_worker {

using kolo::DataType;
using kolo::Handle;
using kolo::OpResult;
using kolo::ReduceOp;
using kolo::Tensor;

inline constexpr absl::Duration kWait = absl::Seconds(30);

inline int g_rank = -1;
inline int g_size = 0;
inline int g_fails = 0;

// ---- Elements (tests/testing/elements.h) ------------------------------------

using kolo::testing::Bytes;
using kolo::testing::CompareShape;
using kolo::testing::Elements;
using kolo::testing::EncodeAll;

size_t Size(DataType t);
std::string Name(DataType t);
std::string OpName(ReduceOp op);

// ---- Values and expectations (collectives_worker_values.cc) -----------------

enum class Values {
  kMixed,    // a * (rank + 1) + c, a in -3..3, c in -1..2
  kProduct,  // -1, 1, 2 or 3 (and 0 on rank 0 now and then)
  kInexact,  // 0..9 on rank 0, 0 elsewhere: averages are not exact
};

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

// This rank's inputs and every element of the reduced result.
void ReductionData(const Reduction& s, int64_t count, Bytes* in, Bytes* want,
                   std::string* bad);

// "/preP/postQ" for the factors that are not 1 (for case names).
std::string ScaleName(double pre, double post);

// ---- Data cases -------------------------------------------------------------

// One submitted collective: its buffers live in `state` (captured by the
// lambdas), `check` compares them after synchronize ("" when right).
struct Case {
  std::string name;
  std::function<absl::StatusOr<Handle>()> submit;
  std::function<std::string(const OpResult&)> check;
  std::string bad;  // a problem building the case (an inexact test value)
};

inline constexpr char kSentinel = 0x5a;

// An allocator into `out` (filled with kSentinel) that records the shape it
// was asked for in `asked`.
kolo::Allocator AllocInto(std::shared_ptr<Bytes> out, DataType t,
                          std::shared_ptr<std::vector<int64_t>> asked);

// The data cases of each collective, in the order they run.
std::vector<Case> AllreduceCases();      // collectives_worker_reductions.cc
std::vector<Case> ReducescatterCases();  // collectives_worker_reductions.cc
std::vector<Case> AllgatherCases();      // collectives_worker_movement.cc
std::vector<Case> BroadcastCases();      // collectives_worker_movement.cc
std::vector<Case> AlltoallCases();       // collectives_worker_movement.cc

// The error cases (collectives_worker_errors.cc): runs each, prints its
// COLL_ERR and COLL_MSG lines, returns how many ran.
int RunErrorCases();

}  // namespace collectives_worker

#endif  // KOLO_TESTS_WORKERS_COLLECTIVES_WORKER_H_
